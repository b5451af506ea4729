package flock_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/run"
)

// The cross-process tests run the test binary again as another supervisor
// on the same data directory (helperEnv names what it does).
const helperEnv = "AGENTRUN_COORD_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := helperMain(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperMain is another supervisor's process.
//
//	hold:  acquire run COORD_ID, queue it at COORD_SEQ, take one of 1 slot,
//	       print "held <token>", then wait for the parent to kill it
//	adopt: adopt run COORD_ID's lease from fd 3, print "adopted <token>",
//	       wait for a line on stdin, release, print "released"
func helperMain(mode string) error {
	c := flock.New(os.Getenv("COORD_HOME"))
	id := os.Getenv("COORD_ID")
	in := bufio.NewReader(os.Stdin)
	switch mode {
	case "hold":
		seq, _ := strconv.ParseInt(os.Getenv("COORD_SEQ"), 10, 64)
		l, err := c.Acquire(ctx, id, 5*time.Second)
		if err != nil {
			return err
		}
		if err := c.Enqueue(ctx, l, seq); err != nil {
			return err
		}
		s, err := c.TrySlot(ctx, l, seq, 1, nil)
		if err != nil || s == nil {
			return fmt.Errorf("no slot: %v", err)
		}
		fmt.Println("held", l.Token())
		_, _ = in.ReadString('\n') // until killed
		return errors.Join(s.Release(), l.Release())
	case "adopt":
		l, err := c.Adopt(id, os.NewFile(3, "supervisor.lock"))
		if err != nil {
			return err
		}
		fmt.Println("adopted", l.Token())
		_, _ = in.ReadString('\n')
		if err := l.Release(); err != nil {
			return err
		}
		fmt.Println("released")
		return nil
	}
	return fmt.Errorf("unknown mode %q", mode)
}

type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startHelper(t *testing.T, mode, home, id string, seq int64, inherit *os.File) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "COORD_HOME="+home, "COORD_ID="+id,
		"COORD_SEQ="+strconv.FormatInt(seq, 10))
	cmd.Stderr = os.Stderr
	if inherit != nil {
		cmd.ExtraFiles = []*os.File{inherit} // fd 3
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return h
}

// expect waits for the helper's next line and wants it to be want.
func (h *helper) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got, ok := <-h.lines:
		if !ok || got != want {
			t.Fatalf("helper said %q (open: %v); want %q", got, ok, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("helper did not say %q within 30s", want)
	}
}

// TestKilledHolder: a supervisor killed with SIGKILL gives up its lease and
// its slot, and its queue entry no longer holds anyone back.
func TestKilledHolder(t *testing.T) {
	home := t.TempDir()
	c := flock.New(home)
	id := run.NewID()
	h := startHelper(t, "hold", home, id, 5, nil)
	h.expect(t, "held 1")
	if !held(t, c, id) {
		t.Fatal("the helper's lease is not held")
	}
	if _, err := c.Acquire(ctx, id, 20*time.Millisecond); !errors.Is(err, coord.ErrHeld) {
		t.Fatalf("Acquire of the helper's run: %v; want ErrHeld", err)
	}
	// An older run finds the one slot taken; a younger one waits behind
	// the helper's entry although a second slot is free.
	older, younger := acquire(t, c, run.NewID()), acquire(t, c, run.NewID())
	if s, err := c.TrySlot(ctx, older, 1, 1, nil); err != nil || s != nil {
		t.Fatalf("TrySlot of an older run, the one slot held by the helper: %v, %v; want none", s, err)
	}
	if s, err := c.TrySlot(ctx, younger, 9, 2, nil); err != nil || s != nil {
		t.Fatalf("TrySlot of a younger run behind the helper: %v, %v; want none", s, err)
	}

	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
	if held(t, c, id) {
		t.Fatal("the killed helper's lease is still held")
	}
	s, err := c.TrySlot(ctx, younger, 9, 1, nil)
	if err != nil || s == nil {
		t.Fatalf("TrySlot after the helper was killed: %v, %v; want its slot", s, err)
	}
	s.Release()
	if _, err := os.Stat(filepath.Join(home, "queue", fmt.Sprintf("%020d-%s", 5, id))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed helper's entry was not swept: %v", err)
	}
	if l := acquire(t, c, id); l.Token() != 2 {
		t.Fatalf("token %d after the killed helper's 1; want 2", l.Token())
	}
}

// TestHandover: a child given File() holds the lease after the parent has
// released its copy, Adopt gives it the same token, and the lease is free
// once the child releases it or dies.
func TestHandover(t *testing.T) {
	for _, end := range []string{"release", "kill"} {
		t.Run(end, func(t *testing.T) {
			home := t.TempDir()
			c := flock.New(home)
			id := run.NewID()
			release(t, acquire(t, c, id)) // token 1, so that the child's is not the first
			l := acquire(t, c, id)
			f, err := c.File(l)
			if err != nil {
				t.Fatal(err)
			}
			h := startHelper(t, "adopt", home, id, 0, f)
			release(t, l)
			h.expect(t, "adopted "+strconv.FormatInt(l.Token(), 10))
			if !held(t, c, id) {
				t.Fatal("the lease is not held once the parent released its copy")
			}
			if _, err := c.Acquire(ctx, id, 20*time.Millisecond); !errors.Is(err, coord.ErrHeld) {
				t.Fatalf("Acquire of the child's lease: %v; want ErrHeld", err)
			}
			if end == "release" {
				if _, err := io.WriteString(h.stdin, "\n"); err != nil {
					t.Fatal(err)
				}
				h.expect(t, "released")
				if err := h.cmd.Wait(); err != nil {
					t.Fatalf("helper: %v", err)
				}
			} else {
				if err := h.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				_ = h.cmd.Wait()
			}
			if held(t, c, id) {
				t.Fatalf("the lease is held after the child's %s", end)
			}
			if n := acquire(t, c, id); n.Token() != l.Token()+1 {
				t.Fatalf("token %d after the child's %d; want %d", n.Token(), l.Token(), l.Token()+1)
			}
		})
	}
}

func release(t *testing.T, l coord.Lease) {
	t.Helper()
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}
