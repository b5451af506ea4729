// Package coord is the coordinator seam: who supervises a run (a lease with
// a fencing token), the queue of runs waiting to start (FIFO by submission
// order) and the concurrency slots they start in.
//
// The interface is written so that more than one kind of coordinator can
// keep it: flocks under the data directory (Lite, internal/coord/flock),
// where a lease lasts as long as the process holding an open file, and a
// SQL database shared by several hosts (Full), where a lease is a row with
// an expiry that its holder renews and a slot is taken with FOR UPDATE SKIP
// LOCKED. Every implementation passes internal/coord/coordtest.
//
// The contract, beyond each method's comment:
//   - A lease stays held while its holder lives, for as long as it likes;
//     an implementation whose leases expire renews them itself until
//     Release. When the holder dies (its process ends, its host is lost)
//     the lease and every slot it took are given up without anyone's help,
//     at once or once an expiry passes.
//   - Every Acquire that succeeds hands out a token greater than every
//     token handed out before for the same run, across processes and
//     restarts, so that a store or server can refuse a late write by a
//     holder that lost its lease.
//   - Probes (Held, the sweep inside TrySlot) take nothing that outlives the
//     call, but may hold a lease for an instant while they look: callers
//     that must not lose a race with a probe give Acquire a wait.
//   - The queue is ordered by the seq the caller gives (the run's
//     submission order), not by when Enqueue was called. A run may start
//     only if no run with a smaller seq that still has a live holder is
//     waiting; entries without a live holder are removed by whoever meets
//     them.
//   - A Lease or Slot belongs to the Coordinator that made it; handing one
//     to another Coordinator is an error. A released lease can neither
//     enqueue nor take a slot (ErrReleased).
//
// A coordinator never decides whether a run should start (its state, a
// cancel request): TrySlot's admit callback asks the caller, under the
// coordinator's serialisation of the queue, so that the answer cannot
// change between the question and the slot.
package coord
