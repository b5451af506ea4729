// Package coordtest is the conformance suite of the coordinator seam
// (coord.Coordinator). Every coordinator runs it in a few lines:
//
//	func TestConformance(t *testing.T) {
//		coordtest.Run(t, func(t *testing.T) coord.Coordinator { return newCoordinator(t) })
//	}
//
//	func BenchmarkCoordinator(b *testing.B) {
//		coordtest.Bench(b, func(b *testing.B) coord.Coordinator { return newCoordinator(b) })
//	}
//
// The suite tests the contract written on package coord through the
// interface alone, so a coordinator on flocks and one on a SQL database
// with expiring leases pass the same tests. Each subtest gets a fresh
// coordinator from newCoord, knowing no runs and no queue, and may run in
// parallel with the others. Run ids are made with run.NewID.
//
// Timing: the suite measures only lower bounds (Acquire waited at least its
// wait) and gives everything that must happen a generous upper bound, so it
// holds on a loaded machine. It never waits for a lease to expire: what
// happens when a holder dies cannot be shown within one process and belongs
// to each implementation's own tests.
package coordtest
