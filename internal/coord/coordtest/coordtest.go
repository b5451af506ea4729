package coordtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
)

// Run exercises every method of coord.Coordinator on coordinators made by
// newCoord (one fresh coordinator per subtest).
func Run(t *testing.T, newCoord func(t *testing.T) coord.Coordinator) {
	tests := []struct {
		name string
		fn   func(t *testing.T, c coord.Coordinator)
	}{
		{"LeaseExclusive", testLeaseExclusive},
		{"ReleaseThenAcquire", testReleaseThenAcquire},
		{"ReleaseIdempotent", testReleaseIdempotent},
		{"TokenIncreases", testTokenIncreases},
		{"Held", testHeld},
		{"AcquireWaitsForRelease", testAcquireWaits},
		{"AcquireContext", testAcquireContext},
		{"FIFOUntilDequeue", testFIFOUntilDequeue},
		{"FIFOUntilRelease", testFIFOUntilRelease},
		{"YoungerDoesNotBlock", testYoungerDoesNotBlock},
		{"MaxSlots", testMaxSlots},
		{"MaxBelowOne", testMaxBelowOne},
		{"Admit", testAdmit},
		{"Dequeue", testDequeue},
		{"ReleasedLease", testReleasedLease},
		{"Stress", testStress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newCoord(t))
		})
	}
}

var ctx = context.Background()

// acquire takes id's lease, which nobody else holds, and releases it when
// the test ends.
func acquire(t testing.TB, c coord.Coordinator, id string) coord.Lease {
	t.Helper()
	l, err := c.Acquire(ctx, id, 5*time.Second)
	if err != nil {
		t.Fatalf("Acquire %s: %v", id, err)
	}
	if l.RunID() != id {
		t.Fatalf("Acquire %s: lease of %q", id, l.RunID())
	}
	t.Cleanup(func() { _ = l.Release() })
	return l
}

func release(t testing.TB, what string, r interface{ Release() error }) {
	t.Helper()
	if err := r.Release(); err != nil {
		t.Fatalf("Release %s: %v", what, err)
	}
}

func held(t testing.TB, c coord.Coordinator, id string) bool {
	t.Helper()
	h, err := c.Held(ctx, id)
	if err != nil {
		t.Fatalf("Held %s: %v", id, err)
	}
	return h
}

func testLeaseExclusive(t *testing.T, c coord.Coordinator) {
	id := run.NewID()
	acquire(t, c, id)
	const wait = 100 * time.Millisecond
	start := time.Now()
	l, err := c.Acquire(ctx, id, wait)
	if took := time.Since(start); !errors.Is(err, coord.ErrHeld) || took < wait {
		t.Fatalf("second Acquire: %v, %v after %v; want ErrHeld after at least %v", l, err, took, wait)
	}
	if l, err := c.Acquire(ctx, id, 0); !errors.Is(err, coord.ErrHeld) {
		t.Fatalf("second Acquire without a wait: %v, %v; want ErrHeld", l, err)
	}
	// Another run's lease is its own.
	acquire(t, c, run.NewID())
}

func testReleaseThenAcquire(t *testing.T, c coord.Coordinator) {
	id := run.NewID()
	release(t, "first lease", acquire(t, c, id))
	l, err := c.Acquire(ctx, id, 0)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	release(t, "second lease", l)
}

func testReleaseIdempotent(t *testing.T, c coord.Coordinator) {
	id := run.NewID()
	a := acquire(t, c, id)
	release(t, "lease", a)
	b := acquire(t, c, id)
	// A second Release of the old lease must not give up the new one.
	release(t, "lease again", a)
	if !held(t, c, id) {
		t.Fatal("a second Release of an old lease freed the run's new lease")
	}
	if _, err := c.Acquire(ctx, id, 0); !errors.Is(err, coord.ErrHeld) {
		t.Fatalf("Acquire while the new lease is held: %v; want ErrHeld", err)
	}
	release(t, "new lease", b)
	release(t, "new lease again", b)

	s, err := c.TrySlot(ctx, acquire(t, c, id), 1, 1, nil)
	if err != nil || s == nil {
		t.Fatalf("TrySlot: %v, %v", s, err)
	}
	release(t, "slot", s)
	release(t, "slot again", s)
}

func testTokenIncreases(t *testing.T, c coord.Coordinator) {
	id, other := run.NewID(), run.NewID()
	last := int64(-1 << 63)
	for i := range 5 {
		l := acquire(t, c, id)
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d after %d; want it greater", i+1, l.Token(), last)
		}
		last = l.Token()
		// Another run's leases and a refused Acquire change nothing here.
		release(t, "other lease", acquire(t, c, other))
		if _, err := c.Acquire(ctx, id, 0); !errors.Is(err, coord.ErrHeld) {
			t.Fatalf("Acquire while held: %v; want ErrHeld", err)
		}
		if l.Token() != last {
			t.Fatalf("Token changed from %d to %d while the lease is held", last, l.Token())
		}
		release(t, "lease", l)
	}
}

func testHeld(t *testing.T, c coord.Coordinator) {
	id := run.NewID()
	if held(t, c, id) {
		t.Fatal("Held: true for a run never seen")
	}
	l := acquire(t, c, id)
	if !held(t, c, id) {
		t.Fatal("Held: false while the lease is held")
	}
	release(t, "lease", l)
	if held(t, c, id) {
		t.Fatal("Held: true after Release")
	}
	// Held took nothing: the lease is free at once.
	if held(t, c, id) {
		t.Fatal("Held: true after Held")
	}
	release(t, "lease", acquire(t, c, id))
}

func testAcquireWaits(t *testing.T, c coord.Coordinator) {
	id := run.NewID()
	a := acquire(t, c, id)
	const after = 50 * time.Millisecond
	start := time.Now()
	go func() {
		time.Sleep(after)
		_ = a.Release()
	}()
	b, err := c.Acquire(ctx, id, 10*time.Second)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Acquire waiting for a holder that lets go after %v: %v (after %v)", after, err, took)
	}
	defer b.Release()
	if took < after {
		t.Fatalf("Acquire returned after %v, before the holder let go (%v)", took, after)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after %d; want it greater", b.Token(), a.Token())
	}
}

func testAcquireContext(t *testing.T, c coord.Coordinator) {
	id := run.NewID()
	acquire(t, c, id)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	l, err := c.Acquire(cctx, id, time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire when its context ends: %v, %v; want context.Canceled", l, err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("Acquire returned %v after its context ended", took)
	}
}
