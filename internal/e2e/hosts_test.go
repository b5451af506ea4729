package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// hostTTL is the lease TTL of the team servers these tests start: a host
// that stops heartbeating loses its runs after it.
const hostTTL = 2 * time.Second

// team is a team server with agent hosts, on one database.
type team struct {
	e    *env
	url  string   // the server's
	db   string   // its database's URL
	dbf  []string // the flags that name the database
	srv  []string // the variables that send the CLI to the server
	host int
	// slots are the slots of the hosts startHost starts (0: 2).
	slots int
	// backend is the sandbox backend of the hosts it starts ("": host).
	backend string
}

// eachDB runs fn on a team server on SQLite and on one on PostgreSQL
// (skipped without AGENTRUN_TEST_POSTGRES).
func eachDB(t *testing.T, fn func(t *testing.T, tm *team)) {
	for _, tg := range sqltest.Targets {
		t.Run(tg.Name, func(t *testing.T) { fn(t, newTeam(t, tg, 0, hostTTL)) })
	}
}

// newTeam starts a team server on target tg's database, with local
// local workers' slots (0: none, the runs go to agent hosts) and lease
// TTL ttl.
func newTeam(tb testing.TB, tg sqltest.Target, local int, ttl time.Duration) *team {
	return teamOn(newEnv(tb), tb, tg, local, ttl)
}

// teamOn is newTeam in env e.
func teamOn(e *env, tb testing.TB, tg sqltest.Target, local int, ttl time.Duration) *team {
	tm := &team{e: e}
	if tg.Name == "SQLite" {
		tm.db = "sqlite:" + filepath.Join(e.root, "server", "agentrun.db")
	} else {
		tm.db = tg.URL(tb)
		tm.dbf = []string{"--database-url", tm.db}
	}
	tm.url = e.teamServer(append([]string{"--local-worker", strconv.Itoa(local), "--lease-ttl", ttl.String()}, tm.dbf...)...)
	tm.srv = []string{"AGENTRUN_SERVER=" + tm.url}
	return tm
}

// admin runs an 'agentrun server' subcommand against the server's data.
func (tm *team) admin(args ...string) result {
	tm.e.t.Helper()
	return tm.e.run(append(append(append([]string{"server"}, args...), "--data", filepath.Join(tm.e.root, "server")), tm.dbf...)...)
}

// token makes an enrolment token (valid for ttl) in a file.
func (tm *team) token(ttl string) string {
	tm.e.t.Helper()
	res := tm.admin("enrol-token", "--json", "--ttl", ttl)
	must(tm.e.t, res, 0)
	var d struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil || d.Token == "" {
		tm.e.t.Fatalf("enrol-token: %s", res.stdout)
	}
	f := filepath.Join(tm.e.root, fmt.Sprintf("token-%d", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(d.Token+"\n"), 0o600); err != nil {
		tm.e.t.Fatal(err)
	}
	return f
}

// agentHost is one 'agentrun worker' process.
type agentHost struct {
	name, data string
	cmd        *exec.Cmd
	mu         sync.Mutex
	log        bytes.Buffer
	done       chan struct{}
}

func (h *agentHost) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.Write(b)
}

func (h *agentHost) output() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.String()
}

// startHost starts a worker that joins server url (the team's, or a
// proxy's) with a new enrolment token and the host sandbox.
func (tm *team) startHost(url string) *agentHost {
	tm.e.t.Helper()
	tm.host++
	name := fmt.Sprintf("host%d", tm.host)
	return tm.startHostIn(url, name, filepath.Join(tm.e.root, name), tm.token("1h"))
}

// startHostIn starts a worker with data directory data, enrolling it
// with the token in file tok ("": enrolled already).
func (tm *team) startHostIn(url, name, data, tok string) *agentHost {
	tm.e.t.Helper()
	return tm.startHostCmd(url, name, data, tok, nil)
}

