package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// The tests in this file attack the real binary as a hostile agent, a
// hostile repository and a careless user, and assert that each attack
// fails. Each one runs with the native sandbox (skipped by name where it
// cannot run), with the host backend where the claim holds there too, and
// with the docker sandbox where its test engine is set up.

// backends are the sandboxes an attack runs against.
var backends = []string{"native", "host", "docker"}

// submitOn submits with --sandbox backend; a native preflight failure skips
// the test (a failure under AGENTRUN_REQUIRE_CAPS=1), and so does docker
// without the test engine; docker runs the test image.
func (e *env) submitOn(backend string, extraEnv []string, args ...string) (submitDoc, result) {
	e.t.Helper()
	if backend == "docker" {
		args = append([]string{"--image", e.useDocker()}, args...)
	}
	res := e.agentrun(extraEnv, append([]string{"submit", "--json", "--sandbox", backend}, args...)...)
	if backend == "native" && res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(e.t, "the native sandbox", false, res.stdout)
	}
	var d submitDoc
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		e.t.Fatalf("submit output is not JSON (exit %d): %v\nstdout: %s\nstderr: %s", res.code, err, res.stdout, res.stderr)
	}
	return d, res
}

// noMarks fails when any file exists in dir.
func noMarks(t *testing.T, dir, when string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, d := range ents {
		t.Errorf("%s: marker %s appeared on the host", when, d.Name())
	}
}

// plantGitScript plants, in the workspace's own .git and tree, every git
// knob that would run a command if a host git touched the workspace. Each
// command would create a file in marks.
func plantGitScript(marks, include string) string {
	hooks := []string{"pre-commit", "post-commit", "post-checkout", "pre-push", "post-merge",
		"reference-transaction", "post-index-change", "pre-auto-gc", "post-rewrite", "fsmonitor-watchman", "pre-receive", "update"}
	var b strings.Builder
	b.WriteString("set -e\nM=" + sh(marks) + "\n")
	b.WriteString(`cat >> .git/config <<EOF
[core]
	fsmonitor = touch $M/fsmonitor
	pager = touch $M/pager
	hooksPath = .git/hooks
	sshCommand = touch $M/ssh
	editor = touch $M/editor
[diff]
	external = touch $M/diffext
[filter "x"]
	clean = touch $M/clean
	smudge = touch $M/smudge
	process = touch $M/process
	required = true
[diff "x"]
	textconv = touch $M/textconv
[alias]
	status = !touch $M/alias
[include]
	path = ` + include + `
[includeIf "gitdir:/"]
	path = ` + include + `
EOF
mkdir -p .git/hooks
`)
	for _, h := range hooks {
		b.WriteString("printf '#!/bin/sh\\ntouch %s/hook-" + h + "\\n' \"$M\" > .git/hooks/" + h + "; chmod +x .git/hooks/" + h + "\n")
	}
	b.WriteString(`printf '* filter=x diff=x\n' > .gitattributes
printf '[submodule "s"]\n\tpath = s\n\turl = file://%s/sub\n' "$M" > .gitmodules
printf '[core]\n\tfsmonitor = touch %s/nested\n' "$M" > nested-config
mkdir -p sub/.git && cp nested-config sub/.git/config
echo changed > README.md
echo new > new.txt
`)
	return b.String()
}

