package server

// hosts_locks.go: the per-run locks of the hosts' registry. A lock lives
// in the map only while someone holds it or waits for it: a server that
// handles a million runs keeps no million mutexes.

import "sync"

// runLock is the lock of one run id, with how many hold or wait for it
// (counted under Hosts.mu, which also guards the map).
type runLock struct {
	sync.Mutex
	users int
}

// lockRun serialises what is done to run id for hosts: the fencing check
// and the write it guards, and the loss of the run's host, so that a
// write is never accepted after its host was declared lost. The function
// it returns unlocks, once.
func (h *Hosts) lockRun(id string) func() {
	h.mu.Lock()
	if h.locks == nil {
		h.locks = map[string]*runLock{}
	}
	l := h.locks[id]
	if l == nil {
		l = &runLock{}
		h.locks[id] = l
	}
	// Counted before waiting, so that the holder's unlock does not drop
	// the lock from the map while this caller waits for it.
	l.users++
	h.mu.Unlock()
	l.Lock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.Unlock()
			h.mu.Lock()
			if l.users--; l.users == 0 {
				delete(h.locks, id)
			}
			h.mu.Unlock()
		})
	}
}