// startHostCmd starts a worker as startHostIn does, its command line
// after prefix (such as ip netns exec NAME).
func (tm *team) startHostCmd(url, name, data, tok string, prefix []string) *agentHost {
	tm.e.t.Helper()
	h := &agentHost{name: name, data: data, done: make(chan struct{})}
	args := append(append(slices.Clone(prefix), tm.e.bin), "worker", "--server", url, "--name", h.name, "--backend", cmp.Or(tm.backend, "host"), "--slots", strconv.Itoa(cmp.Or(tm.slots, 2)), "--data", h.data)
	if tok != "" {
		args = append(args, "--enrol-token-file", tok)
	}
	h.cmd = exec.Command(args[0], args[1:]...)
	h.cmd.Env = tm.e.vars
	h.cmd.Stdout, h.cmd.Stderr = h, h
	if err := h.cmd.Start(); err != nil {
		tm.e.t.Fatal(err)
	}
	go func() { _ = h.cmd.Wait(); close(h.done) }()
	tm.e.t.Cleanup(func() {
		_ = h.cmd.Process.Signal(syscall.SIGCONT)
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.done:
		case <-time.After(20 * time.Second):
			_ = h.cmd.Process.Kill()
			<-h.done
		}
		if tm.e.t.Failed() {
			tm.e.t.Logf("%s:\n%s", h.name, h.output())
		}
	})
	tm.waitFor("host "+h.name+" to enrol", func() bool { return strings.Contains(h.output(), "agentrun worker: host ") })
	return h
}

func (tm *team) waitFor(what string, ok func() bool) {
	tm.e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			tm.e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submit submits an --agent-cmd run to the server and returns its id.
func (tm *team) submit(agentCmd, task string) string {
	tm.e.t.Helper()
	d, res := tm.e.submitJSON(tm.srv, "--sandbox", "host", "--agent-cmd", agentCmd, task)
	if res.code != 0 || d.ID == "" {
		tm.e.t.Fatalf("submit: %s %s", res.stdout, res.stderr)
	}
	return d.ID
}

type runDoc struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	Commit   string `json:"commit"`
	Branch   string `json:"branch"`
	Attempts []struct {
		Outcome string `json:"outcome"`
	} `json:"attempts"`
}

func (tm *team) status(id string) runDoc {
	tm.e.t.Helper()
	res := tm.e.agentrun(tm.srv, "status", "--json", id)
	var d runDoc
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		tm.e.t.Fatalf("status %s: %v: %s %s", id, err, res.stdout, res.stderr)
	}
	return d
}

func (tm *team) waitEnded(id string) runDoc {
	tm.e.t.Helper()
	var d runDoc
	tm.waitFor("run "+id+" to end", func() bool {
		d = tm.status(id)
		return d.Status == "succeeded" || d.Status == "failed" || d.Status == "cancelled"
	})
	if d.Status != "succeeded" {
		tm.e.t.Logf("journal of %s:\n%s", id, tm.e.agentrun(tm.srv, "logs", "--events", id).stdout)
	}
	return d
}

// hostClaim is one row of the server's host_claims.
type hostClaim struct {
	token, claimed int64
	ended          *int64
	host, outcome  string
}

// claims are the claims of run id, in token order, once every one has
// ended (a host releases its run just after the run ended), or as they
// are after a while.
func (tm *team) claims(id string) []hostClaim {
	tm.e.t.Helper()
	var cs []hostClaim
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		cs = tm.readClaims(id)
		if !slices.ContainsFunc(cs, func(c hostClaim) bool { return c.ended == nil }) {
			break
		}
	}
	return cs
}