// TestAttackPlantedGitKnobsNeverRunOnHost: the agent arms its workspace's
// .git and tree; neither the export nor any command the user runs after it
// runs any of it on the host.
func TestAttackPlantedGitKnobsNeverRunOnHost(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t)
			marks := filepath.Join(e.root, "marks")
			_ = os.MkdirAll(marks, 0o755)
			// A host file the planted include.path names: it would arm git too.
			include := filepath.Join(e.root, "include.cfg")
			_ = os.WriteFile(include, []byte("[core]\n\tfsmonitor = touch "+marks+"/include\n"), 0o644)
			d, res := e.submitOn(backend, nil, "--agent-cmd", plantGitScript(marks, include),
				"--check", "ok=test -f new.txt", "--wait", "arm the workspace")
			must(t, res, 0)
			noMarks(t, marks, "export")
			// The exported tree carries the data files, never a .git path.
			tree := testsupport.Git(t, e.repo, "ls-tree", "-r", "--name-only", d.Commit)
			if strings.Contains(tree, ".git/") || strings.Contains(tree, "sub/.git") {
				t.Fatalf("a .git path was exported:\n%s", tree)
			}
			for _, want := range []string{".gitattributes", ".gitmodules", "new.txt", "README.md"} {
				if !strings.Contains(tree, want) {
					t.Errorf("%s not exported:\n%s", want, tree)
				}
			}
			for _, args := range [][]string{
				{"status", d.ID}, {"status", "--json", d.ID},
				{"result", d.ID}, {"result", "--patch", d.ID}, {"result", "--json", d.ID},
				{"diff", d.ID}, {"logs", d.ID}, {"logs", "--events", d.ID}, {"logs", "--check", "ok", d.ID},
				{"list"}, {"egress", d.ID}, {"verdict", d.ID, "reject", "--note", "no"},
				{"resume", d.ID},
				{"clean", "--delete-branch", d.ID},
			} {
				e.run(args...)
				noMarks(t, marks, strings.Join(args, " "))
			}
			if out := testsupport.Git(t, e.repo, "branch", "--list", d.Branch); out != "" {
				t.Fatalf("branch left after clean --delete-branch: %s", out)
			}
		})
	}
}

// TestAttackFailedRunCommandsRunNoGit: the same arming, but the run fails
// its check; resume and clean of a failed run touch nothing either.
func TestAttackFailedRunCommandsRunNoGit(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t)
			marks := filepath.Join(e.root, "marks")
			_ = os.MkdirAll(marks, 0o755)
			include := filepath.Join(e.root, "include.cfg")
			_ = os.WriteFile(include, []byte("[core]\n\tfsmonitor = touch "+marks+"/include\n"), 0o644)
			// The planting appends to .git/config: on resume it runs again.
			d, res := e.submitOn(backend, nil, "--attempts", "1", "--agent-cmd", plantGitScript(marks, include),
				"--check", "never=false", "--wait", "arm and fail")
			must(t, res, 1)
			for _, args := range [][]string{
				{"status", d.ID}, {"result", d.ID}, {"diff", d.ID}, {"logs", d.ID},
				{"resume", "--wait", "--task", "again", d.ID},
				{"clean", "--delete-branch", d.ID},
			} {
				e.run(args...)
				noMarks(t, marks, strings.Join(args, " "))
			}
		})
	}
}

