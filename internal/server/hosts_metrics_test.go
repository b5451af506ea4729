package server_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// metric is the value of the sample named name (with its labels, if
// any) in a /metrics body; -1 if there is none.
func metric(body, name string) float64 {
	for l := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// scrapeUntil scrapes srv's /metrics until every sample of want has its
// value (10 s at most) and reports those that did not.
func scrapeUntil(t *testing.T, srv *instance, what string, want map[string]float64) {
	t.Helper()
	var body string
	var wrong []string
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		body = string(srv.get(t, "/metrics", "").body)
		wrong = wrong[:0]
		for name, v := range want {
			if got := metric(body, name); got != v {
				wrong = append(wrong, fmt.Sprintf("%s %v, want %v", name, got, v))
			}
		}
		if len(wrong) == 0 || time.Now().After(end) {
			break
		}
	}
	for _, w := range wrong {
		t.Errorf("%s: %s", what, w)
	}
}

// TestHostMetrics: /metrics of a real server counts its agent hosts
// (enrolled, online, revoked), the slots the online ones offer and the
// runs they hold, the claims served with their wait, and the runs lost
// by a host that stopped heartbeating.
func TestHostMetrics(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.extra = []string{"--local-worker", "0"}
		srv := start(t, c)
		a := srv.post(t, "/v1/hosts/enrol", "", map[string]any{"token": enrolToken(t, c), "name": "big", "slots": 3, "backends": []string{"host"}})
		if a.status != http.StatusCreated {
			t.Fatalf("enrol: %d %s", a.status, a.body)
		}
		big, _ := a.doc(t)["credential"].(string)
		enrolHost(t, srv, c, "idle", nil)
		gone := enrolHost(t, srv, c, "gone", nil)
		id, _, _ := strings.Cut(gone, ".")
		cmd := exec.Command(testsupport.Agentrun(t), "server", "revoke-host", id, "--data", c.data, "--database-url", c.db)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("revoke-host: %v: %s", err, out)
		}
		if a := srv.asHost(t, big, "POST", "/v1/hosts/heartbeat", "", map[string]any{"runs": []any{}}); a.status != 200 {
			t.Fatalf("heartbeat: %d %s", a.status, a.body)
		}
		scrapeUntil(t, srv, "enrolled", map[string]float64{"agentrun_hosts_enrolled": 2, "agentrun_hosts_online": 1,
			"agentrun_hosts_revoked": 1, "agentrun_host_slots": 3, "agentrun_host_runs": 0, "agentrun_host_claims_total": 0,
			"agentrun_host_runs_lost_total": 0, "agentrun_host_claim_wait_seconds_count": 0})

		repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
		run := srv.runID(t, spec("held", "sleep 30", nil), bundleOf(t, repo))
		a = srv.asHost(t, big, "POST", "/v1/hosts/claim", "", map[string]any{"backends": []string{"host"}, "wait_ms": 5000})
		if r, _ := a.doc(t)["run"].(map[string]any); r == nil || r["id"] != run {
			t.Fatalf("claim: %s", a.body)
		}
		scrapeUntil(t, srv, "claimed", map[string]float64{"agentrun_host_runs": 1, "agentrun_host_claims_total": 1,
			"agentrun_host_claim_wait_seconds_count": 1, "agentrun_hosts_online": 1})

		// The host stops heartbeating: after the lease TTL (2 s) its run
		// is lost to it, and it is no longer online.
		scrapeUntil(t, srv, "lost", map[string]float64{"agentrun_host_runs": 0, "agentrun_host_runs_lost_total": 1,
			"agentrun_hosts_online": 0, "agentrun_host_slots": 0, "agentrun_hosts_enrolled": 2})
	})
}