func (tm *team) readClaims(id string) []hostClaim {
	tm.e.t.Helper()
	db, err := sqldb.Connect(context.Background(), tm.db)
	if err != nil {
		tm.e.t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Read().Query(`SELECT c.token, c.claimed_at, c.ended_at, h.name, COALESCE(c.outcome, '')
		FROM host_claims c JOIN hosts h ON h.id = c.host_id WHERE c.run_id = $1 ORDER BY c.token`, id)
	if err != nil {
		tm.e.t.Fatal(err)
	}
	defer rows.Close()
	var out []hostClaim
	for rows.Next() {
		var c hostClaim
		if err := rows.Scan(&c.token, &c.claimed, &c.ended, &c.host, &c.outcome); err != nil {
			tm.e.t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// checkClaims asserts that no two hosts held run id at once: each claim
// ended before the next began, with a greater token.
func (tm *team) checkClaims(id string, cs []hostClaim) {
	tm.e.t.Helper()
	for i, c := range cs {
		tm.e.t.Logf("run %s: attempt by %s, token %d, %s", id, c.host, c.token, c.outcome)
		if c.ended == nil {
			tm.e.t.Errorf("run %s: the claim by %s (token %d) never ended", id, c.host, c.token)
			continue
		}
		if i > 0 && (cs[i-1].ended == nil || *cs[i-1].ended > c.claimed || cs[i-1].token >= c.token) {
			tm.e.t.Errorf("run %s: %s's claim (token %d) overlaps %s's (token %d)", id, c.host, c.token, cs[i-1].host, cs[i-1].token)
		}
	}
}

// gated is an agent command that waits for the test to open gate (a
// file), then runs cmd: the test disturbs the host while the run is
// surely in progress.
func (tm *team) gated(gate, cmd string) string {
	return fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; %s", sh(gate), cmd)
}

func (tm *team) open(gate string) {
	tm.e.t.Helper()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		tm.e.t.Fatal(err)
	}
}

// events are the types and reasons of run id's journal.
func (tm *team) events(id string) []map[string]any {
	tm.e.t.Helper()
	res := tm.e.agentrun(tm.srv, "logs", "--events", "--json", id)
	var d struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		tm.e.t.Fatalf("logs --events %s: %v: %s", id, err, res.stdout)
	}
	return d.Events
}

// count counts the events of type typ whose reason or state is what
// ("": all).
func count(evs []map[string]any, typ, what string) int {
	n := 0
	for _, e := range evs {
		if e["type"] == typ && (what == "" || e["reason"] == what || e["status"] == what) {
			n++
		}
	}
	return n
}

// checkBranch asserts that the run's branch in the server's project holds
// file with want, and that the CLI brings it into the user's repository.
func (tm *team) checkBranch(d runDoc, file, want string) {
	tm.e.t.Helper()
	project := filepath.Join(tm.e.root, "server", "projects", "default.git")
	if got := testsupport.Git(tm.e.t, project, "rev-parse", "refs/heads/"+d.Branch); got != d.Commit {
		tm.e.t.Errorf("run %s: the project's %s is %s, the record's commit %s", d.ID, d.Branch, got, d.Commit)
	}
	must(tm.e.t, tm.e.agentrun(tm.srv, "result", d.ID), 0)
	if got := testsupport.Git(tm.e.t, tm.e.repo, "show", d.Branch+":"+file); got != want {
		tm.e.t.Errorf("run %s: %s on its branch is %q, want %q", d.ID, file, got, want)
	}
}

// Enrolment: a token enrols one host, once; an expired token is refused;
// a revoked host's next request is refused and it stops.
func TestHostEnrolment(t *testing.T) {
	eachDB(t, func(t *testing.T, tm *team) {
		s := loadSchemas(t)
		tok := tm.token("1h")
		// An enrolled host keeps running (it is stopped once its identity
		// is kept); a refused one exits with the error.
		enrol := func(data, tok string) result {
			cmd := exec.Command(tm.e.bin, "--json", "worker", "--server", tm.url, "--enrol-token-file", tok,
				"--name", data, "--backend", "host", "--data", filepath.Join(tm.e.root, data))
			cmd.Env = tm.e.vars
			var so, se bytes.Buffer
			cmd.Stdout, cmd.Stderr = &so, &se
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			deadline := time.After(10 * time.Second)
		wait:
			for !fileExists(filepath.Join(tm.e.root, data, "host.json")) {
				select {
				case <-done:
					break wait
				case <-deadline:
					break wait
				case <-time.After(20 * time.Millisecond):
				}
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-done
			return result{cmd.ProcessState.ExitCode(), so.String(), se.String()}
		}
		enrol("a", tok)
		fi, err := os.Stat(filepath.Join(tm.e.root, "a", "host.json"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("host.json: %v %v", fi, err)
		}
		if res := enrol("b", tok); errorCode(t, s, res) != "enrol_refused" {
			t.Errorf("a token used twice: %+v", res)
		}
		short := tm.token("1s")
		time.Sleep(1500 * time.Millisecond)
		if res := enrol("c", short); errorCode(t, s, res) != "enrol_refused" {
			t.Errorf("an expired token: %+v", res)
		}
		// The enrolled host starts again without a token.
		h := tm.startHostIn(tm.url, "a", filepath.Join(tm.e.root, "a"), "")
		res := tm.admin("hosts", "--json")
		must(t, res, 0)
		validJSON(t, s, "server-hosts.schema.json", "server hosts", res)
		var list struct {
			Hosts []struct {
				ID, Name string
			} `json:"hosts"`
		}
		_ = json.Unmarshal([]byte(res.stdout), &list)
		id := ""
		for _, x := range list.Hosts {
			if x.Name == h.name {
				id = x.ID
			}
		}
		if len(list.Hosts) != 1 || id == "" {
			t.Fatalf("hosts: %s", res.stdout)
		}
		res = tm.admin("revoke-host", "--json", id)
		must(t, res, 0)
		validJSON(t, s, "server-revoke-host.schema.json", "server revoke-host", res)
		select {
		case <-h.done:
		case <-time.After(3 * hostTTL):
			t.Fatal("the revoked host is still running")
		}
		if !strings.Contains(h.output(), "host_refused") {
			t.Errorf("the revoked host did not say it was refused:\n%s", h.output())
		}
		if c := h.cmd.ProcessState.ExitCode(); c == 0 {
			t.Errorf("the revoked host exited %d", c)
		}
	})
}

// Two hosts execute N runs: each succeeds exactly once, on one host, with
// the right branch in the server's project, which the CLI fetches.
func TestHostsExecuteRunsOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, tm *team) {
		tm.startHost(tm.url)
		tm.startHost(tm.url)
		// The results are the submitter's: authored as the submitting
		// repository's identity, not the host's or the server's.
		testsupport.Git(t, tm.e.repo, "config", "user.name", "Laptop User")
		testsupport.Git(t, tm.e.repo, "config", "user.email", "laptop@example.com")
		const n = 6
		ids := make([]string, n)
		for i := range n {
			ids[i] = tm.submit(fmt.Sprintf("sleep 0.3; echo run%d > f%d.txt", i, i), fmt.Sprintf("Add f%d", i))
		}
		hosts := map[string]int{}
		for i, id := range ids {
			d := tm.waitEnded(id)
			if d.Status != "succeeded" {
				t.Errorf("run %s: %s (%s)", id, d.Status, d.Reason)
				continue
			}
			tm.checkBranch(d, fmt.Sprintf("f%d.txt", i), fmt.Sprintf("run%d", i))
			if got := testsupport.Git(t, tm.e.repo, "log", "-1", "--format=%an <%ae> %cn <%ce>", d.Commit); got != "Laptop User <laptop@example.com> Laptop User <laptop@example.com>" {
				t.Errorf("run %s: author and committer %q, want the submitting repository's", id, got)
			}
			cs := tm.claims(id)
			if len(cs) != 1 {
				t.Errorf("run %s: %d claims, want 1", id, len(cs))
			}
			tm.checkClaims(id, cs)
			for _, c := range cs {
				hosts[c.host]++
			}
			if ex := count(tm.events(id), "export", ""); ex != 1 {
				t.Errorf("run %s: %d exports", id, ex)
			}
		}
		t.Logf("runs by host: %v", hosts)
		// --author is sent to the server and wins.
		ad, res := tm.e.submitJSON(tm.srv, "--sandbox", "host", "--author", "Named Author <named@example.com>", "--agent-cmd", "echo a > a.txt", "Authored")
		must(t, res, 0)
		if d := tm.waitEnded(ad.ID); d.Status == "succeeded" {
			tm.checkBranch(d, "a.txt", "a")
			if got := testsupport.Git(t, tm.e.repo, "log", "-1", "--format=%an <%ae>", d.Commit); got != "Named Author <named@example.com>" {
				t.Errorf("run %s: author %q, want --author's", d.ID, got)
			}
		}
		// logs -f against the server follows a run on a host.
		id := tm.submit("for i in 1 2 3; do echo said $i; sleep 0.3; done; echo x > x.txt", "Say")
		res = tm.e.agentrun(tm.srv, "logs", "-f", id)
		must(t, res, 0)
		if !strings.Contains(res.stdout, "said 1\nsaid 2\nsaid 3") {
			t.Errorf("logs -f: %q", res.stdout)
		}
		// A cancel reaches the run on its host.
		id = tm.submit(tm.gated(filepath.Join(tm.e.root, "never"), "true"), "Wait forever")
		tm.waitFor("the run to start", func() bool { return tm.status(id).Status == "running" })
		must(t, tm.e.agentrun(tm.srv, "cancel", id), 0)
		if d := tm.status(id); d.Status != "cancelled" {
			t.Errorf("cancelled run: %+v", d)
		}
	})
}

// A host killed with SIGKILL mid-run loses it: the run is journaled
// host_lost, executed again by the other host with a greater token, and
// succeeds once.
func TestHostKilledRunRunsElsewhere(t *testing.T) {
	eachDB(t, func(t *testing.T, tm *team) {
		a := tm.startHost(tm.url)
		gate := filepath.Join(tm.e.root, "gate")
		id := tm.submit(tm.gated(gate, "echo done > k.txt"), "Survive")
		tm.waitFor("host1 to start the run", func() bool { return tm.status(id).Status == "running" })
		_ = a.cmd.Process.Kill()
		<-a.done
		tm.open(gate)
		tm.startHost(tm.url)
		d := tm.waitEnded(id)
		if d.Status != "succeeded" {
			t.Fatalf("run %s: %s (%s)", id, d.Status, d.Reason)
		}
		evs := tm.events(id)
		if count(evs, "state", "host_lost") != 1 || count(evs, "export", "") != 1 {
			t.Errorf("journal of %s: %d host_lost, %d exports", id, count(evs, "state", "host_lost"), count(evs, "export", ""))
		}
		if len(d.Attempts) != 2 || d.Attempts[0].Outcome != "host_lost" {
			t.Errorf("attempts: %+v", d.Attempts)
		}
		cs := tm.claims(id)
		if len(cs) != 2 || cs[0].host != "host1" || cs[0].outcome != "lost" || cs[1].host != "host2" {
			t.Errorf("claims: %+v", cs)
		}
		tm.checkClaims(id, cs)
		tm.checkBranch(d, "k.txt", "done")
	})
}

// A host stopped (SIGSTOP) past the TTL loses its run to another; once it
// goes on (SIGCONT), what it sends about the run is refused by the fencing
// token and it drops the run: the run exports once, from the other host.
func TestHostStoppedLateResultRefused(t *testing.T) {
	eachDB(t, func(t *testing.T, tm *team) {
		a := tm.startHost(tm.url)
		gate := filepath.Join(tm.e.root, "gate")
		id := tm.submit(tm.gated(gate, "echo late > s.txt"), "Stall")
		tm.waitFor("host1 to start the run", func() bool { return tm.status(id).Status == "running" })
		_ = a.cmd.Process.Signal(syscall.SIGSTOP)
		tm.open(gate) // host1's agent ends while host1 is stopped
		tm.startHost(tm.url)
		d := tm.waitEnded(id)
		_ = a.cmd.Process.Signal(syscall.SIGCONT)
		tm.waitFor("host1 to drop the run", func() bool { return strings.Contains(a.output(), `"msg":"run abandoned","run":"`+id) })
		time.Sleep(hostTTL) // what it might still send
		if d.Status != "succeeded" {
			t.Fatalf("run %s: %s (%s)", id, d.Status, d.Reason)
		}
		evs := tm.events(id)
		if count(evs, "export", "") != 1 || count(evs, "state", "succeeded") != 1 {
			t.Errorf("journal of %s: %d exports, %d succeeded", id, count(evs, "export", ""), count(evs, "state", "succeeded"))
		}
		if d2 := tm.status(id); d2.Commit != d.Commit || d2.Status != "succeeded" {
			t.Errorf("the run changed after the stopped host went on: %+v", d2)
		}
		if fileExists(filepath.Join(a.data, "runs", id)) {
			t.Errorf("host1 kept the run's directory")
		}
		tm.checkClaims(id, tm.claims(id))
		tm.checkBranch(d, "s.txt", "late")
	})
}

// proxy forwards connections to a server until cut, and again once
// restored, on the same address.
type proxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: strings.TrimPrefix(target, "http://")}
	p.restore()
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) restore() {
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
}

