package e2e

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// teamServer starts the built binary as 'agentrun server' on a free
// loopback port (SQLite, its local worker, clients may name the host
// sandbox) with its own data directory, and returns its URL. It is
// stopped (SIGTERM: it drains) when the test ends.
func (e *env) teamServer(args ...string) string {
	e.t.Helper()
	data := filepath.Join(e.root, "server")
	cmd := exec.Command(e.bin, append([]string{"server", "--listen", "127.0.0.1:0", "--data", data, "--allow-host-sandbox"}, args...)...)
	cmd.Env = e.vars
	stderr, err := cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "agentrun server: serving "); ok {
				a, _, _ = strings.Cut(a, " ")
				addr <- strings.TrimSuffix(a, "/")
			}
		}
	}()
	select {
	case u := <-addr:
		return u
	case <-time.After(30 * time.Second):
		e.t.Fatal("the server did not start")
	}
	return ""
}

// validJSON checks out against schema and decodes it.
func validJSON(t *testing.T, s *jsonschema.Set, schema, what string, res result) map[string]any {
	t.Helper()
	if err := s.Validate(schema, []byte(res.stdout), jsonschema.Options{}); err != nil {
		t.Errorf("%s: %v\nstdout: %s\nstderr: %s", what, err, res.stdout, res.stderr)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(res.stdout), &m)
	return m
}

