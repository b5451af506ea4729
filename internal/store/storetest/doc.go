// Package storetest is the conformance suite of the run store seam
// (run.Store). Every store runs it in a few lines:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) run.Store { return openStore(t) })
//	}
//	func BenchmarkConformance(b *testing.B) {
//		storetest.Bench(b, func(b *testing.B) run.Store { return openStore(b) })
//	}
//
// The suite tests the contract written on run.Store and nothing about how a
// store keeps its data, so a files store and a SQL store pass the same
// tests. Each subtest gets a fresh, empty store from newStore and may run in
// parallel with the others.
//
// Beyond the interface comments, the suite fixes these points of the
// contract:
//   - Every field of a Run survives a round trip, except Attempt.Prompt
//     (json:"-", kept beside the record). Times the caller gives come back
//     equal (time.Equal); the suite's own are whole microseconds in UTC, so a
//     store may keep microseconds. Times a store sets (CreatedAt, UpdatedAt,
//     StartedAt, FinishedAt) are returned as stored, so that the value a
//     method returns equals what Get returns later. Event times given by the
//     caller may lose precision below a microsecond.
//   - Create sets Seq, Version (1) and zero CreatedAt/UpdatedAt on the Run
//     it was given. A run's first appended event has Seq 1.
//   - Methods taking a full id return ErrBadID for a malformed one and
//     ErrNotFound for a missing run (Events too).
//   - Transition sets StartedAt the first time a run leaves queued for an
//     active state (not when a queued run is cancelled), FinishedAt on every
//     terminal state, and clears FinishedAt when a run leaves a terminal state.
//   - Update keeps ID, Seq and CreatedAt whatever fn does to them.
//
// Bench measures the hot operations (Create, Get, Update, Transition,
// AppendEvent, List of 100 runs) the same way for every store.
//
// The suite never touches a store's storage directly; tests of damaged
// storage belong to each implementation.
package storetest
