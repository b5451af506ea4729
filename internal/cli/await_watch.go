package cli

import (
	"time"

	"github.com/fsnotify/fsnotify"
)

// runWatch wakes a wait on a run when the run's directory changes (its
// record renamed into place, its journal appended to), so that the wait
// sees a short run end as it ends instead of at its next poll, and does
// not read the record every few milliseconds meanwhile. It is a hint: the
// wait reads the run after each wake-up and still polls, more slowly (a
// supervisor that dies writes nothing; its lock is seen by the read).
type runWatch struct {
	w    *fsnotify.Watcher
	wake chan struct{}
}

// watchedPoll is the slowest the wait polls while a watch wakes it.
const watchedPoll = 50 * time.Millisecond

// watchAfter is how long a wait polls before it watches.
const watchAfter = time.Second

// watchRun watches dir; nil where it cannot (the wait then only polls).
func watchRun(dir string) *runWatch {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil
	}
	rw := &runWatch{w: w, wake: make(chan struct{}, 1)}
	go func() {
		for {
			select {
			case _, ok := <-w.Events:
				if !ok {
					return
				}
			case _, ok := <-w.Errors:
				// (an overflowed queue: something changed)
				if !ok {
					return
				}
			}
			select {
			case rw.wake <- struct{}{}:
			default:
			}
		}
	}()
	return rw
}

// C fires after a change; a nil watch's never does.
func (rw *runWatch) C() <-chan struct{} {
	if rw == nil {
		return nil
	}
	return rw.wake
}

// poll is the polling interval of a wait after d: awaitPoll's, or with a
// watch at least watchedPoll.
func (rw *runWatch) poll(d time.Duration) time.Duration {
	p := awaitPoll(d)
	if rw != nil {
		p = max(p, watchedPoll)
	}
	return p
}

func (rw *runWatch) Close() {
	if rw != nil {
		rw.w.Close()
	}
}