// TestAttackExportSpecialEntries: links, FIFOs, escapes and odd names. The
// run reports what it refused, never reads outside the workspace, and the
// patch never holds host content.
func TestAttackExportSpecialEntries(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t)
			secretDir := filepath.Join(e.root, "userhome", ".ssh")
			_ = os.MkdirAll(secretDir, 0o700)
			secret := filepath.Join(secretDir, "id_rsa")
			const secretText = "HOST-PRIVATE-KEY-MATERIAL"
			_ = os.WriteFile(secret, []byte(secretText+"\n"), 0o600)
			script := "S=" + sh(secret) + "\n" +
				"ln -s \"$S\" key-link\n" +
				"ln \"$S\" key-hard 2>/dev/null || true\n" +
				"ln -s /etc dir-link\n" +
				"ln -s " + sh(secretDir) + " ssh-dir\n" +
				"ln -s ../../../../../../../../etc/passwd rel-escape\n" +
				"mkfifo fifo\n" +
				"printf nl > \"$(printf 'new\\nline')\"\n" +
				"printf n > ./-n\n" +
				"printf dash > ./--leading-dash\n" +
				"printf uni > ünïcødé.txt\n" +
				"printf dots > ..dots\n" +
				"printf tab > \"$(printf 'tab\\tname')\"\n" +
				"echo fine > fine.txt\n"
			d, res := e.submitOn(backend, nil, "--agent-cmd", script, "--wait", "odd entries")
			must(t, res, 0)
			r := e.get(d.ID)
			refused := map[string]string{}
			for _, f := range r.Result.Refused {
				refused[f.Path] = f.Reason
			}
			// Control characters in names are refused too (a patch or a
			// terminal would mangle them).
			// (shown quoted, as git quotes such names).
			for _, p := range []string{"key-link", "dir-link", "ssh-dir", "rel-escape", "fifo", strconv.Quote("new\nline"), strconv.Quote("tab\tname")} {
				if _, ok := refused[p]; !ok {
					t.Errorf("%s was not refused: %+v", p, r.Result.Refused)
				}
			}
			if backend == "host" {
				if _, ok := refused["key-hard"]; !ok {
					t.Errorf("a hard link to a host file was not refused: %+v", r.Result.Refused)
				}
			}
			tree := testsupport.Git(t, e.repo, "ls-tree", "-r", "-z", "--name-only", d.Commit)
			names := strings.Split(strings.TrimRight(tree, "\x00"), "\x00")
			got := map[string]bool{}
			for _, n := range names {
				got[n] = true
			}
			for _, want := range []string{"fine.txt", "-n", "--leading-dash", "ünïcødé.txt", "..dots"} {
				if !got[want] {
					t.Errorf("%q not exported; tree %q", want, names)
				}
			}
			for _, bad := range []string{"key-link", "key-hard", "dir-link", "ssh-dir", "rel-escape", "fifo"} {
				if got[bad] {
					t.Errorf("%q was exported", bad)
				}
			}
			patch, _ := os.ReadFile(d.Patch)
			if strings.Contains(string(patch), secretText) || strings.Contains(string(patch), "root:x:0:0") {
				t.Fatalf("the patch holds host content:\n%s", patch)
			}
			show := testsupport.Git(t, e.repo, "log", "-p", "-1", d.Commit)
			if strings.Contains(show, secretText) {
				t.Fatal("the commit holds host content")
			}
			// The patch applies cleanly to the base.
			testsupport.Git(t, e.repo, "apply", "--check", d.Patch)
		})
	}
}

// TestAttackExportSize: one 200 MB file is refused (over the per-run byte
// cap), 20,000 files fail the export as a whole with no branch written.
func TestAttackExportSize(t *testing.T) {
	e := newEnv(t)
	d, res := e.submitOn("native", nil, "--agent-cmd",
		"head -c 209715200 /dev/zero > big.bin; echo small > small.txt", "--wait", "big file")
	must(t, res, 0)
	r := e.get(d.ID)
	if len(r.Result.Refused) != 1 || r.Result.Refused[0].Path != "big.bin" {
		t.Fatalf("refused %+v", r.Result.Refused)
	}
	if fi, err := os.Stat(d.Patch); err != nil || fi.Size() > 1<<20 {
		t.Fatalf("patch %v %v", fi, err)
	}
	d, res = e.submitOn("native", nil, "--agent-cmd",
		"mkdir m; cd m; i=0; while [ $i -lt 20000 ]; do : > f$i; i=$((i+1)); done", "--wait", "many files")
	must(t, res, 1)
	if d.Reason != "export_failed" {
		t.Fatalf("%+v", d)
	}
	if out := testsupport.Git(t, e.repo, "branch", "--list", d.Branch); out != "" {
		t.Fatalf("branch written over the limit: %s", out)
	}
}

