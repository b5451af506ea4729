// Package worker executes a team server's queued runs on an agent host,
// with the same supervisor code as Lite mode.
//
// A worker claims a run through the coordinator: it takes the run's lease
// (coord.Coordinator.Acquire, which hands out a fencing token), checks
// that the run is still queued and unclaimed, queues it for a slot and
// runs its supervisor in process (supervisor.Supervisor with InProcess)
// while it holds the lease. Nothing else marks a run as taken: a run whose
// worker dies keeps no lease once its expiry passes, and the next
// reconcile (every worker does one every few seconds) marks it
// interrupted, resumable as in Lite.
//
// Local is the worker inside `agentrun server --local-worker N`, on the
// server's own store and coordinator. A remote agent host claims the same
// way, through the server's API.
//
// A worker must never run a run whose lease it does not hold, nor start a
// second supervisor for a run it is already running.
package worker
