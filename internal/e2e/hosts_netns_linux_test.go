package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// netns is a network namespace made for a test, joined to this one by a
// veth pair: this side is 10.213.K.1, the namespace's 10.213.K.2.
type netns struct {
	name, peer, inner string
	k                 int
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func newNetns(t *testing.T, tag string, k int) *netns {
	t.Helper()
	n := &netns{name: fmt.Sprintf("ar-%s-%d", tag, k), peer: fmt.Sprintf("ar%s%do", tag, k), inner: fmt.Sprintf("ar%s%di", tag, k), k: k}
	sweepNetns(t, k)
	ipCmd(t, "netns", "add", n.name)
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", n.peer).Run()
		_ = exec.Command("ip", "netns", "del", n.name).Run()
	})
	ipCmd(t, "link", "add", n.peer, "type", "veth", "peer", "name", n.inner)
	ipCmd(t, "link", "set", n.inner, "netns", n.name)
	ipCmd(t, "addr", "add", fmt.Sprintf("10.213.%d.1/30", k), "dev", n.peer)
	ipCmd(t, "link", "set", n.peer, "up")
	ipCmd(t, "-n", n.name, "addr", "add", fmt.Sprintf("10.213.%d.2/30", k), "dev", n.inner)
	ipCmd(t, "-n", n.name, "link", "set", n.inner, "up")
	ipCmd(t, "-n", n.name, "link", "set", "lo", "up")
	return n
}

// staleNetns names a namespace newNetns made for k ("ar-TAG-K").
var staleNetns = regexp.MustCompile(`^ar-[0-9a-f]{4}-([0-9]+)$`)

// sweepNetns removes the namespace for k that a test killed before its
// cleanup left (its veth pair goes with it, and with it the address
// 10.213.K.1 the next one needs): a test's own are removed before the
// next subtest makes its.
func sweepNetns(t *testing.T, k int) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if m := staleNetns.FindStringSubmatch(name); m != nil && m[1] == strconv.Itoa(k) {
			t.Logf("removing the namespace %s a killed test left", name)
			ipCmd(t, "netns", "del", name)
		}
	}
}

// cut takes the namespace's link down (its host cannot reach the
// server) or up again.
func (n *netns) cut(t *testing.T, down bool) {
	t.Helper()
	state := "up"
	if down {
		state = "down"
	}
	ipCmd(t, "-n", n.name, "link", "set", n.inner, state)
}

// Stretch of the host-loss tests: a server and three agent hosts, each in
// a network namespace of its own reached over a veth pair; 50 runs
// submitted from the CLI; one host killed with SIGKILL mid-run and
// another cut off the network past the lease TTL. Every run succeeds
// exactly once (one export in its journal, the right branch in the
// project) and no run's claims overlap.
func TestHostsInNetworkNamespaces(t *testing.T) {
	testsupport.Program(t, "ip")
	testsupport.Require(t, "root", os.Geteuid() == 0, "network namespaces are made with ip netns, as root")
	if testing.Short() {
		t.Skip("50 runs on three hosts")
	}
	for _, tg := range sqltest.Targets {
		t.Run(tg.Name, func(t *testing.T) {
			var b [2]byte
			_, _ = rand.Read(b[:])
			tag := hex.EncodeToString(b[:])
			e := newEnv(t)
			tm := &team{e: e}
			if tg.Name == "SQLite" {
				tm.db = "sqlite:" + filepath.Join(e.root, "server", "agentrun.db")
			} else {
				tm.db = tg.URL(t)
				tm.dbf = []string{"--database-url", tm.db}
			}
			nss := []*netns{newNetns(t, tag, 1), newNetns(t, tag, 2), newNetns(t, tag, 3)}
			tokFile := filepath.Join(e.root, "user-token")
			if err := os.WriteFile(tokFile, []byte("user-"+tag+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			u := e.teamServer(append([]string{"--listen", "0.0.0.0:0", "--listen-any", "--token-file", tokFile,
				"--local-worker", "0", "--lease-ttl", hostTTL.String()}, tm.dbf...)...)
			port := u[strings.LastIndex(u, ":")+1:]
			tm.url = "http://127.0.0.1:" + port
			tm.srv = []string{"AGENTRUN_SERVER=" + tm.url, "AGENTRUN_SERVER_TOKEN_FILE=" + tokFile}
			var hosts []*agentHost
			for _, n := range nss {
				name := fmt.Sprintf("host%d", n.k)
				hosts = append(hosts, tm.startHostCmd(fmt.Sprintf("http://10.213.%d.1:%s", n.k, port), name,
					filepath.Join(e.root, name), tm.token("1h"), []string{"ip", "netns", "exec", n.name}))
			}
			netnsRuns(t, tm, hosts, nss)
		})
	}
}

// netnsRuns submits the 50 runs, disturbs two hosts while they execute
// some, lets every agent go on, and checks the end.
func netnsRuns(t *testing.T, tm *team, hosts []*agentHost, nss []*netns) {
	const n = 50
	// Every agent waits at the gate until both hosts are disturbed: a run
	// seen in flight on a host cannot end before its host is.
	gate := filepath.Join(tm.e.root, "gate")
	ids := make([]string, n)
	for i := range n {
		ids[i] = tm.submit(tm.gated(gate, fmt.Sprintf("echo run%d > f%d.txt", i, i)), fmt.Sprintf("Add f%d", i))
	}
	busy := func(h *agentHost) bool {
		return strings.Count(h.output(), `"msg":"run claimed"`) > strings.Count(h.output(), `"msg":"run ended"`)
	}
	tm.waitFor("host1 to execute a run", func() bool { return busy(hosts[0]) })
	_ = hosts[0].cmd.Process.Kill() // SIGKILL mid-run
	tm.waitFor("host2 to execute a run", func() bool { return busy(hosts[1]) })
	nss[1].cut(t, true)
	time.Sleep(2 * hostTTL)
	nss[1].cut(t, false)
	tm.open(gate)
	project := filepath.Join(tm.e.root, "server", "projects", "default.git")
	lost := 0
	for i, id := range ids {
		d := tm.waitEnded(id)
		if d.Status != "succeeded" {
			t.Errorf("run %s: %s (%s)", id, d.Status, d.Reason)
			continue
		}
		if got := testsupport.Git(t, project, "show", d.Commit+":"+fmt.Sprintf("f%d.txt", i)); got != fmt.Sprintf("run%d", i) {
			t.Errorf("run %s: f%d.txt is %q", id, i, got)
		}
		if got := testsupport.Git(t, project, "rev-parse", "refs/heads/"+d.Branch); got != d.Commit {
			t.Errorf("run %s: its branch is %s, its commit %s", id, got, d.Commit)
		}
		evs := tm.events(id)
		if c := count(evs, "export", ""); c != 1 {
			t.Errorf("run %s: %d exports", id, c)
		}
		lost += count(evs, "state", "host_lost")
		cs := tm.claims(id)
		for j, c := range cs {
			if c.ended == nil {
				t.Errorf("run %s: the claim by %s (token %d) never ended", id, c.host, c.token)
			} else if j > 0 && (cs[j-1].ended == nil || *cs[j-1].ended > c.claimed) {
				t.Errorf("run %s: claims of %s and %s overlap", id, cs[j-1].host, c.host)
			}
		}
	}
	if lost < 2 {
		t.Errorf("%d runs were journaled host_lost; want at least the killed host's and the cut one's", lost)
	}
	// A branch fetched by the CLI, as a user would.
	tm.checkBranch(tm.status(ids[0]), "f0.txt", "run0")
}