// TestAttackTaskText: metacharacters, newlines and a large task reach the
// agent byte for byte, never through a host shell; a NUL byte is refused
// with a catalog error or kept exactly.
func TestAttackTaskText(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(e.root, "pwned")
	task := "line one\n$(touch " + marker + ")\n`touch " + marker + "`\n; touch " + marker + " && echo '\"' \\\n|| touch " + marker + "\n"
	for _, backend := range backends {
		d, res := e.submitOn(backend, nil, "--agent-cmd", "cat > task.txt", "--wait", task)
		must(t, res, 0)
		if got := rawShow(e, d.Commit, "task.txt"); got != task {
			t.Fatalf("%s: agent got %q want %q", backend, got, task)
		}
		if r := e.get(d.ID); r.Task != task {
			t.Fatalf("%s: stored task %q", backend, r.Task)
		}
	}
	if fileExists(marker) {
		t.Fatal("the task text ran in a shell")
	}
	// A 1 MB task from a file.
	big := strings.Repeat("0123456789abcdef$(x)`y`\n", (1<<20)/24)
	bigFile := filepath.Join(e.root, "big-task.txt")
	_ = os.WriteFile(bigFile, []byte(big), 0o644)
	d, res := e.submitOn("native", nil, "--agent-cmd", "cat > task.txt", "--task-file", bigFile, "--wait")
	if res.code == 2 {
		if !strings.Contains(res.stdout, `"error"`) {
			t.Fatalf("1 MB task refused without a catalog error: %s", res.stdout)
		}
	} else {
		must(t, res, 0)
		if got := rawShow(e, d.Commit, "task.txt"); got != big {
			t.Fatalf("1 MB task changed on its way: %d bytes, want %d", len(got), len(big))
		}
	}
	// Over 1 MiB on stdin or from a file: refused with a catalog error,
	// never cut, nothing created.
	over := strings.Repeat("x", 1<<20+1)
	overFile := filepath.Join(e.root, "over-task.txt")
	_ = os.WriteFile(overFile, []byte(over), 0o644)
	before := len(e.runIDs())
	res = e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "cat > task.txt", "--task-file", overFile)
	if res.code != 2 || !strings.Contains(res.stdout, `"task_too_large"`) {
		t.Errorf("over-size task file: exit %d %s", res.code, res.stdout)
	}
	cmd := exec.Command(e.bin, "submit", "--json", "--sandbox", "host", "--agent-cmd", "cat > task.txt", "-")
	cmd.Dir, cmd.Env, cmd.Stdin = e.repo, e.vars, strings.NewReader(over)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `"task_too_large"`) {
		t.Errorf("over-size task on stdin: %v %s", err, out)
	}
	// An endless task file is cut off, not read into memory.
	res = e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "cat > task.txt", "--task-file", "/dev/zero")
	if res.code != 2 || !strings.Contains(res.stdout, `"task_too_large"`) {
		t.Errorf("endless task file: exit %d %s", res.code, res.stdout)
	}
	if len(e.runIDs()) != before {
		t.Fatal("an over-size task created a run")
	}
	// A NUL byte from a file is kept exactly (or refused by the catalog).
	nul := "before\x00after"
	nulFile := filepath.Join(e.root, "nul-task.txt")
	_ = os.WriteFile(nulFile, []byte(nul), 0o644)
	res = e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "cat > task.txt", "--task-file", nulFile, "--wait")
	switch res.code {
	case 2:
		if !strings.Contains(res.stdout, `"code"`) || len(e.runIDs()) != before {
			t.Fatalf("NUL task: %s", res.stdout)
		}
	case 0:
		var d submitDoc
		_ = json.Unmarshal([]byte(res.stdout), &d)
		if got := rawShow(e, d.Commit, "task.txt"); got != nul {
			t.Fatalf("NUL task reached the agent as %q", got)
		}
	default:
		t.Fatalf("NUL task: exit %d %s %s", res.code, res.stdout, res.stderr)
	}
}