// cut closes the listener and every connection: the host's requests
// are refused until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A host cut off from the server loses its run to another host; when it
// can reach the server again it drops the run, and executes new ones.
func TestHostCutOffRecovers(t *testing.T) {
	eachDB(t, func(t *testing.T, tm *team) {
		px := newProxy(t, tm.url)
		a := tm.startHost("http://" + px.addr)
		gate := filepath.Join(tm.e.root, "gate")
		id := tm.submit(tm.gated(gate, "echo cut > c.txt"), "Cut")
		tm.waitFor("host1 to start the run", func() bool { return tm.status(id).Status == "running" })
		px.cut()
		tm.open(gate)
		b := tm.startHost(tm.url)
		d := tm.waitEnded(id)
		if d.Status != "succeeded" {
			t.Fatalf("run %s: %s (%s)", id, d.Status, d.Reason)
		}
		tm.waitFor("host1 to drop the run", func() bool { return strings.Contains(a.output(), `"msg":"run abandoned","run":"`+id) })
		px.restore()
		// host2 stops: host1, back, takes the next run.
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		<-b.done
		id2 := tm.submit("echo back > b.txt", "Back")
		d2 := tm.waitEnded(id2)
		if d2.Status != "succeeded" {
			t.Fatalf("run %s: %s (%s)", id2, d2.Status, d2.Reason)
		}
		if cs := tm.claims(id2); len(cs) != 1 || cs[0].host != "host1" {
			t.Errorf("claims of %s: %+v", id2, cs)
		}
		tm.checkClaims(id, tm.claims(id))
		if count(tm.events(id), "export", "") != 1 {
			t.Errorf("run %s exported more than once", id)
		}
		tm.checkBranch(d, "c.txt", "cut")
		tm.checkBranch(d2, "b.txt", "back")
	})
}

