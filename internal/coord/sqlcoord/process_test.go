package sqlcoord_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/coord/sqlcoord"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

// The helper process: when the test binary is re-executed with
// AGENTRUN_SQLCOORD_HELPER set, TestHelperProcess takes a run's lease, its
// place in the queue and a slot, says so on stdout, and waits to be
// killed.
const (
	helperEnv    = "AGENTRUN_SQLCOORD_HELPER"
	helperURLEnv = "AGENTRUN_SQLCOORD_HELPER_URL"
	helperRunEnv = "AGENTRUN_SQLCOORD_HELPER_RUN"
	helperTTLEnv = "AGENTRUN_SQLCOORD_HELPER_TTL"
)

func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		return
	}
	if err := helper(); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helper() error {
	ttl, err := time.ParseDuration(os.Getenv(helperTTLEnv))
	if err != nil {
		return err
	}
	c, err := sqlcoord.Open(ctx, os.Getenv(helperURLEnv), sqlcoord.Options{LeaseTTL: ttl})
	if err != nil {
		return err
	}
	l, err := c.Acquire(ctx, os.Getenv(helperRunEnv), 0)
	if err != nil {
		return err
	}
	if err := c.Enqueue(ctx, l, 1); err != nil {
		return err
	}
	s, err := c.TrySlot(ctx, l, 1, 1, nil)
	if err != nil || s == nil {
		return fmt.Errorf("TrySlot: %v, %v", s, err)
	}
	fmt.Printf("ready %d\n", l.Token())
	select {} // until killed
}

// startHolder starts a helper holding run id's lease, its queue entry at
// seq 1 and the one slot, and returns it and its token.
func startHolder(t *testing.T, url, id string, ttl time.Duration) (*exec.Cmd, int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1", helperURLEnv+"="+url, helperRunEnv+"="+id, helperTTLEnv+"="+ttl.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	tok, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "ready ")), 10, 64)
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	return cmd, tok
}

// TestHolderKilled: a process that holds a lease, a queue entry and a slot
// is killed (SIGKILL: no Release, no Close). Until the TTL passes the
// lease is held; then another process takes it with a greater token, the
// dead entry no longer holds back a younger run, and the slot is free.
func TestHolderKilled(t *testing.T) {
	t.Parallel()
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		t.Parallel()
		// Long enough that the helper's renewals land within the TTL on a
		// loaded machine.
		const ttl = 2 * time.Second
		url := newURL(t)
		c := openCoord(t, url, ttl)
		id := run.NewID()
		cmd, token := startHolder(t, url, id, ttl)
		if h, err := c.Held(ctx, id); err != nil || !h {
			t.Fatalf("Held while the helper lives: %v, %v", h, err)
		}
		younger := mustAcquire(t, c, run.NewID())
		if err := c.Enqueue(ctx, younger, 2); err != nil {
			t.Fatal(err)
		}
		if s, err := c.TrySlot(ctx, younger, 2, 1, nil); err != nil || s != nil {
			t.Fatalf("TrySlot while the helper holds the slot: %v, %v; want none", s, err)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		killed := time.Now()

		l, err := c.Acquire(ctx, id, 10*ttl)
		if err != nil {
			t.Fatalf("Acquire after the holder was killed: %v", err)
		}
		t.Logf("lease free %v after the kill (TTL %v)", time.Since(killed).Round(time.Millisecond), ttl)
		if l.Token() <= token {
			t.Fatalf("token %d after the dead holder's %d", l.Token(), token)
		}
		var s coord.Slot
		for deadline := time.Now().Add(10 * ttl); s == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if s, err = c.TrySlot(ctx, younger, 2, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		if s == nil {
			t.Fatal("the dead holder's slot was never freed")
		}
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
	})
}