// TestAttackIDsAndNames: path-like ids, check names, env names, repo and
// base values are catalog errors; nothing is created and nothing runs.
func TestAttackIDsAndNames(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(e.root, "pwned")
	notRepo := filepath.Join(e.root, "plain-file")
	_ = os.WriteFile(notRepo, []byte("x"), 0o644)
	ok := []string{"--sandbox", "host", "--agent-cmd", "true"}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status", "../.."}, 2, "bad_id"},
		{[]string{"status", "/etc/passwd"}, 2, "bad_id"},
		{[]string{"result", "..%2f.."}, 2, "bad_id"},
		{[]string{"diff", "../../../etc"}, 2, "bad_id"},
		{[]string{"clean", "../runs"}, 2, "bad_id"},
		{[]string{"verdict", "../..", "accept"}, 2, "bad_id"},
		{[]string{"egress", "a/b"}, 2, "bad_id"},
		{append([]string{"submit"}, append(ok, "--check", "a/b=true", "t")...), 2, "bad_check"},
		{append([]string{"submit"}, append(ok, "--check", "=true", "t")...), 2, "bad_check"},
		{append([]string{"submit"}, append(ok, "--env", "A=B", "t")...), 2, "bad_env"},
		{append([]string{"submit"}, append(ok, "--env", "PATH;touch "+marker, "t")...), 2, "bad_env"},
		{append([]string{"submit"}, append(ok, "--repo", notRepo, "t")...), 2, ""},
		{append([]string{"submit"}, append(ok, "--base", "--upload-pack=touch "+marker, "t")...), 2, "unknown_base"},
		{append([]string{"submit"}, append(ok, "--base", "HEAD;touch "+marker, "t")...), 2, "unknown_base"},
		{append([]string{"submit"}, append(ok, "--base", "$(touch "+marker+")", "t")...), 2, "unknown_base"},
		{append([]string{"submit"}, append(ok, "--base", "HEAD:README.md", "t")...), 2, "unknown_base"},
		{append([]string{"submit"}, append(ok, "--base", "HEAD^{tree}", "t")...), 2, "unknown_base"},
	} {
		res := e.run(append(c.args, "--json")...)
		if res.code != c.code || !strings.Contains(res.stdout, `"error"`) ||
			(c.want != "" && !strings.Contains(res.stdout, `"code": "`+c.want+`"`)) {
			t.Errorf("%q: exit %d, want %d %s\nstdout: %s\nstderr: %s", c.args, res.code, c.code, c.want, res.stdout, res.stderr)
		}
		if ids := e.runIDs(); len(ids) != 0 {
			t.Fatalf("%q created runs %v", c.args, ids)
		}
	}
	if fileExists(marker) {
		t.Fatal("a value ran as a command")
	}
	// On a real run: logs of a path-like check or attempt read nothing outside.
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "echo x > x.txt", "--check", "ok=true", "--wait", "t")
	must(t, res, 0)
	_ = os.WriteFile(filepath.Join(e.home, "runs", "outside.log"), []byte("OUTSIDE-LOG"), 0o644)
	for _, args := range [][]string{
		{"logs", "--check", "../../x", d.ID},
		{"logs", "--check", "../../../outside", d.ID},
		{"logs", "--check", "a/b", d.ID},
		{"logs", "--attempt", "-1", d.ID},
		{"logs", "--attempt", "99", d.ID},
	} {
		res := e.run(append(args, "--json")...)
		if res.code == 0 || strings.Contains(res.stdout, "OUTSIDE-LOG") || !strings.Contains(res.stdout, `"error"`) {
			t.Errorf("%q: exit %d\n%s\n%s", args, res.code, res.stdout, res.stderr)
		}
	}
}

