package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestExportRefusalsAndLimits(t *testing.T) {
	e := newEnv(t)
	// A symlink escaping the workspace is refused; the rest is exported.
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "ln -s /etc/passwd leak; echo ok > ok.txt", "--wait", "t")
	must(t, res, 0)
	r := e.get(d.ID)
	if r.Result == nil || len(r.Result.Refused) != 1 || r.Result.Refused[0].Path != "leak" {
		t.Fatalf("result %+v", r.Result)
	}
	if out := testsupport.Git(t, e.repo, "ls-tree", "--name-only", d.Commit); strings.Contains(out, "leak") {
		t.Fatalf("refused entry exported: %s", out)
	}
	evs, _ := e.store().Events(t.Context(), d.ID, 0)
	var refused bool
	for _, ev := range evs {
		refused = refused || ev.Type == run.EventRefused
	}
	if !refused {
		t.Fatal("refusal not journaled")
	}
	// Over --max-files: the export fails, nothing is written.
	d, res = e.submitJSON(nil, "--sandbox", "host", "--max-files", "1", "--agent-cmd", "echo a > a.txt; echo b > b.txt", "--wait", "t")
	must(t, res, 1)
	if d.Reason != "export_failed" {
		t.Fatalf("%+v", d)
	}
	if out := testsupport.Git(t, e.repo, "branch", "--list", d.Branch); out != "" {
		t.Fatalf("branch written over the limit: %s", out)
	}
}

func TestAuthorFromEnvironment(t *testing.T) {
	e := newEnv(t)
	d, res := e.submitJSON([]string{"AGENTRUN_AUTHOR_NAME=Run Bot", "AGENTRUN_AUTHOR_EMAIL=bot@example.com"},
		"--sandbox", "host", "--agent-cmd", "echo x > x.txt", "--wait", "t")
	must(t, res, 0)
	if got := testsupport.Git(t, e.repo, "log", "-1", "--format=%an <%ae>", d.Commit); got != "Run Bot <bot@example.com>" {
		t.Fatalf("author %q", got)
	}
	// The config file is read too; the environment wins over it.
	cfg := e.root + "/config/agentrun"
	_ = os.MkdirAll(cfg, 0o755)
	_ = os.WriteFile(cfg+"/config.toml", []byte("author_name = \"Config Bot\"\nauthor_email = \"config@example.com\"\nattempts = 1\n"), 0o644)
	d, res = e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "echo y > y.txt", "--wait", "t")
	must(t, res, 0)
	if got := testsupport.Git(t, e.repo, "log", "-1", "--format=%an <%ae>", d.Commit); got != "Config Bot <config@example.com>" {
		t.Fatalf("author %q", got)
	}
	if r := e.get(d.ID); r.MaxAttempts != 1 {
		t.Fatalf("attempts from config: %d", r.MaxAttempts)
	}
	d, res = e.submitJSON([]string{"AGENTRUN_AUTHOR_NAME=Env Bot"}, "--sandbox", "host", "--attempts", "3", "--agent-cmd", "echo z > z.txt", "--wait", "t")
	must(t, res, 0)
	if got := testsupport.Git(t, e.repo, "log", "-1", "--format=%an", d.Commit); got != "Env Bot" {
		t.Fatalf("author %q", got)
	}
	if r := e.get(d.ID); r.MaxAttempts != 3 {
		t.Fatalf("flag over config: %d", r.MaxAttempts)
	}
	// --author wins over the environment and the config file, for the
	// committer too.
	d, res = e.submitJSON([]string{"AGENTRUN_AUTHOR_NAME=Env Bot"}, "--sandbox", "host", "--author", " Flag Person <flag@example.com>",
		"--agent-cmd", "echo w > w.txt", "--wait", "t")
	must(t, res, 0)
	if got := testsupport.Git(t, e.repo, "log", "-1", "--format=%an <%ae> %cn <%ce>", d.Commit); got != "Flag Person <flag@example.com> Flag Person <flag@example.com>" {
		t.Fatalf("author and committer %q", got)
	}
	before := len(e.runIDs())
	// An --author that is not NAME <EMAIL> is refused, and nothing is made.
	for _, bad := range []string{"Flag Person", "<flag@example.com>", "Flag <>", "Fl<ag <f@example.com>", "Flag <f @example.com>", "Flag <f@example.com>x"} {
		res = e.run("submit", "--json", "--sandbox", "host", "--author", bad, "--agent-cmd", "true", "t")
		must(t, res, 2)
		if !strings.Contains(res.stdout, `"usage"`) || !strings.Contains(res.stdout, "--author") || len(e.runIDs()) != before {
			t.Fatalf("--author %q: %s", bad, res.stdout)
		}
	}
	// A broken config file is a usage error that creates nothing.
	_ = os.WriteFile(cfg+"/config.toml", []byte("attempts = = 1"), 0o644)
	res = e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "true", "t")
	must(t, res, 2)
	if !strings.Contains(res.stdout, `"bad_config"`) || len(e.runIDs()) != before {
		t.Fatalf("%s", res.stdout)
	}
}

func TestSupervisorRunsInItsOwnSession(t *testing.T) {
	e := newEnv(t)
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "sleep 30", "t")
	must(t, res, 0)
	r := e.waitFor(d.ID, "the supervisor", func(r *run.Run) bool { return r.Supervisor != nil })
	b, err := os.ReadFile("/proc/" + strconv.Itoa(r.Supervisor.PID) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := statFields(string(b))
	// fields after comm: state ppid pgrp session
	if len(f) < 4 || f[3] != strconv.Itoa(r.Supervisor.PID) {
		t.Fatalf("supervisor %d is not a session leader: %v", r.Supervisor.PID, f[:4])
	}
	must(t, e.run("cancel", d.ID), 0)
	_ = time.Second
}
