package docker_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox/docker"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestAgentCannotTakeTheRunnersPlace runs, as the agent inside a docker
// sandbox, a program that attacks the runner's connection to the host:
// it tries to replace or shadow the socket the runner dials, to listen
// there as a relay, to connect as the runner without the token, and to
// read the token out of any process. Every attack must fail, and the
// runner must still answer afterwards.
func TestAgentCannotTakeTheRunnersPlace(t *testing.T) {
	b, image := requireEngine(t)
	goBin := testsupport.Program(t, "go")
	spec := newSpec(t, image)
	spec.RunID = "link-" + itoa(os.Getpid())
	probe := filepath.Join(spec.Workspace, "linkprobe")
	build := exec.Command(goBin, "build", "-o", probe, "./testdata/linkprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v\n%s", err, out)
	}
	sb := start(t, b, spec)
	token := tokenOf(t, spec.RunID)

	// A command that runs across the attack: the runner that answers it
	// at the end is the one the host started.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	long := make(chan *runner.ExecResult, 1)
	go func() {
		res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: "sleep 2; echo survived"}, nil, nil)
		if err != nil {
			t.Errorf("a command across the attack: %v", err)
		}
		long <- res
	}()
	res := sh(t, sb, "./linkprobe /workspace/dump")
	out := string(res.Stdout)
	for _, attack := range []string{"replace", "listen", "impersonate", "read"} {
		if !strings.Contains(out, attack+": held\n") {
			t.Errorf("attack %s worked:\n%s%s", attack, out, res.Stderr)
		}
	}
	dump, err := os.ReadFile(filepath.Join(spec.Workspace, "dump"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(dump), token) {
		t.Error("the agent read the runner's token")
	}
	if r := <-long; r == nil || strings.TrimSpace(string(r.Stdout)) != "survived" {
		t.Errorf("the command across the attack: %+v", r)
	}
	if got := strings.TrimSpace(string(sh(t, sb, "echo still").Stdout)); got != "still" {
		t.Errorf("the runner after the attack: %q", got)
	}
}

// tokenOf reads the runner's token out of the container's config, as the
// host sees it.
func tokenOf(t *testing.T, runID string) string {
	t.Helper()
	cl, err := client.New(client.WithHost(os.Getenv(hostEnv)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	list, err := cl.ContainerList(ctx, client.ContainerListOptions{Filters: make(client.Filters).Add("label", docker.LabelRun+"="+runID)})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("the container of %s: %v %v", runID, list.Items, err)
	}
	insp, err := cl.ContainerInspect(ctx, list.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range insp.Container.Config.Env {
		if v, ok := strings.CutPrefix(e, "AGENTRUN_DOCKER_CONFIG="); ok {
			var c struct{ Token string }
			if err := json.Unmarshal([]byte(v), &c); err != nil || len(c.Token) != 64 {
				t.Fatalf("config %q: %v", v, err)
			}
			return c.Token
		}
	}
	t.Fatal("no config in the container's environment")
	return ""
}