// TestAttackSecretsInSandbox: the submitter's secrets are visible to
// neither the agent nor the checks, in their environment or any process's
// under /proc; only --env names reach the agent.
func TestAttackSecretsInSandbox(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t)
			secrets := []string{"OPENAI_API_KEY=sk-planted-openai", "ANTHROPIC_API_KEY=sk-planted-anthropic",
				"GITHUB_TOKEN=planted-gh", "AWS_SECRET_ACCESS_KEY=planted-aws", "SSH_AUTH_SOCK=/tmp/planted-ssh-agent.sock",
				"MY_NAMED=planted-named"}
			dump := "env > %s.env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done > %s.proc; true"
			agentDump := strings.ReplaceAll(dump, "%s", "agent")
			checkDump := strings.ReplaceAll(dump, "%s", "check")
			d, res := e.submitOn(backend, secrets, "--env", "MY_NAMED", "--agent-cmd", agentDump,
				"--check", "dump="+checkDump+"; cp check.env check.proc /dev/null 2>&1; true", "--wait", "dump")
			must(t, res, 0)
			ws := filepath.Join(e.home, "runs", d.ID, "workspace")
			files := []string{"agent.env", "agent.proc", "check.env", "check.proc"}
			if backend == "host" {
				// The host backend does not isolate: the agent may read the
				// submitter's own /proc/<pid>/environ. Its environment is
				// still clean.
				files = []string{"agent.env", "check.env"}
			}
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(ws, f))
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range []string{"planted-openai", "planted-anthropic", "planted-gh", "planted-aws", "planted-ssh-agent"} {
					if strings.Contains(string(b), s) {
						t.Errorf("%s: %s holds %s", backend, f, s)
					}
				}
				named := strings.Contains(string(b), "planted-named")
				if f == "agent.env" && !named {
					t.Errorf("%s: --env variable did not reach the agent", backend)
				}
				if strings.HasPrefix(f, "check") && named {
					t.Errorf("%s: --env variable reached the checks (%s)", backend, f)
				}
			}
			runDir := filepath.Join(e.home, "runs", d.ID)
			_ = filepath.Walk(runDir, func(p string, fi os.FileInfo, err error) error {
				if err != nil || fi.IsDir() || strings.HasPrefix(p, ws+"/") || strings.HasSuffix(p, ".patch") {
					return nil
				}
				if !fi.Mode().IsRegular() {
					return nil
				}
				b, _ := os.ReadFile(p)
				if strings.Contains(string(b), "planted-") {
					t.Errorf("%s holds a planted value", p)
				}
				return nil
			})
		})
	}
}

// rawShow is a file of a commit, byte for byte.
func rawShow(e *env, commit, path string) string {
	e.t.Helper()
	out, err := testsupport.GitCmd(e.t, e.repo, "show", commit+":"+path).Output()
	if err != nil {
		e.t.Fatalf("git show %s: %v", path, err)
	}
	return string(out)
}

// TestAttackAgentSelectsUserGitDrivers: the user's own repository
// configures filter and diff drivers, an fsmonitor and hooks (as git-lfs or
// a pre-commit framework would). The agent writes a .gitattributes that
// selects those drivers for its files: neither the export nor any later
// command runs them on the agent's content.
func TestAttackAgentSelectsUserGitDrivers(t *testing.T) {
	e := newEnv(t)
	marks := filepath.Join(e.root, "marks")
	_ = os.MkdirAll(marks, 0o755)
	touch := func(name string) string { return "touch " + filepath.Join(marks, name) }
	for k, v := range map[string]string{
		"filter.u.clean": touch("clean"), "filter.u.smudge": touch("smudge"), "filter.u.process": touch("process"),
		"diff.u.textconv": touch("textconv"), "diff.u.command": touch("diffcmd"), "diff.external": touch("diffext"),
		"core.fsmonitor": touch("fsmonitor"), "core.pager": touch("pager"),
	} {
		testsupport.Git(t, e.repo, "config", k, v)
	}
	for _, h := range []string{"pre-commit", "post-commit", "reference-transaction", "post-index-change", "pre-auto-gc", "post-checkout"} {
		_ = os.WriteFile(filepath.Join(e.repo, ".git", "hooks", h), []byte("#!/bin/sh\n"+touch("hook-"+h)+"\n"), 0o755)
	}
	d, res := e.submitOn("native", nil, "--agent-cmd",
		"printf '* filter=u diff=u\\n' > .gitattributes; echo changed > README.md; echo new > new.txt", "--wait", "select drivers")
	must(t, res, 0)
	noMarks(t, marks, "export")
	for _, args := range [][]string{
		{"status", d.ID}, {"result", d.ID}, {"result", "--patch", d.ID}, {"diff", d.ID}, {"logs", d.ID},
		{"verdict", d.ID, "accept"}, {"clean", "--delete-branch", d.ID},
	} {
		res := e.run(args...)
		if res.code != 0 {
			t.Errorf("%q: exit %d %s %s", args, res.code, res.stdout, res.stderr)
		}
		noMarks(t, marks, strings.Join(args, " "))
	}
}

