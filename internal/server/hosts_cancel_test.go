package server

import (
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// TestCancelsWake: a cancel event of a run watched wakes its watcher;
// other events and other runs do not; stopping leaves nothing watched.
func TestCancelsWake(t *testing.T) {
	c := &Cancels{}
	woken, stop := c.watch([]string{"a", "b"})
	other, stopOther := c.watch([]string{"b"})
	c.Event("a", run.NewEvent(run.EventState, "running", nil))
	c.Event("z", run.NewEvent(run.EventCancel, "cancel requested", nil))
	select {
	case <-woken:
		t.Fatal("woken by an event that is no cancel of its runs")
	case <-time.After(20 * time.Millisecond):
	}
	c.Event("b", run.NewEvent(run.EventCancel, "cancel requested", nil))
	c.Event("b", run.NewEvent(run.EventCancel, "cancel requested", nil)) // a second does not block
	for _, ch := range []<-chan struct{}{woken, other} {
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatal("a cancel of a run watched did not wake its watcher")
		}
	}
	stop()
	stopOther()
	if n := c.watched(); n != 0 {
		t.Errorf("%d runs still watched", n)
	}
	var none *Cancels
	none.Event("a", run.NewEvent(run.EventCancel, "", nil)) // a server without hosts
}

// watched is how many runs a heartbeat waits on now.
func (c *Cancels) watched() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}
