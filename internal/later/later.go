// Package later runs what a process does in the background for a later
// caller (a spare copy made ahead for the next run): now, or after a
// delay that the process ends when it is about to exit and waits for it,
// so that nothing is left half done behind it.
package later

import (
	"sync"
	"time"
)

// Work is a process's background work; the zero value is ready.
type Work struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	hurry chan struct{} // closed by Wait: those waiting then start at once
}

// Go runs f in the background now.
func (w *Work) Go(f func()) { w.wg.Go(f) }

// After runs f in the background once d has passed, or at once when Wait
// is called first.
func (w *Work) After(d time.Duration, f func()) {
	w.mu.Lock()
	if w.hurry == nil {
		w.hurry = make(chan struct{})
	}
	hurry := w.hurry
	w.mu.Unlock()
	w.wg.Go(func() {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-hurry:
			t.Stop()
		}
		f()
	})
}

// Wait starts what is waiting for its delay at once, and waits for all
// the work started before it returns.
func (w *Work) Wait() {
	w.mu.Lock()
	if w.hurry != nil {
		close(w.hurry)
		w.hurry = nil
	}
	w.mu.Unlock()
	w.wg.Wait()
}