// TestAttackBidiNamesAreShownInert: a file name with a right-to-left
// override (which makes "‮txt.sh" read as "hs.txt") is exported as named,
// but the human output of result and status never carries the override to
// the reviewer's screen.
func TestAttackBidiNamesAreShownInert(t *testing.T) {
	e := newEnv(t)
	name := "run\u202etxt.sh"
	d, res := e.submitOn("native", nil, "--agent-cmd", "printf x > '"+name+"'; ln -s /etc 'l\u2067x'", "--wait", "bidi")
	must(t, res, 0)
	if got := rawShow(e, d.Commit, name); got != "x" {
		t.Fatalf("not exported as named: %q", got)
	}
	for _, args := range [][]string{{"result", d.ID}, {"status", d.ID}, {"list"}} {
		res := e.run(args...)
		must(t, res, 0)
		for _, r := range res.stdout {
			if unicode.Is(unicode.Bidi_Control, r) {
				t.Errorf("%q prints %U:\n%s", args, r, res.stdout)
				break
			}
		}
	}
}

// TestAttackProxyToHostLoopback: with an allowlist that names localhost,
// the agent tries every spelling of the host's loopback through the egress
// proxy: a server listening there is never reached, and the egress report
// suggests each flag once.
func TestAttackProxyToHostLoopback(t *testing.T) {
	testsupport.Program(t, "curl")
	e := newEnv(t)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	var urls []string
	for _, h := range []string{"localhost", "127.0.0.1", "[::1]", "0x7f000001", "2130706433", "127.1", "localhost.", "LOCALHOST", "0.0.0.0", "[::ffff:127.0.0.1]"} {
		urls = append(urls, "http://"+h+":"+port+"/")
	}
	agent := "for u in " + strings.Join(urls, " ") + "; do curl --noproxy '' -x \"$HTTP_PROXY\" -s -m 5 -o /dev/null $u; " +
		"curl --noproxy '' -p -x \"$HTTP_PROXY\" -s -m 5 -o /dev/null $u; done; echo done > done.txt"
	d, res := e.submitOn("native", nil, "--network", "allowlist", "--allow", "localhost", "--allow", "localhost:"+port,
		"--agent-cmd", agent, "--wait", "reach the host")
	must(t, res, 0)
	if n := hits.Load(); n != 0 {
		t.Fatalf("the host's loopback server was reached %d times", n)
	}
	res = e.run("egress", d.ID)
	must(t, res, 0)
	_, flags, ok := strings.Cut(res.stdout, "add to submit: ")
	if !ok {
		t.Fatalf("no suggestion:\n%s", res.stdout)
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(flags), " --allow ") {
		if seen[f] {
			t.Errorf("suggested twice: %s\n%s", f, res.stdout)
		}
		seen[f] = true
	}
}

// TestAttackCleanKeepsCheckedOutBranch: a user who checked out the run's
// branch (here, or in a linked worktree) and then cleans with
// --delete-branch keeps the branch and a worktree that still has commits.
func TestAttackCleanKeepsCheckedOutBranch(t *testing.T) {
	e := newEnv(t)
	for _, where := range []string{"here", "worktree"} {
		d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "echo d > d.txt", "--wait", where)
		must(t, res, 0)
		wt := e.repo
		if where == "here" {
			testsupport.Git(t, e.repo, "checkout", "-q", d.Branch)
		} else {
			wt = filepath.Join(e.root, "wt")
			testsupport.Git(t, e.repo, "worktree", "add", "-q", wt, d.Branch)
		}
		res = e.run("clean", "--json", "--delete-branch", d.ID)
		must(t, res, 0)
		if !strings.Contains(res.stdout, "checked out") {
			t.Errorf("%s: %s", where, res.stdout)
		}
		if got := testsupport.Git(t, e.repo, "rev-parse", d.Branch); got != d.Commit {
			t.Fatalf("%s: branch %s is at %q after clean", where, d.Branch, got)
		}
		if got := testsupport.Git(t, wt, "rev-parse", "HEAD"); got != d.Commit {
			t.Fatalf("%s: the worktree's HEAD is %q", where, got)
		}
		testsupport.Git(t, e.repo, "checkout", "-q", "main")
	}
}
