package coord

import (
	"context"
	"errors"
	"os"
	"time"
)

var (
	// ErrHeld means a live holder keeps the run's lease.
	ErrHeld = errors.New("a live supervisor holds the run")
	// ErrReleased means a lease was used after its Release.
	ErrReleased = errors.New("the lease was released")
)

// Lease is the right to supervise one run. Keep it reachable until Release:
// an implementation may give up a lease that its holder has dropped.
type Lease interface {
	RunID() string
	// Token is the fencing token: greater than every token handed out
	// before for the same run (a server refuses a write carrying an older
	// one). It does not change while the lease is held.
	Token() int64
	// Release gives the lease up; idempotent (a second call returns nil). A
	// holder that dies releases it too. Release the run's slot first:
	// whether a lease's Release frees a slot taken with it is up to the
	// implementation (the flock one does not).
	Release() error
}

// Slot is one of the concurrency slots, held until Release (or the
// holder's death).
type Slot interface {
	// Release gives the slot up; idempotent (a second call returns nil).
	Release() error
}

// Coordinator keeps the leases, the queue and the slots of one data
// directory or one server. Its methods are safe for concurrent use, also
// by several processes or hosts sharing what it keeps.
type Coordinator interface {
	// Acquire takes run id's lease, waiting up to wait for a holder to let
	// go (a short-lived prober such as Held); ErrHeld if a live holder keeps
	// it past wait. wait <= 0 makes one attempt. If ctx ends while it waits,
	// Acquire returns an error that errors.Is ctx.Err().
	Acquire(ctx context.Context, id string, wait time.Duration) (Lease, error)
	// Held reports whether a live holder has run id's lease. Nothing it
	// takes outlives the call. A run never seen is not held.
	Held(ctx context.Context, id string) (bool, error)
	// Enqueue records that the lease's run waits for a slot, in submission
	// order seq. Enqueuing the same run and seq again is harmless.
	Enqueue(ctx context.Context, l Lease, seq int64) error
	// Dequeue removes run id's entry; idempotent; unknown entries are fine.
	// It needs no lease: a run gives up its place however it ends.
	Dequeue(ctx context.Context, id string, seq int64) error
	// TrySlot makes one attempt, without waiting, for the lease's run
	// (queued at seq) to take one of max slots (max < 1 counts as 1). It
	// succeeds only if a slot is free and no entry older than seq whose
	// lease is held still waits (FIFO); the run's own entry does not count,
	// and entries whose lease nobody holds are swept. admit (may be nil) is
	// called once, under the coordinator's queue serialisation, before a
	// slot is looked for: its error (e.g. "the run is no longer queued") is
	// returned unchanged and nothing is taken. (nil, nil) means: not now,
	// try again later. TrySlot does not dequeue the run: the caller does,
	// once it has the slot (or gives up).
	TrySlot(ctx context.Context, l Lease, seq int64, max int, admit func(context.Context) error) (Slot, error)
}

// Handover is the optional capability of passing a held lease to a child
// process (Lite: the detached supervisor inherits the flock's open file as
// fd 3).
type Handover interface {
	// File is the open file a child process inherits to keep l. Once the
	// child has it, l.Release in this process closes only this process's
	// copy: the lease stays with the child until the child releases it or
	// exits. The file belongs to l; do not close it.
	File(l Lease) (*os.File, error)
	// Adopt turns an inherited file back into the lease of run id, with the
	// token the parent's lease had. It fails if f is not run id's lease.
	Adopt(id string, f *os.File) (Lease, error)
}
