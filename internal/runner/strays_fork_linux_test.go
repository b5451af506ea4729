package runner

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestForksOfTheProcessAreNoStrays: another part of the runner's process
// (an agent host's supervisor running git for another run) forks while
// commands start and end. Its child holds every descriptor of the
// process between its fork and its exec, the write end of a command's
// marker among them if that command is starting; should the command end
// before the child's exec, the child looks like the command's stray. It
// is not one, and must not be killed. The machine is kept busy so that
// such a child waits for a CPU between its fork and its exec.
func TestForksOfTheProcessAreNoStrays(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of forks under load")
	}
	root := t.TempDir()
	c := testClient(t, testServer(t, root, ServerOptions{}))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	for range 4 { // load: processes, so the scheduler preempts the forks
		burn := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := burn.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = burn.Wait() })
	}
	var wg sync.WaitGroup
	var commands, forks atomic.Int64
	var killed atomic.Int64
	var firstErr atomic.Value
	for range 3 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := c.Exec(ctx, ExecRequest{Argv: []string{"true"}}, io.Discard, io.Discard); err == nil {
					commands.Add(1)
				}
			}
		})
	}
	for range 3 {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := exec.Command("true").Run() // not the context's: only a stray hunt may kill it
				forks.Add(1)
				// Only a kill counts: a fork the busy machine refused
				// (EAGAIN) is no stray hunt's doing.
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					killed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	if n := killed.Load(); n > 0 {
		t.Fatalf("%d of %d forks of the runner's process ended by a stray hunt (%v), over %d commands", n, forks.Load(), firstErr.Load(), commands.Load())
	}
	t.Logf("%d forks, %d commands", forks.Load(), commands.Load())
}
