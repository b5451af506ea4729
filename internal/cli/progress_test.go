package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// While the workspace is made, progress counts its files against the base
// commit's.
func TestProgressCountsWorkspaceFiles(t *testing.T) {
	testsupport.Program(t, "git")
	repo, ws := t.TempDir(), t.TempDir()
	files := map[string]string{}
	for i := range 5 {
		files["f"+string(rune('a'+i))] = "x"
	}
	base := testsupport.RepoAt(t, repo, files)
	for _, n := range []string{"fa", "fb", ".git/HEAD"} { // .git is not counted
		_ = os.MkdirAll(filepath.Dir(filepath.Join(ws, n)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	t0 := time.Now()
	p := newProgress(&out, true, 2, t0)
	p.files = newFileCount(repo, base, ws)
	p.event(run.Event{Type: run.EventState, State: run.StatePreparing}, t0)
	deadline := time.Now().Add(5 * time.Second)
	for i := 1; !strings.Contains(out.String(), "2 of 5 files") && time.Now().Before(deadline); i++ {
		p.tick(t0.Add(time.Duration(i) * 600 * time.Millisecond))
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "making the workspace, 2 of 5 files") {
		t.Fatalf("%q", out.String())
	}
	// Once the sandbox has started, counting stops.
	p.event(run.Event{Type: run.EventSandbox, Data: []byte(`{"backend":"native"}`)}, t0.Add(time.Minute))
	before := out.Len()
	p.tick(t0.Add(2 * time.Minute))
	if strings.Contains(out.String()[before:], "files") {
		t.Fatalf("still counting: %q", out.String()[before:])
	}
}

// The setup's events show as a phase while it runs and a line when done.
func TestProgressShowsTheSetup(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Now()
	p := newProgress(&out, true, 2, t0)
	p.event(run.Event{Type: run.EventSetup, Data: []byte(`{"kind":"started"}`)}, t0)
	if !strings.Contains(out.String(), "running the setup command") {
		t.Fatalf("%q", out.String())
	}
	p.event(run.Event{Type: run.EventSetup, Message: "setup done in 2s: layer v1-setup-x", Data: []byte(`{"kind":"done"}`)}, t0.Add(2*time.Second))
	if !strings.Contains(out.String(), "setup done in 2s") {
		t.Fatalf("%q", out.String())
	}
}

// For an overlay workspace the progress says what its overlay func says,
// never "0 of N files" of its empty upper layer.
func TestProgressOverlayWorkspace(t *testing.T) {
	testsupport.Program(t, "git")
	repo, ws := t.TempDir(), t.TempDir()
	base := testsupport.RepoAt(t, repo, map[string]string{"a": "x", "b": "y"})
	var out bytes.Buffer
	t0 := time.Now()
	p := newProgress(&out, false, 1, t0)
	p.files = newFileCount(repo, base, ws)
	p.files.overlay = func() string { return "an overlay on the cached layer of 2 files" }
	p.event(run.Event{Type: run.EventState, State: run.StatePreparing}, t0)
	p.tick(t0.Add(11 * time.Second))
	if !strings.Contains(out.String(), "making the workspace, an overlay on the cached layer of 2 files") || strings.Contains(out.String(), "0 of") {
		t.Fatalf("%q", out.String())
	}
}

// A model line is kept whole: its end names the key or the path.
func TestProgressModelLineWhole(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Now()
	p := newProgress(&out, false, 2, t0)
	msg := "the model server http://127.0.0.1:18402 refused the key from SCRIPTED_KEY (401 Unauthorized) on 2 model requests in a row"
	p.event(run.Event{Type: run.EventGateway, Message: msg, Data: []byte(`{"kind":"model_failing"}`)}, t0)
	if !strings.Contains(out.String(), "model: "+msg+"; ending the attempt\n") {
		t.Fatalf("%q", out.String())
	}
}

// The base commit's files are counted (a git ls-tree) only once the count
// is shown, never at a run's start: a workspace made within the first
// half second is never counted.
func TestProgressCountsBaseOnlyWhenShown(t *testing.T) {
	testsupport.Program(t, "git")
	repo, ws := t.TempDir(), t.TempDir()
	base := testsupport.RepoAt(t, repo, map[string]string{"a": "x"})
	var out bytes.Buffer
	t0 := time.Now()
	p := newProgress(&out, true, 1, t0)
	p.files = newFileCount(repo, base, ws)
	p.event(run.Event{Type: run.EventState, State: run.StatePreparing}, t0)
	p.tick(t0.Add(300 * time.Millisecond))
	if p.files.asked {
		t.Fatal("the base commit's files were counted before the count was shown")
	}
	p.tick(t0.Add(600 * time.Millisecond))
	if !p.files.asked {
		t.Fatal("the count shown did not count the base commit's files")
	}
	if n := <-p.files.total; n != 1 {
		t.Fatalf("base has %d files, want 1", n)
	}
}

// A warning the supervisor journals (something the user should know)
// shows as a line of its own.
func TestProgressShowsWarnings(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Now()
	p := newProgress(&out, false, 1, t0)
	p.event(run.Event{Type: run.EventWarning, Message: "sub, where the task was given, is not a directory in the workspace: the agent starts at its top"}, t0)
	if !strings.Contains(out.String(), "warning: sub, where the task was given, is not a directory in the workspace") {
		t.Fatalf("%q", out.String())
	}
}
