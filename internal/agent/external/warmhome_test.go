package external

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
)

// fakeCLI writes a CLI (a shell script) that does first-run work in HOME
// the first time it runs there (its state file), leaves a lock in a
// volatile directory, logs each start (URL and key) to log, fails against
// the warm-up route and otherwise copies its state into the working
// directory.
func fakeCLI(t *testing.T, dir, log string) string {
	t.Helper()
	bin := filepath.Join(dir, "fake-cli")
	script := `#!/bin/sh
echo "$1 $2" >> ` + shellQuote(log) + `
mkdir -p "$HOME/.fake/tmp"
[ -f "$HOME/.fake/state" ] || od -An -N8 -tx8 /dev/urandom > "$HOME/.fake/state"
echo lock > "$HOME/.fake/tmp/lock"
case "$1" in */agentrun-warm-up) echo refused >&2; exit 1;; esac
cp "$HOME/.fake/state" state-seen
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func fakeProfile() *Profile {
	return &Profile{Info: agent.Info{Name: "fake", Protocol: "openai"},
		Launch: func(in LaunchInput) Launch {
			return Launch{Command: shellQuote(in.Binary) + " " + shellQuote(in.BaseURL) + " " + shellQuote(in.Key),
				Files: map[string]string{".fake/config": "url=" + in.BaseURL + "\n"}}
		},
		Warm: &WarmHome{Volatile: []string{".fake/tmp"}}}
}

// warmAttempt runs attempt 1 of a fake-CLI agent in a new host sandbox
// with templates in tpls, and returns the workspace, HOME and the kinds
// of the home events.
func warmAttempt(t *testing.T, bin, tpls string, prep func(home string)) (ws, home string, kinds []string) {
	t.Helper()
	sb, ws := startHost(t)
	home = filepath.Join(filepath.Dir(ws), "home")
	if err := os.MkdirAll(filepath.Join(home, homeTmp), 0o700); err != nil {
		t.Fatal(err)
	}
	if prep != nil {
		prep(home)
	}
	a := &Agent{spec: run.AgentSpec{Name: "fake", Binary: bin}, profile: fakeProfile()}
	var out syncBuf
	o, err := a.Attempt(context.Background(), agent.AttemptInput{N: 1, Prompt: "task", Runner: sb.Runner(), WorkDir: sb.WorkDir(),
		Output: &out, Home: home, HostHome: home, HomeTemplates: tpls,
		Gateway: &agent.Gateway{URL: "http://127.0.0.1:9", Key: "agentrun-gateway-runtoken", Routes: []string{"openai"}},
		Event: func(e run.Event) {
			if e.Type == run.EventHome {
				var d struct{ Kind string }
				_ = json.Unmarshal(e.Data, &d)
				kinds = append(kinds, d.Kind)
			}
		}})
	if err != nil || o.Reason != run.ReasonCompleted {
		t.Fatalf("attempt: %v %+v\n%s", err, o, out.String())
	}
	return ws, home, kinds
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWarmHome(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "starts.log")
	bin := fakeCLI(t, dir, log)
	tpls := filepath.Join(dir, "agent-homes")

	// The first run warms up, then runs its attempt on the warm HOME.
	ws1, home1, kinds := warmAttempt(t, bin, tpls, nil)
	if !slices.Equal(kinds, []string{"warmed"}) {
		t.Fatalf("home events %v", kinds)
	}
	starts := strings.Split(strings.TrimSpace(readString(t, log)), "\n")
	if len(starts) != 2 || starts[0] != "http://127.0.0.1:9/"+warmUpRoute+" "+warmUpKey || starts[1] != "http://127.0.0.1:9/openai agentrun-gateway-runtoken" {
		t.Fatalf("starts %q", starts)
	}
	state := readString(t, filepath.Join(home1, ".fake", "state"))
	if readString(t, filepath.Join(ws1, "state-seen")) != state {
		t.Fatal("the attempt did not start from the warm-up's HOME")
	}
	if got := readString(t, filepath.Join(home1, ".fake", "config")); got != "url=http://127.0.0.1:9/openai\n" {
		t.Fatalf("the attempt's config %q", got)
	}
	// The template, and the next run's HOME copied from it ahead.
	WaitSpares()
	key := templateOf(t, tpls)
	tpl := filepath.Join(tpls, key)
	spareState := inode(t, filepath.Join(tpls, spareName(key), spareHomeDir, ".fake", "state"))
	if readString(t, filepath.Join(tpl, ".fake", "state")) != state {
		t.Fatal("the template is not the warm-up's HOME")
	}
	for _, p := range []string{".fake/tmp", ".fake/config", homeTmp} {
		if _, err := os.Lstat(filepath.Join(tpl, p)); err == nil {
			t.Errorf("the template keeps %s", p)
		}
	}

	// The next run starts from the copy made ahead: no warm-up, the same
	// state, the spare's very files.
	ws2, home2, kinds := warmAttempt(t, bin, tpls, nil)
	if !slices.Equal(kinds, []string{"template"}) {
		t.Fatalf("home events %v", kinds)
	}
	if inode(t, filepath.Join(home2, ".fake", "state")) != spareState {
		t.Fatal("the second run's HOME is not the spare")
	}
	if n := strings.Count(readString(t, log), "/"+warmUpRoute); n != 1 {
		t.Fatalf("%d warm-ups", n)
	}
	if readString(t, filepath.Join(ws2, "state-seen")) != state {
		t.Fatal("the second run did not start from the template")
	}
	if fi, err := os.Stat(filepath.Join(home2, ".fake", "state")); err != nil || fi.Mode().Perm() != 0o644&^umask() {
		t.Fatalf("copied state: %v %v", fi, err)
	}

	// A HOME that holds anything already is left as it is.
	_, home3, kinds := warmAttempt(t, bin, tpls, func(home string) {
		if err := os.WriteFile(filepath.Join(home, "mine"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if len(kinds) != 0 {
		t.Fatalf("home events %v for a HOME in use", kinds)
	}
	if readString(t, filepath.Join(home3, ".fake", "state")) == state {
		t.Fatal("a HOME in use was filled from the template")
	}

	// A new install of the CLI (a new file) warms up anew; the old
	// template goes.
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	fakeCLI(t, dir, log)
	_, home4, kinds := warmAttempt(t, bin, tpls, nil)
	if !slices.Equal(kinds, []string{"warmed"}) {
		t.Fatalf("home events %v after a reinstall", kinds)
	}
	WaitSpares()
	if filepath.Join(tpls, templateOf(t, tpls)) == tpl {
		t.Fatal("the old template stayed after a reinstall")
	}
	if readString(t, filepath.Join(home4, ".fake", "state")) == state {
		t.Fatal("a reinstalled CLI started from the old template")
	}
}

// templateOf is the key of the one template in tpls, which holds just
// that template, its spare and its marks (made in this boot, synced).
func templateOf(t *testing.T, tpls string) string {
	t.Helper()
	var names []string
	ents, _ := os.ReadDir(tpls)
	for _, e := range ents {
		names = append(names, e.Name())
	}
	key := names[len(names)-1]
	if want := []string{templateBootPrefix + key, spareName(key), templateSyncedPrefix + key, key}; !slices.Equal(names, want) {
		t.Fatalf("templates %v, want %v", names, want)
	}
	return key
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func umask() os.FileMode {
	dir, _ := os.MkdirTemp("", "umask")
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "f")
	_ = os.WriteFile(p, nil, 0o777)
	fi, _ := os.Stat(p)
	return 0o777 &^ fi.Mode().Perm()
}

// A warm-up that cannot start the CLI leaves the HOME empty and keeps no
// template; the attempt goes on.
func TestWarmHomeFailedWarmUp(t *testing.T) {
	dir := t.TempDir()
	tpls := filepath.Join(dir, "agent-homes")
	bin := filepath.Join(dir, "fake-cli")
	// Starts only when not warming up: the warm-up exits 127.
	script := "#!/bin/sh\ncase \"$1\" in */agentrun-warm-up) mkdir -p \"$HOME/.fake\"; echo x > \"$HOME/.fake/half\"; exit 127;; esac\ntouch ran\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ws, home, kinds := warmAttempt(t, bin, tpls, nil)
	if !slices.Equal(kinds, []string{"failed"}) {
		t.Fatalf("home events %v", kinds)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err != nil {
		t.Fatal("the attempt did not run")
	}
	if _, err := os.Stat(filepath.Join(home, ".fake", "half")); err == nil {
		t.Fatal("the failed warm-up's files stayed in HOME")
	}
	if ents, _ := os.ReadDir(tpls); len(ents) != 0 {
		t.Fatalf("templates %v", ents)
	}
}

// copyTree copies links as links, never what they point to, and writes
// nothing outside its destination.
func TestCopyTreeKeepsLinksAsLinks(t *testing.T) {
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(src, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(src, dst, nil); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != secret {
		t.Fatalf("link: %q %v", target, err)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "dirlink")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("dirlink: %v %v", fi, err)
	}
	// A destination that holds a link where the tree has a directory:
	// refused, nothing written through it.
	src2, dst2 := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(src2, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src2, "d", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dst2, "d")); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(src2, dst2, nil); err == nil {
		t.Fatal("copied over a link")
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Fatal("a file was written through the link")
	}
}

// A template is the CLI's as installed, in one kind of sandbox, with one
// profile config.
func TestTemplateKey(t *testing.T) {
	bin := fakeCLI(t, t.TempDir(), "/dev/null")
	p := *fakeProfile()
	k1, err := templateKey(p, run.AgentSpec{Binary: bin}, "native")
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := templateKey(p, run.AgentSpec{Binary: bin}, "native"); k != k1 || !strings.HasPrefix(k1, "fake-") {
		t.Fatalf("keys %s %s", k, k1)
	}
	if k, _ := templateKey(p, run.AgentSpec{Binary: bin}, "docker sha256:1"); k == k1 {
		t.Fatal("another sandbox, the same template")
	}
	q := p
	q.Launch = func(in LaunchInput) Launch {
		l := p.Launch(in)
		l.Files[".fake/more"] = "x"
		return l
	}
	if k, _ := templateKey(q, run.AgentSpec{Binary: bin}, "native"); k == k1 {
		t.Fatal("another profile config, the same template")
	}
	if _, err := templateKey(p, run.AgentSpec{Binary: bin + "-missing"}, "native"); err == nil {
		t.Fatal("a missing CLI has a key")
	}
}

// Saving a template removes the profile's older ones for the same kind
// of sandbox with their spares, and what a killed supervisor left aside
// long ago; not the templates or spares of another sandbox or profile,
// nor a copy under way.
func TestSaveTemplatePrunes(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "state"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := "fake-aaaaaaaa-1111111111111111"
	keep := []string{"fake-bbbbbbbb-2222222222222222", "other-aaaaaaaa-3333333333333333", ".new-fake-aaaaaaaa-4444444444444444-1",
		".spare-fake-bbbbbbbb-2222222222222222", ".spare-other-aaaaaaaa-3333333333333333", ".new-spare-" + key + "-3"}
	gone := []string{"fake-aaaaaaaa-5555555555555555", ".new-fake-aaaaaaaa-6666666666666666-2",
		".taken-spare-" + key + "-4", ".spare-fake-aaaaaaaa-5555555555555555", ".new-spare-fake-aaaaaaaa-5555555555555555-5",
		".taken-spare-fake-aaaaaaaa-5555555555555555-6"}
	for _, n := range append(slices.Clone(keep), gone...) {
		if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-time.Hour)
	for _, n := range []string{gone[1], gone[2]} {
		if err := os.Chtimes(filepath.Join(dir, n), long, long); err != nil {
			t.Fatal(err)
		}
	}
	if err := saveTemplate(home, dir, key, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(keep, key) {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s went", n)
		}
	}
	for _, n := range gone {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			t.Errorf("%s stayed", n)
		}
	}
	if readString(t, filepath.Join(dir, key, "state")) != "x" {
		t.Fatal("the template is not HOME")
	}
}

// A template that cannot be copied whole leaves the HOME empty (but for
// the attempt's own files); the attempt goes on.
func TestWarmHomeFailedCopy(t *testing.T) {
	dir := t.TempDir()
	bin := fakeCLI(t, dir, filepath.Join(dir, "starts.log"))
	tpls := filepath.Join(dir, "agent-homes")
	key, err := templateKey(*fakeProfile(), run.AgentSpec{Binary: bin}, "")
	if err != nil {
		t.Fatal(err)
	}
	// A file first, then a name the HOME already has: the copy fails
	// half-way.
	for _, d := range []string{".fake", homeTmp} {
		if err := os.MkdirAll(filepath.Join(tpls, key, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tpls, key, ".fake", "state"), []byte("from the template\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tpls, templateBootPrefix+key), []byte(bootID()), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, home, kinds := warmAttempt(t, bin, tpls, nil)
	if !slices.Equal(kinds, []string{"failed"}) {
		t.Fatalf("home events %v", kinds)
	}
	if got := readString(t, filepath.Join(ws, "state-seen")); got == "from the template\n" || got == "" {
		t.Fatalf("the attempt started from a half-copied HOME: %q", got)
	}
	if got := readString(t, filepath.Join(home, ".fake", "state")); got == "from the template\n" {
		t.Fatal("the half copy stayed in HOME")
	}
}

// The supervisor fills a new run's HOME from the template before the
// attempt (while the sandbox starts); the attempt then finds it filled.
func TestPrepareHome(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "starts.log")
	bin := fakeCLI(t, dir, log)
	tpls := filepath.Join(dir, "agent-homes")
	_, home1, _ := warmAttempt(t, bin, tpls, nil) // makes the template
	state := readString(t, filepath.Join(home1, ".fake", "state"))
	r := &run.Run{Agent: run.AgentSpec{Name: "fake", Binary: bin}}
	if ev := prepareHome(*fakeProfile(), &run.Run{Agent: r.Agent, Attempts: []run.Attempt{{N: 1}}}, filepath.Join(dir, "h0"), tpls); ev != nil {
		t.Fatalf("a run with attempts: %+v", ev)
	}
	var prepared string
	ws, home, kinds := warmAttempt(t, bin, tpls, func(home string) {
		ev := prepareHome(*fakeProfile(), r, home, tpls)
		if ev == nil || ev.Type != run.EventHome || !strings.Contains(string(ev.Data), `"template"`) {
			t.Fatalf("event %+v", ev)
		}
		prepared = readString(t, filepath.Join(home, ".fake", "state"))
	})
	if prepared != state || readString(t, filepath.Join(ws, "state-seen")) != state {
		t.Fatal("the attempt did not start from the prepared HOME")
	}
	if len(kinds) != 0 {
		t.Fatalf("the attempt filled HOME again: %v", kinds)
	}
	if n := strings.Count(readString(t, log), "/"+warmUpRoute); n != 1 {
		t.Fatalf("%d warm-ups", n)
	}
	if _, err := os.Lstat(markPath(home)); err == nil {
		t.Fatal("the mark stayed")
	}
}

// A HOME a killed supervisor left half filled (its mark beside it) is
// emptied before the next attempt, whichever it is.
func TestHalfFilledHomeIsEmptied(t *testing.T) {
	dir := t.TempDir()
	bin := fakeCLI(t, dir, filepath.Join(dir, "starts.log"))
	sb, ws := startHost(t)
	home := filepath.Join(filepath.Dir(ws), "home")
	if err := os.MkdirAll(filepath.Join(home, ".fake"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".fake", "state"), []byte("half\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	markHome(home)
	a := &Agent{spec: run.AgentSpec{Name: "fake", Binary: bin}, profile: fakeProfile()}
	var out syncBuf
	o, err := a.Attempt(context.Background(), agent.AttemptInput{N: 2, Resumed: true, Prompt: "task", Runner: sb.Runner(), WorkDir: sb.WorkDir(),
		Output: &out, Home: home, HostHome: home, HomeTemplates: filepath.Join(dir, "agent-homes"),
		Gateway: &agent.Gateway{URL: "http://127.0.0.1:9", Key: "k", Routes: []string{"openai"}}})
	if err != nil || o.Reason != run.ReasonCompleted {
		t.Fatalf("attempt: %v %+v\n%s", err, o, out.String())
	}
	if got := readString(t, filepath.Join(ws, "state-seen")); got == "half\n" {
		t.Fatal("the attempt ran on the half-filled HOME")
	}
	if _, err := os.Lstat(markPath(home)); err == nil {
		t.Fatal("the mark stayed")
	}
}
