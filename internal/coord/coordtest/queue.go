package coordtest

import (
	"context"
	"errors"
	"testing"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
)

// waiter is a run that holds its lease and waits in the queue at seq.
type waiter struct {
	id    string
	seq   int64
	lease coord.Lease
}

func enqueued(t testing.TB, c coord.Coordinator, seq int64) *waiter {
	t.Helper()
	w := &waiter{id: run.NewID(), seq: seq}
	w.lease = acquire(t, c, w.id)
	if err := c.Enqueue(ctx, w.lease, seq); err != nil {
		t.Fatalf("Enqueue %s at %d: %v", w.id, seq, err)
	}
	return w
}

func dequeue(t testing.TB, c coord.Coordinator, w *waiter) {
	t.Helper()
	if err := c.Dequeue(ctx, w.id, w.seq); err != nil {
		t.Fatalf("Dequeue %s: %v", w.id, err)
	}
}

// slot asks for one of max slots for w and wants one; it is released when
// the test ends.
func slot(t testing.TB, c coord.Coordinator, w *waiter, max int, why string) coord.Slot {
	t.Helper()
	s, err := c.TrySlot(ctx, w.lease, w.seq, max, nil)
	if err != nil || s == nil {
		t.Fatalf("TrySlot for seq %d of %d slots (%s): %v, %v; want a slot", w.seq, max, why, s, err)
	}
	t.Cleanup(func() { _ = s.Release() })
	return s
}

// noSlot asks for one of max slots for w and wants none.
func noSlot(t testing.TB, c coord.Coordinator, w *waiter, max int, why string) {
	t.Helper()
	s, err := c.TrySlot(ctx, w.lease, w.seq, max, nil)
	if err != nil || s != nil {
		if s != nil {
			_ = s.Release()
		}
		t.Fatalf("TrySlot for seq %d of %d slots (%s): %v, %v; want (nil, nil)", w.seq, max, why, s, err)
	}
}

func testFIFOUntilDequeue(t *testing.T, c coord.Coordinator) {
	older, younger := enqueued(t, c, 1), enqueued(t, c, 2)
	noSlot(t, c, younger, 2, "an older run waits")
	slot(t, c, older, 2, "oldest in the queue")
	noSlot(t, c, younger, 2, "the older run has a slot but is still queued")
	dequeue(t, c, older)
	slot(t, c, younger, 2, "the older run left the queue")
}

func testFIFOUntilRelease(t *testing.T, c coord.Coordinator) {
	older, younger := enqueued(t, c, 1), enqueued(t, c, 2)
	noSlot(t, c, younger, 1, "an older run waits")
	release(t, "older lease", older.lease)
	s := slot(t, c, younger, 1, "the older run's lease was released")
	release(t, "slot", s)
	// The older run's entry was swept: a new holder of its lease, which
	// has not queued again, does not bring it back.
	older.lease = acquire(t, c, older.id)
	slot(t, c, younger, 1, "the older entry was swept")
}

func testYoungerDoesNotBlock(t *testing.T, c coord.Coordinator) {
	younger := enqueued(t, c, 7)
	older := enqueued(t, c, 3)
	slot(t, c, older, 1, "only a younger run waits")
	// Nor does a run's own entry, nor a run that never queued.
	self := enqueued(t, c, 9)
	unqueued := &waiter{id: run.NewID(), seq: 1}
	unqueued.lease = acquire(t, c, unqueued.id)
	dequeue(t, c, older)
	dequeue(t, c, younger)
	slot(t, c, self, 3, "its own entry")
	slot(t, c, unqueued, 3, "never queued, oldest")
}

func testMaxSlots(t *testing.T, c coord.Coordinator) {
	a, b, x := enqueued(t, c, 1), enqueued(t, c, 2), enqueued(t, c, 3)
	sa := slot(t, c, a, 2, "first of 2")
	dequeue(t, c, a)
	slot(t, c, b, 2, "second of 2")
	dequeue(t, c, b)
	noSlot(t, c, x, 2, "both slots taken")
	release(t, "first slot", sa)
	slot(t, c, x, 2, "a slot was released")
	noSlot(t, c, a, 2, "both slots taken again")
	slot(t, c, a, 3, "a third slot")
}

