package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Capacity bounds the requests in flight to one model server across every
// run that shares it. Acquire blocks until one of max slots of key is free
// (or ctx ends) and returns its release.
type Capacity interface {
	Acquire(ctx context.Context, key string, max int) (release func(), err error)
}

// FlockCapacity is the Lite implementation: slot k of a server is the
// flock of <Dir>/<hash of key>/<k>.lock, so every supervisor on the machine
// shares the slots, and a slot whose holder dies (even by kill -9) is free
// again at once. Waiters poll with a short, jittered backoff; each waiter
// takes a ticket so that the longest waiter is served first.
type FlockCapacity struct {
	Dir string
}

// Acquire implements Capacity.
func (c FlockCapacity) Acquire(ctx context.Context, key string, max int) (func(), error) {
	if max <= 0 {
		return func() {}, nil
	}
	sum := sha256.Sum256([]byte(key))
	dir := filepath.Join(c.Dir, hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("model server slots: %w", err)
	}
	// The queue: every waiter has a waiter file while it waits; one that
	// has waited longest (the oldest file it sees) takes a free slot
	// first. Tickets are the waiter files' modification times.
	// The waiter file is locked while its waiter lives, so a dead
	// waiter's file (kill -9) is recognised and ignored: it is locked
	// before it is named wait-*, and removed before it is unlocked, so
	// that a wait-* file another waiter can lock is always a dead one's.
	ticket, err := os.CreateTemp(dir, "new-*")
	if err != nil {
		return nil, fmt.Errorf("model server slots: %w", err)
	}
	name := ticket.Name()
	defer func() { os.Remove(name); ticket.Close() }()
	if err := unix.Flock(int(ticket.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, fmt.Errorf("model server slots: %w", err)
	}
	wait := filepath.Join(dir, "wait-"+strings.TrimPrefix(filepath.Base(name), "new-"))
	if err := os.Rename(name, wait); err != nil {
		return nil, fmt.Errorf("model server slots: %w", err)
	}
	name = wait
	mine, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("model server slots: %w", err)
	}
	delay := 2 * time.Millisecond
	for {
		if first(dir, mine) {
			for k := range max {
				f, ok, err := tryFlock(filepath.Join(dir, strconv.Itoa(k)+".lock"), os.O_CREATE)
				if err != nil {
					return nil, fmt.Errorf("model server slots: %w", err)
				}
				if ok {
					return func() { f.Close() }, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(delay + rand.N(delay)):
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}

// first reports whether no live waiter in dir is older than mine.
func first(dir string, mine os.FileInfo) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, e := range ents {
		if len(e.Name()) < 5 || e.Name()[:5] != "wait-" || e.Name() == mine.Name() {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(mine.ModTime()) {
			continue
		}
		// Older: is its waiter alive (its lock held)? Opened without
		// O_CREATE: a waiter file gone since ReadDir must stay gone, for
		// one made again here would be unlocked until this flock (another
		// could take it for a dead waiter's, or lock it first and leave it
		// behind).
		p := filepath.Join(dir, e.Name())
		f, ok, err := tryFlock(p, 0)
		if err != nil {
			continue
		}
		if ok { // nobody holds it: a dead waiter's leftover
			os.Remove(p)
			f.Close()
			continue
		}
		return false
	}
	return true
}

// tryFlock opens path (with create, os.O_CREATE or 0) and takes its
// exclusive flock without waiting.
func tryFlock(path string, create int) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|create|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}
