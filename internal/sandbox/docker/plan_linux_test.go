package docker_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestPlanRecordsImage: submit resolves the image with the engine and
// records its id in the run and in the provenance; a tag alone is refused.
func TestPlanRecordsImage(t *testing.T) {
	b, id := requireEngine(t)
	git := testsupport.Program(t, "git")
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"}} {
		cmd := exec.Command(git, args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	svc := &submit.Service{Backends: map[string]sandbox.Backend{"docker": b}}
	req := submit.Request{Repo: repo, Task: "t", AgentCmd: "true", Attempts: 1, Sandbox: "docker", Image: id, ImageNamed: true, Getenv: os.Getenv}
	r, _, err := svc.Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sandbox.Image != id || r.Provenance.Image != id || r.Provenance.ImageID != id {
		t.Fatalf("recorded image %q, provenance %q / %q; want %s", r.Sandbox.Image, r.Provenance.Image, r.Provenance.ImageID, id)
	}
	req.Image = "localhost/agentrun-test:busybox"
	if _, _, err := svc.Plan(context.Background(), req); !catalog.ImageNotPinned.Is(err) {
		t.Fatalf("a tag alone: %v", err)
	}
	req.Image = ""
	if _, _, err := svc.Plan(context.Background(), req); !catalog.NoImage.Is(err) {
		t.Fatalf("no image: %v", err)
	}
}
