package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentrun/agentrun/internal/testsupport"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
)

// testHome is a real data directory with a real files store, and a way to
// run commands against it.
type testHome struct {
	t   testing.TB
	dir string
	st  *files.Store
	env map[string]string
	// executable is the agentrun binary sandboxes run (App.Executable).
	executable string
}

func newTestHome(t testing.TB) *testHome {
	t.Helper()
	dir := t.TempDir()
	st, err := files.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &testHome{t: t, dir: dir, st: st, env: map[string]string{
		"AGENTRUN_HOME": dir,
		"HOME":          t.TempDir(),
		"USER":          "reviewer",
	}}
}

// app returns an App writing into buffers.
func (h *testHome) app() (*App, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Executable: h.executable, Deps: testDeps,
		Getenv: func(k string) string { return h.env[k] }}, &out, &errb
}

// exec runs one command line through app.Execute.
func (h *testHome) exec(args ...string) (code int, stdout, stderr string) {
	h.t.Helper()
	app, out, errb := h.app()
	code = app.Execute(context.Background(), args)
	return code, out.String(), errb.String()
}

// add creates a run in the store; mut fills it in.
func (h *testHome) add(mut func(r *run.Run)) *run.Run {
	h.t.Helper()
	id := run.NewID()
	r := &run.Run{
		ID: id, State: run.StateSucceeded, Reason: run.ReasonCompleted,
		Task: "Fix the flaky auth tests", Repo: "/src/project", BaseRef: "HEAD",
		Base: strings.Repeat("b", 40), Branch: run.BranchName(id), MaxAttempts: 1,
		Agent:   run.AgentSpec{Name: "command", Command: "make fix"},
		Sandbox: run.SandboxConfig{Backend: "host"},
	}
	if mut != nil {
		mut(r)
	}
	if err := h.st.Create(context.Background(), r); err != nil {
		h.t.Fatal(err)
	}
	got, err := h.st.Get(context.Background(), r.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

// holdSupervisor takes the run's supervisor lock as a live supervisor
// does, so the run is not reconciled to interrupted.
func (h *testHome) holdSupervisor(id string) *os.File {
	h.t.Helper()
	f, err := os.OpenFile(h.st.L.SupervisorLock(id), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { f.Close() })
	return f
}

// jsonErr decodes the error object printed under --json.
func jsonErr(t testing.TB, stdout string) map[string]any {
	t.Helper()
	var doc struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || doc.Error == nil {
		t.Fatalf("stdout is not a JSON error object: %v\n%s", err, stdout)
	}
	return doc.Error
}

// badIDCases are ids every command taking an ID must refuse.
func badIDCases(t *testing.T, h *testHome, cmd ...string) {
	t.Helper()
	a := h.add(nil)
	h.add(func(r *run.Run) { r.ID = a.ID[:5] + "zzzzz" })
	for _, c := range []struct {
		id   string
		exit int
		code string
	}{
		{"../../etc", 2, "bad_id"},
		{"/etc/passwd", 2, "bad_id"},
		{"AB", 2, "bad_id"},
		{"zzzzzzzzzz", 3, "run_not_found"},
		{a.ID[:4], 3, "ambiguous_id"},
	} {
		args := append(append([]string{}, cmd[:1]...), c.id)
		args = append(args, cmd[1:]...)
		args = append(args, "--json")
		code, out, _ := h.exec(args...)
		if code != c.exit {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, c.exit, out)
			continue
		}
		if e := jsonErr(t, out); e["code"] != c.code {
			t.Errorf("%v: code %v, want %s", args, e["code"], c.code)
		}
	}
	code, _, stderr := h.exec(append([]string{cmd[0], a.ID[:4]}, cmd[1:]...)...)
	if code != 3 {
		t.Errorf("ambiguous prefix: exit %d, want 3", code)
	}
	if !strings.Contains(stderr, a.ID) || !strings.Contains(stderr, a.ID[:5]+"zzzzz") {
		t.Errorf("ambiguous prefix: the candidates are not named:\n%s", stderr)
	}
}

func TestAgo(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Minute, "just now"},
		{time.Second, "just now"},
		{42 * time.Second, "42s ago"},
		{3*time.Minute + 10*time.Second, "3m ago"},
		{5 * time.Hour, "5h ago"},
		{47 * time.Hour, "47h ago"},
		{72 * time.Hour, "3d ago"},
	} {
		if got := ago(now, now.Add(-c.d)); got != c.want {
			t.Errorf("ago(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	if ago(now, time.Time{}) != "-" {
		t.Error("zero time")
	}
}

func TestHumanDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{850 * time.Millisecond, "850ms"},
		{4230 * time.Millisecond, "4.2s"},
		{63*time.Second + 400*time.Millisecond, "1m3s"},
		{2*time.Hour + 5*time.Minute + 10*time.Second, "2h5m"},
	} {
		if got := humanDuration(c.d); got != c.want {
			t.Errorf("humanDuration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"fix it", 0, "fix it"},
		{"first line\nsecond", 0, "first line …"},
		{"bell\a and \x1b]0;title\a", 0, "bell\uFFFD and \uFFFD]0;title\uFFFD"},
		{"tab\there", 0, "tab here"},
		{"abcdefghijkl", 10, "abcdefghi…"},
		{"abcdefghij", 10, "abcdefghij"},
	} {
		if got := oneLine(c.in, c.max); got != c.want {
			t.Errorf("oneLine(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestTTYWriterNeutralisesEscapes(t *testing.T) {
	in := "ok\tline\r\n\x1b]0;pwned\x07\x1b[2J\x7f\u009b31m é \u0085 end"
	var b bytes.Buffer
	w := &ttyWriter{w: &b}
	// Byte by byte: sequences split across writes are still caught.
	for i := 0; i < len(in); i++ {
		if _, err := w.Write([]byte{in[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	want := "ok\tline\r\n^[]0;pwned^G^[[2J^?<U+009B>31m é <U+0085> end"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if strings.ContainsAny(got, "\x1b\x07\x7f") || strings.Contains(got, "\u009b") {
		t.Error("a control character got through")
	}
}

func TestTableAlignsColouredCells(t *testing.T) {
	tb := table{header: []string{"ID", "STATUS", "TASK"}, colour: true}
	tb.add("a", paint(true, sgrGreen, "succeeded"), "x")
	tb.add("bbbb", paint(true, sgrRed, "failed"), "y")
	var b bytes.Buffer
	if err := tb.write(&b); err != nil {
		t.Fatal(err)
	}
	var cols []int
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		plain := stripSGR(line)
		cols = append(cols, strings.LastIndex(plain, " ")+1)
	}
	if cols[0] != cols[1] || cols[1] != cols[2] {
		t.Errorf("last column not aligned: %v\n%s", cols, b.String())
	}
}

func stripSGR(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && s[i] != 'm' {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// requirePTY skips a test that needs a pseudo-terminal, or fails it where
// the capability is required (AGENTRUN_REQUIRE_CAPS=1).
func requirePTY(t *testing.T, format string, args ...any) {
	t.Helper()
	testsupport.Require(t, "a pseudo-terminal", false, format, args...)
}

func TestColourOnlyOnTTYAndNeverWithNoColor(t *testing.T) {
	_, slave := openPTY(t)
	env := map[string]string{"TERM": "xterm"}
	app := &App{Stdout: slave, Getenv: func(k string) string { return env[k] }, Deps: testDeps}
	if !app.colour() {
		t.Error("no colour on a terminal")
	}
	env["NO_COLOR"] = "1"
	if app.colour() {
		t.Error("colour with NO_COLOR set")
	}
	delete(env, "NO_COLOR")
	app.JSON = true
	if app.colour() {
		t.Error("colour under --json")
	}
	app.JSON = false
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	app.Stdout = f
	if app.colour() {
		t.Error("colour into a regular file")
	}
	app.Stdout = &bytes.Buffer{}
	if app.colour() {
		t.Error("colour into a buffer")
	}
}

// addFinished creates a succeeded run of two attempts (the first failed
// its check) with its logs, patch and provenance on disk.
func (h *testHome) addFinished(mut func(r *run.Run)) *run.Run {
	h.t.Helper()
	start := time.Now().Add(-10 * time.Minute).UTC()
	t1, t2, end := start.Add(time.Minute), start.Add(2*time.Minute), start.Add(3*time.Minute)
	zero, one := 0, 1
	r := h.add(func(r *run.Run) {
		r.MaxAttempts = 3
		r.CreatedAt = start
		r.Checks = []run.CheckSpec{{Name: "unit", Command: "go test ./..."}}
		r.StartedAt, r.FinishedAt = &start, &end
		r.Commit = strings.Repeat("c", 40)
		r.Attempts = []run.Attempt{
			{N: 1, StartedAt: start, FinishedAt: &t1, ExitCode: &zero, Outcome: run.ReasonChecksFailed,
				Checks: []run.CheckResult{{Name: "unit", ExitCode: 1, Duration: run.Duration(3 * time.Second)}}},
			{N: 2, StartedAt: t2, FinishedAt: &end, ExitCode: &one, Outcome: run.ReasonCompleted,
				Checks: []run.CheckResult{{Name: "unit", Passed: true, Duration: run.Duration(2 * time.Second)}}},
		}
		r.Result = &run.ExportResult{Commit: r.Commit, Branch: r.Branch, FilesChanged: 1, Insertions: 2,
			Diffstat: " auth.go | 2 ++\n 1 file changed, 2 insertions(+)\n",
			Refused:  []run.Refusal{{Path: "bin/tool", Reason: "special file"}}}
		r.Usage = &run.Usage{PromptTokens: 1200, CompletionTokens: 300, Turns: 4}
		r.Provenance = run.Provenance{Version: "v0.1.0", Host: "devbox", Mode: "lite", Sandbox: "host",
			BaseCommit: r.Base, AgentCommand: "make fix", PolicyDigest: "sha256:abc",
			Enforced: map[string]string{"network": "enforced", "memory": "unavailable: no cgroup"}}
		if mut != nil {
			mut(r)
		}
	})
	l := h.st.L
	for n, text := range map[int]string{1: "attempt one line 1\nattempt one line 2\n", 2: "attempt two\n"} {
		h.write(l.AgentLog(r.ID, n), text)
		h.write(l.CheckLog(r.ID, n, "unit"), "unit output of attempt "+strconv.Itoa(n)+"\n")
	}
	h.write(l.Patch(r.ID), "diff --git a/auth.go b/auth.go\n+fixed\n")
	return r
}

func (h *testHome) write(path, text string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// An error is rendered once: what, cause (without repeating what), fix, doc.
func TestRenderNotFound(t *testing.T) {
	h := newTestHome(t)
	code, out, stderr := h.exec("status", "zzzzzzzzzz")
	want := "error: run not found: run zzzzzzzzzz\n" +
		"  fix: list runs with 'agentrun list'\n" +
		"  see: https://github.com/agentrun/agentrun/blob/main/docs/errors.md#run_not_found\n"
	if code != 3 || out != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out, stderr)
	}
}

// FuzzTTYWriter: whatever an agent writes, split however, nothing a
// terminal interprets as a control sequence gets through, and printable
// text is kept.
func FuzzTTYWriter(f *testing.F) {
	for _, s := range []string{"plain\n", "\x1b]0;t\x07", "\xc2\x9b31m", "\xc2", "é\xc2\x85x", "\r\n\t", "\x00\x7f"} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		n := int(chunk)%7 + 1
		var b bytes.Buffer
		w := &ttyWriter{w: &b}
		for i := 0; i < len(in); i += n {
			end := min(i+n, len(in))
			if k, err := w.Write(in[i:end]); err != nil || k != end-i {
				t.Fatalf("write: %d %v", k, err)
			}
		}
		if err := w.flush(); err != nil {
			t.Fatal(err)
		}
		out := b.Bytes()
		for i, c := range out {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
				t.Fatalf("control byte %#x at %d in %q", c, i, out)
			}
			if c == 0xc2 && i+1 < len(out) && out[i+1] >= 0x80 && out[i+1] <= 0x9f {
				t.Fatalf("C1 control at %d in %q", i, out)
			}
		}
		// Bytes that are not controls pass unchanged: the output without
		// its replacements has them all, in order.
		var kept []byte
		for i := 0; i < len(in); i++ {
			c := in[i]
			if c == 0xc2 && i+1 < len(in) && in[i+1] >= 0x80 && in[i+1] <= 0x9f {
				i++
				continue
			}
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
				continue
			}
			kept = append(kept, c)
		}
		if !isSubsequence(kept, out) {
			t.Fatalf("text lost: in %q out %q", in, out)
		}
	})
}

func isSubsequence(sub, s []byte) bool {
	j := 0
	for i := 0; i < len(s) && j < len(sub); i++ {
		if s[i] == sub[j] {
			j++
		}
	}
	return j == len(sub)
}

// FuzzOneLine: a table cell never holds a line break or a control
// character, whatever the task or message was.
func FuzzOneLine(f *testing.F) {
	for _, s := range []string{"Fix the tests", "a\nb", "\x1b[2J", "\u0085x\u2028y", "\xff\xfe"} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = max%200 + 1
		if max < 2 {
			max = 2
		}
		got := oneLine(s, max)
		for _, r := range got {
			if r == '\n' || r == '\r' || (unicode.IsControl(r) && r != '\uFFFD') {
				t.Fatalf("oneLine(%q) = %q holds %U", s, got, r)
			}
		}
		if utf8.RuneCountInString(got) > max {
			t.Fatalf("oneLine(%q, %d) = %q is longer", s, max, got)
		}
	})
}
