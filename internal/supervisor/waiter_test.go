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
	fds, err := socketPair()
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
// while the run goes on, and once more when the supervisor's end closes;
// after that nothing more comes, and Abandon ends the reading.
func TestWaiterHearsEachStateChange(t *testing.T) {
	s, st := inProcess(t, "echo hi > hi.txt", nil)
	p, theirs := waiterPair(t)
	s.Waiter = theirs
	changes := p.Changes()
	if changes == nil || p.Changes() != changes {
		t.Fatal("a handed Pending has one Changes channel")
	}
	heard := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-changes:
				n++
			case <-time.After(2 * time.Second):
				heard <- n
				return
			}
		}
	}()
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.Get(context.Background(), s.ID); r.State != run.StateSucceeded {
		t.Fatalf("run ended %s: %s", r.State, r.Message)
	}
	theirs.Close() // the supervisor exits
	if n := <-heard; n < 2 {
		t.Fatalf("the wait woke %d times over a run's 4 state changes and its supervisor's exit", n)
	}
	select {
	case <-changes:
		t.Fatal("a change came after the supervisor was gone")
	case <-time.After(100 * time.Millisecond):
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