func testMaxBelowOne(t *testing.T, c coord.Coordinator) {
	for _, max := range []int{0, -3} {
		a, b := enqueued(t, c, 1), enqueued(t, c, 2)
		s := slot(t, c, a, max, "max < 1 counts as 1")
		dequeue(t, c, a)
		noSlot(t, c, b, max, "the one slot is taken")
		release(t, "slot", s)
		dequeue(t, c, b)
		release(t, "lease", a.lease)
		release(t, "lease", b.lease)
	}
}

func testAdmit(t *testing.T, c coord.Coordinator) {
	a, b := enqueued(t, c, 1), enqueued(t, c, 2)
	refused := errors.New("the run is no longer queued")
	calls := 0
	refuse := func(context.Context) error { calls++; return refused }
	s, err := c.TrySlot(ctx, a.lease, a.seq, 1, refuse)
	if err != refused || s != nil || calls != 1 {
		t.Fatalf("TrySlot with admit refusing: %v, %v after %d calls; want (nil, %v) after 1", s, err, calls, refused)
	}
	dequeue(t, c, a)
	// Nothing was taken: the one slot is free for b.
	sb := slot(t, c, b, 1, "admit refused a, nothing taken")
	// admit is asked before a slot is looked for: also when none is free.
	calls = 0
	if s, err := c.TrySlot(ctx, a.lease, a.seq, 1, refuse); err != refused || s != nil || calls != 1 {
		t.Fatalf("TrySlot with admit refusing, no slot free: %v, %v after %d calls; want (nil, %v) after 1", s, err, calls, refused)
	}
	release(t, "slot", sb)
	calls = 0
	admit := func(context.Context) error { calls++; return nil }
	s, err = c.TrySlot(ctx, a.lease, a.seq, 1, admit)
	if err != nil || s == nil || calls != 1 {
		t.Fatalf("TrySlot with admit agreeing: %v, %v after %d calls; want a slot after 1", s, err, calls)
	}
	release(t, "slot", s)
}

func testDequeue(t *testing.T, c coord.Coordinator) {
	if err := c.Dequeue(ctx, run.NewID(), 5); err != nil {
		t.Fatalf("Dequeue of an unknown entry: %v", err)
	}
	older, younger := enqueued(t, c, 1), enqueued(t, c, 2)
	if err := c.Dequeue(ctx, older.id, 99); err != nil {
		t.Fatalf("Dequeue at a seq the run is not queued at: %v", err)
	}
	noSlot(t, c, younger, 1, "an older run waits (a Dequeue at another seq changes nothing)")
	dequeue(t, c, older)
	dequeue(t, c, older)
	// The entry is gone although its lease is still held.
	slot(t, c, younger, 1, "the older run dequeued")
	// Enqueuing again is harmless, and one Dequeue removes it.
	if err := c.Enqueue(ctx, younger.lease, younger.seq); err != nil {
		t.Fatalf("Enqueue again: %v", err)
	}
	dequeue(t, c, younger)
}

func testReleasedLease(t *testing.T, c coord.Coordinator) {
	w := enqueued(t, c, 1)
	dequeue(t, c, w)
	release(t, "lease", w.lease)
	if err := c.Enqueue(ctx, w.lease, w.seq); !errors.Is(err, coord.ErrReleased) {
		t.Fatalf("Enqueue with a released lease: %v; want ErrReleased", err)
	}
	if s, err := c.TrySlot(ctx, w.lease, w.seq, 1, nil); !errors.Is(err, coord.ErrReleased) || s != nil {
		t.Fatalf("TrySlot with a released lease: %v, %v; want ErrReleased", s, err)
	}
	// The refused calls queued nothing and took nothing.
	other := enqueued(t, c, 2)
	slot(t, c, other, 1, "the released lease took no slot")
}
