package later

import (
	"sync/atomic"
	"testing"
	"time"
)

// Work delayed runs after its delay, or at once when the process waits
// for it; Wait returns once all of it has run.
func TestWork(t *testing.T) {
	var w Work
	var n atomic.Int32
	ran := make(chan struct{})
	w.After(10*time.Millisecond, func() { n.Add(1); close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("delayed work did not run after its delay")
	}
	t0 := time.Now()
	w.After(time.Hour, func() { n.Add(1) })
	w.Go(func() { time.Sleep(10 * time.Millisecond); n.Add(1) })
	w.Wait()
	if n.Load() != 3 {
		t.Fatalf("%d ran by Wait", n.Load())
	}
	if time.Since(t0) > time.Minute {
		t.Fatal("Wait waited for the delay")
	}
	// Work started after a Wait waits for its own delay again.
	done := make(chan struct{})
	w.After(time.Hour, func() { close(done) })
	select {
	case <-done:
		t.Fatal("work after a Wait ran without its delay")
	case <-time.After(20 * time.Millisecond):
	}
	w.Wait()
	<-done
}