// errorCode is the code of a --json error document.
func errorCode(t *testing.T, s *jsonschema.Set, res result) string {
	t.Helper()
	m := validJSON(t, s, "error.schema.json", "error", res)
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// The CLI with AGENTRUN_SERVER: submit --wait from a real repository sends
// the base commit as a bundle, the server's local worker runs it, and the
// branch agentrun/<id> comes back into the repository with the run's
// change on the base commit; nothing is created among this machine's
// runs. The read commands answer the server's documents, valid against
// the same schemas as locally.
func TestClientSubmitWaitBringsTheBranchBack(t *testing.T) {
	e := newEnv(t)
	s := loadSchemas(t)
	srv := []string{"AGENTRUN_SERVER=" + e.teamServer()}
	head := testsupport.Git(t, e.repo, "rev-parse", "HEAD")

	res := e.agentrun(srv, "submit", "--json", "--wait", "--sandbox", "host", "--agent-cmd", "echo fixed >> README.md",
		"--check", "t=grep -q fixed README.md", "Fix the README")
	must(t, res, 0)
	d := validJSON(t, s, "submit.schema.json", "submit --wait", res)
	id, _ := d["id"].(string)
	if d["status"] != "succeeded" || d["branch"] != "agentrun/"+id {
		t.Fatalf("submit --wait: %s", res.stdout)
	}
	if got := testsupport.Git(t, e.repo, "show", "agentrun/"+id+":README.md"); got != "hello\nfixed" {
		t.Errorf("README.md on the branch: %q", got)
	}
	if got := testsupport.Git(t, e.repo, "rev-parse", "agentrun/"+id+"^"); got != head {
		t.Errorf("the branch's parent is %s, want the base %s", got, head)
	}
	if got := testsupport.Git(t, e.repo, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved to %s", got)
	}
	if ids := e.runIDs(); len(ids) != 0 {
		t.Errorf("runs were made on this machine: %v", ids)
	}

	for _, c := range []struct{ schema, what string }{
		{"list.schema.json", "list"}, {"status.schema.json", "status " + id}, {"logs.schema.json", "logs " + id},
		{"logs-events.schema.json", "logs --events " + id}, {"diff.schema.json", "diff " + id},
		{"result.schema.json", "result " + id}, {"egress.schema.json", "egress " + id},
		{"verdict.schema.json", "verdict " + id + " accept"},
	} {
		res := e.agentrun(srv, append([]string{"--json"}, strings.Fields(c.what)...)...)
		must(t, res, 0)
		m := validJSON(t, s, c.schema, c.what, res)
		switch c.schema {
		case "list.schema.json":
			if runs, _ := m["runs"].([]any); len(runs) != 1 {
				t.Errorf("list: %s", res.stdout)
			}
		case "diff.schema.json":
			if p, _ := m["patch"].(string); !strings.Contains(p, "+fixed") {
				t.Errorf("diff: %s", res.stdout)
			}
		}
	}
	lines := streamLines(t, s, "logs -f --json", e.agentrun(srv, "logs", "-f", "--json", id).stdout)
	if last := lines[len(lines)-1]; last["type"] != "end" || last["status"] != "succeeded" {
		t.Errorf("logs -f --json ends with %v", last)
	}

	// People get the same renderings as locally.
	res = e.agentrun(srv, "status", id)
	must(t, res, 0)
	// (A run of the server's names its submitter: the labels are wider.)
	if !regexp.MustCompile(`(?m)^status +succeeded$`).MatchString(res.stdout) || !strings.Contains(res.stdout, "verdict") {
		t.Errorf("status:\n%s", res.stdout)
	}
	res = e.agentrun(srv, "diff", id)
	if !strings.Contains(res.stdout, "+fixed") {
		t.Errorf("diff:\n%s", res.stdout)
	}
	// submit --wait for people: progress on stderr, the end on stdout.
	res = e.agentrun(srv, "submit", "--wait", "--sandbox", "host", "--agent-cmd", "echo two > two.txt", "Add two")
	must(t, res, 0)
	if !strings.Contains(res.stderr, "waiting for it to end") || !strings.Contains(res.stderr, "attempt 1") ||
		!strings.Contains(res.stdout, " succeeded\nbranch agentrun/") {
		t.Errorf("submit --wait:\nstdout: %s\nstderr: %s", res.stdout, res.stderr)
	}
	// submit --follow --json: the stream of logs -f --json.
	res = e.agentrun(srv, "submit", "--follow", "--json", "--sandbox", "host", "--agent-cmd", "echo said; echo three > three.txt", "Add three")
	must(t, res, 0)
	lines = streamLines(t, s, "submit --follow --json", res.stdout)
	said := false
	for _, l := range lines {
		said = said || (l["type"] == "output" && l["line"] == "said")
	}
	end := lines[len(lines)-1]
	if !said || end["type"] != "end" || end["status"] != "succeeded" {
		t.Errorf("submit --follow --json:\n%s", res.stdout)
	}
	if id, _ := end["id"].(string); testsupport.Git(t, e.repo, "show", "agentrun/"+id+":three.txt") != "three" {
		t.Errorf("three.txt is not on the followed run's branch")
	}
	// result again: the branch is there already, with the same commit.
	must(t, e.agentrun(srv, "result", id), 0)
	// A local command does not take --server.
	res = e.agentrun(nil, "--json", "--server", "http://127.0.0.1:1", "clean", id)
	must(t, res, 2)
	if c := errorCode(t, s, res); c != "usage" {
		t.Errorf("clean --server: %s", c)
	}
}

// A failed run resumed through the server succeeds, and its branch comes
// back; a running run is cancelled through it; a run's branch never
// replaces a branch of the same name that points elsewhere.
func TestClientCancelResumeAndExistingBranch(t *testing.T) {
	e := newEnv(t)
	s := loadSchemas(t)
	srv := []string{"AGENTRUN_SERVER=" + e.teamServer()}

	agent := "if [ -f .second ]; then echo done >> README.md; else touch .second; fi"
	res := e.agentrun(srv, "submit", "--json", "--wait", "--sandbox", "host", "--agent-cmd", agent, "--attempts", "1",
		"--check", "t=grep -q done README.md", "Finish it")
	must(t, res, 1)
	d := validJSON(t, s, "submit.schema.json", "submit --wait (failed)", res)
	id, _ := d["id"].(string)
	if d["status"] != "failed" {
		t.Fatalf("submit --wait: %s", res.stdout)
	}
	if out, err := testsupport.GitCmd(t, e.repo, "rev-parse", "--verify", "-q", "agentrun/"+id).Output(); err == nil {
		t.Errorf("a failed run made a branch: %s", out)
	}
	res = e.agentrun(srv, "resume", "--json", "--wait", id)
	must(t, res, 0)
	if d := validJSON(t, s, "resume.schema.json", "resume --wait", res); d["status"] != "succeeded" {
		t.Fatalf("resume --wait: %s", res.stdout)
	}
	if got := testsupport.Git(t, e.repo, "show", "agentrun/"+id+":README.md"); got != "hello\ndone" {
		t.Errorf("README.md on the resumed run's branch: %q", got)
	}

	res = e.agentrun(srv, "submit", "--json", "--sandbox", "host", "--agent-cmd", "sleep 60", "Take long")
	must(t, res, 0)
	d = validJSON(t, s, "submit.schema.json", "submit", res)
	long, _ := d["id"].(string)
	res = e.agentrun(srv, "cancel", "--json", long)
	must(t, res, 0)
	if d := validJSON(t, s, "cancel.schema.json", "cancel", res); d["status"] != "cancelled" {
		t.Errorf("cancel: %s", res.stdout)
	}

	// A branch of the run's name already here, elsewhere: refused, kept.
	res = e.agentrun(srv, "submit", "--json", "--sandbox", "host", "--agent-cmd", "echo x > x.txt", "Add x")
	must(t, res, 0)
	d = validJSON(t, s, "submit.schema.json", "submit", res)
	other, _ := d["id"].(string)
	must(t, e.agentrun(srv, "logs", "-f", other), 0)
	testsupport.Git(t, e.repo, "branch", "agentrun/"+other)
	head := testsupport.Git(t, e.repo, "rev-parse", "HEAD")
	res = e.agentrun(srv, "result", "--json", other)
	must(t, res, 2)
	if c := errorCode(t, s, res); c != "branch_exists" {
		t.Errorf("result over an existing branch: %s", c)
	}
	if got := testsupport.Git(t, e.repo, "rev-parse", "agentrun/"+other); got != head {
		t.Errorf("the existing branch moved to %s", got)
	}
}

// A server with a token refuses a client without it, or with another, with
// the catalog's unauthorized error; with AGENTRUN_SERVER_TOKEN_FILE it
// answers. A server that is not there is server_unreachable, and nothing
// is created here.
func TestClientTokenAndServerDown(t *testing.T) {
	e := newEnv(t)
	s := loadSchemas(t)
	tok := filepath.Join(e.root, "token")
	if err := os.WriteFile(tok, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(e.root, "wrong")
	if err := os.WriteFile(wrong, []byte("other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := e.teamServer("--token-file", tok)
	srv := []string{"AGENTRUN_SERVER=" + url}

	res := e.agentrun(srv, "list", "--json")
	must(t, res, 2)
	if c := errorCode(t, s, res); c != "unauthorized" {
		t.Errorf("no token: %s", c)
	}
	res = e.agentrun(srv, "--token-file", wrong, "submit", "--json", "--sandbox", "host", "--agent-cmd", "true", "t")
	must(t, res, 2)
	if c := errorCode(t, s, res); c != "unauthorized" {
		t.Errorf("another token: %s", c)
	}
	res = e.agentrun(append(srv, "AGENTRUN_SERVER_TOKEN_FILE="+tok), "list", "--json")
	must(t, res, 0)
	validJSON(t, s, "list.schema.json", "list with the token", res)
	res = e.agentrun(srv, "status", "abc")
	if res.code != 2 || !strings.Contains(res.stderr, "error: the request carries no valid token") || !strings.Contains(res.stderr, "--token-file") {
		t.Errorf("no token, for people (exit %d):\n%s", res.code, res.stderr)
	}

	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	branches := testsupport.Git(t, e.repo, "branch", "--list")
	res = e.agentrun([]string{"AGENTRUN_SERVER=" + down}, "submit", "--json", "--sandbox", "host", "--agent-cmd", "true", "t")
	must(t, res, 2)
	if c := errorCode(t, s, res); c != "server_unreachable" {
		t.Errorf("server down: %s", c)
	}
	res = e.agentrun(nil, "--server", down, "status", "abc")
	if res.code != 2 || !strings.Contains(res.stderr, "the team server is unreachable") || !strings.Contains(res.stderr, "fix: ") {
		t.Errorf("server down, for people (exit %d):\n%s", res.code, res.stderr)
	}
	if ids := e.runIDs(); len(ids) != 0 {
		t.Errorf("runs were made on this machine: %v", ids)
	}
	if got := testsupport.Git(t, e.repo, "branch", "--list"); got != branches {
		t.Errorf("branches changed: %q, were %q", got, branches)
	}
}
