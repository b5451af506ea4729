package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/runner/deathwatch"
)

// TestReapOrphansKeepsExitCodes re-runs this test binary as a child
// subreaper (as pid 1 of a sandbox is, every orphan comes back to it) that
// serves with ReapOrphans: while one command after another double-forks
// orphans that exit at once or a little later (some in their own session,
// out of the group kill), commands with known exit codes run side by
// side, and every exit code must come back right (a stolen wait would
// make it an error or 0). At the end no zombie is left.
func TestReapOrphansKeepsExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("many rounds")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReaper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "RUNNER_HELPER_REAPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "reaper rounds ok") {
		t.Fatalf("reaper helper: %v\n%s", err, out)
	}
}

func TestHelperReaper(t *testing.T) {
	if os.Getenv("RUNNER_HELPER_REAPER") != "1" {
		t.Skip("helper role only")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	c := testClient(t, testServer(t, t.TempDir(), ServerOptions{ReapOrphans: true, NoWatchdog: true}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	var orphans sync.WaitGroup
	orphans.Add(1)
	go func() {
		defer orphans.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := c.Exec(ctx, ExecRequest{Shell: `for i in 1 2 3 4 5 6 7 8; do
	(sh -c 'exit 9' &)
	(setsid sh -c 'sleep 0.00$i; exit 11' &)
done; exit 0`}, nil, nil)
			if err != nil || res.ExitCode != 0 {
				t.Errorf("orphan maker: %v %+v", err, res)
				return
			}
		}
	}()
	const rounds, parallel = 60, 4
	var wg sync.WaitGroup
	for w := range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				want := (w*rounds+i)%120 + 1
				var res *ExecResult
				var err error
				if i%2 == 0 {
					res, err = c.Exec(ctx, ExecRequest{Argv: []string{"sh", "-c", fmt.Sprintf("exit %d", want)}}, nil, nil)
				} else {
					res, err = c.Exec(ctx, ExecRequest{Shell: fmt.Sprintf("(true &); exit %d", want)}, nil, nil)
				}
				if err != nil || res.ExitCode != want {
					t.Errorf("exit %d came back as %+v, %v", want, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	orphans.Wait()
	if t.Failed() {
		return
	}
	// The last orphans sleep a few ms; then nothing may be left unreaped.
	self := os.Getpid()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var zombies []int
		for pid, p := range deathwatch.Scan() {
			if p.PPid == self && p.State == 'Z' {
				zombies = append(zombies, pid)
			}
		}
		if len(zombies) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombies left unreaped: %v", zombies)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Log("reaper rounds ok")
}
