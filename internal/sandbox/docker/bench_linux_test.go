package docker_test

import (
	"bytes"
	"context"

	"os"
	"testing"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/agentrun/agentrun/internal/runner"
)

// The backend beside the engine's own primitives, in one run:
//
//	go test -run '^$' -bench . -benchtime 20x ./internal/sandbox/docker
//
// StartFirstExec: a sandbox from Start to the answer of its first exec
// (Destroy is not timed), against `podman run --rm IMAGE true` done through the
// API (create, start, wait, remove). Exec: one exec into a running
// sandbox through its runner, against an engine exec into the same
// container (create, start attached, read to the end, inspect): what
// `docker exec` / `podman exec` do.

func engineClient(b *testing.B) *client.Client {
	b.Helper()
	cl, err := client.New(client.WithHost(os.Getenv(hostEnv)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cl.Close() })
	return cl
}

func BenchmarkStartFirstExec(b *testing.B) {
	bk, image := requireEngine(b)
	ctx := context.Background()
	b.Run("agentrun-start-first-exec", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			spec := newSpec(b, image)
			b.StartTimer()
			sb, err := bk.Start(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Argv: []string{"true"}}, nil, nil)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec: %v %+v", err, res)
			}
			b.StopTimer()
			if err := sb.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("engine-run-rm-true", func(b *testing.B) {
		cl := engineClient(b)
		for b.Loop() {
			c, err := cl.ContainerCreate(ctx, client.ContainerCreateOptions{
				Config:     &container.Config{Image: image, Cmd: []string{"true"}},
				HostConfig: &container.HostConfig{NetworkMode: "none"},
			})
			if err != nil {
				b.Fatal(err)
			}
			w := cl.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
			if _, err := cl.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
				b.Fatal(err)
			}
			select {
			case r := <-w.Result:
				if r.StatusCode != 0 {
					b.Fatalf("exit %d", r.StatusCode)
				}
			case err := <-w.Error:
				b.Fatal(err)
			}
			if _, err := cl.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkExec(b *testing.B) {
	bk, image := requireEngine(b)
	ctx := context.Background()
	sb := start(b, bk, newSpec(b, image))
	b.Run("agentrun-runner", func(b *testing.B) {
		for b.Loop() {
			res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Argv: []string{"true"}}, nil, nil)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec: %v %+v", err, res)
			}
		}
	})
	b.Run("engine-exec", func(b *testing.B) {
		cl := engineClient(b)
		id := containerOf(b, cl, sb.Runner())
		for b.Loop() {
			ex, err := cl.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
			if err != nil {
				b.Fatal(err)
			}
			att, err := cl.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
			if err != nil {
				b.Fatal(err)
			}
			var out bytes.Buffer
			stdcopy.StdCopy(&out, &out, att.Reader)
			att.Close()
			insp, err := cl.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
			if err != nil || insp.Running || insp.ExitCode != 0 {
				b.Fatalf("exec inspect: %v %+v %s", err, insp, out.String())
			}
		}
	})
}

// containerOf finds the container of the running sandbox by its label
// (the test's spec names run "dockertest").
func containerOf(b *testing.B, cl *client.Client, _ runner.Client) string {
	b.Helper()
	res, err := cl.ContainerList(context.Background(), client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", "agentrun.run=dockertest"),
	})
	if err != nil || len(res.Items) != 1 {
		b.Fatalf("the sandbox's container: %v, %d found", err, len(res.Items))
	}
	return res.Items[0].ID
}