// A host killed with SIGKILL and started again before the TTL passed
// reconciles: it still holds its run, gives it back (the run is queued
// again, as a resume) and drops what it kept; it then executes the run
// again on a new claim, with a greater token.
func TestHostRestartReconciles(t *testing.T) {
	eachDB(t, func(t *testing.T, tm *team) {
		a := tm.startHost(tm.url)
		gate := filepath.Join(tm.e.root, "gate")
		id := tm.submit(tm.gated(gate, "echo again > r.txt"), "Restart")
		tm.waitFor("host1 to start the run", func() bool { return tm.status(id).Status == "running" })
		_ = a.cmd.Process.Kill()
		<-a.done
		tm.open(gate)
		b := tm.startHostIn(tm.url, a.name, a.data, "")
		d := tm.waitEnded(id)
		if d.Status != "succeeded" {
			t.Fatalf("run %s: %s (%s)", id, d.Status, d.Reason)
		}
		if !strings.Contains(b.output(), `"msg":"run left by an earlier start","run":"`+id+`","held":true`) {
			t.Errorf("the restarted host did not give the run back:\n%s", b.output())
		}
		cs := tm.claims(id)
		if len(cs) != 2 || cs[0].host != "host1" || cs[0].outcome != "released" || cs[1].host != "host1" {
			t.Errorf("claims: %+v", cs)
		}
		tm.checkClaims(id, cs)
		if count(tm.events(id), "export", "") != 1 {
			t.Errorf("run %s exported more than once", id)
		}
		tm.checkBranch(d, "r.txt", "again")
	})
}
