package supervisor

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"golang.org/x/sys/unix"
)

// waiterPair is the socket pair a submit and the supervisor it started
// ahead share once the run is handed over: the submit's end (a Pending
// that was handed its run) and the supervisor's (its Waiter).
func waiterPair(t *testing.T) (*Pending, *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	p := &Pending{conn: os.NewFile(uintptr(fds[0]), "ours"), handed: true}
	p.once.Do(func() {}) // (the run went over)
	t.Cleanup(p.Abandon)
	return p, os.NewFile(uintptr(fds[1]), "theirs")
}

// TestWaiterHearsEachStateChange: a supervisor with a Waiter sends on it
// at each change of the run's state, so the submit's wait (Changes) wakes
// while the run goes on; when the supervisor's end closes, Changes is
// closed (the wait then polls alone), and only then.
func TestWaiterHearsEachStateChange(t *testing.T) {
	s, st := inProcess(t, "echo hi > hi.txt", nil)
	p, theirs := waiterPair(t)
	s.Waiter = theirs
	changes := p.Changes()
	if changes == nil || p.Changes() != changes {
		t.Fatal("a handed Pending has one Changes channel")
	}
	heard, closed := make(chan int, 1), make(chan struct{})
	go func() {
		n := 0
		for range changes {
			n++
			if n == 2 {
				heard <- n
			}
		}
		close(closed)
	}()
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.Get(context.Background(), s.ID); r.State != run.StateSucceeded {
		t.Fatalf("run ended %s: %s", r.State, r.Message)
	}
	select {
	case <-heard:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait woke fewer than 2 times over a run's 4 state changes")
	}
	select {
	case <-closed:
		t.Fatal("Changes was closed while the supervisor still had its end")
	case <-time.After(100 * time.Millisecond):
	}
	theirs.Close() // the supervisor exits
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Changes was not closed when the supervisor's end closed")
	}
}

// TestWaiterNeverBlocks: a supervisor whose submit no longer reads (its
// socket's buffer is full) or has gone (EPIPE) goes on at once; and a
// Pending never handed its run has no Changes.
func TestWaiterNeverBlocks(t *testing.T) {
	p, theirs := waiterPair(t)
	s := &Supervisor{Waiter: theirs}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1 << 20 { // more than any socket buffer holds
			s.tellWaiter()
		}
		p.Abandon() // the submit ends
		s.tellWaiter()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("tellWaiter blocked on a submit that does not read")
	}
	if (&Pending{}).Changes() != nil || (*Pending)(nil).Changes() != nil {
		t.Fatal("a Pending that was not handed its run has Changes")
	}
}
