// Package supervisor executes one run through the seams (workspace,
// sandbox, egress, agent attempts, checks, export), holds the concurrency
// slots, handles cancel, and recovers runs whose supervisor died.
//
// One detached supervisor process works on one run (Lite mode). The CLI
// starts it with Spawn: Spawn takes the run's supervisor.lock (an exclusive
// flock) BEFORE starting the child and hands the locked file to it, so
// there is no moment where a queued run looks dead. The supervisor holds
// that lock for its whole life; a run that is active while nobody holds its
// lock has lost its supervisor (kill -9, reboot) and Reconcile marks it
// interrupted. flock dies with its holder, so this survives reboots and pid
// reuse.
//
// The run's state machine as this package drives it (each arrow is a
// store Transition, journaled before it takes effect):
//
//	          cancel (CLI CAS)
//	queued ───────────────────────────────────────────────> cancelled
//	  │ slot free, FIFO by Seq
//	  v
//	preparing ── workspace, egress proxy, sandbox ──┐
//	  │                                             │ error: failed/sandbox_error
//	  v                                             v
//	running (attempt n: agent) ──> checking (each check) ──> exporting ──> succeeded
//	  ^                                 │ a check failed          │ nothing changed: failed/no_changes
//	  └──── attempts left: n+1 ─────────┘                         │ error: failed/export_failed
//	                                    │ no attempts left: failed/checks_failed
//	any active state ── cancel ──> cancelled
//	                 ── whole-run timeout ──> failed/timeout
//	                 ── SIGTERM without cancel, or supervisor death ──> interrupted
//	                 ── panic ──> failed/internal_error
//
// A run without checks goes from running straight to exporting.
//
// interrupted and failed runs are resumed by `agentrun resume`: queued
// again, a new supervisor, the same workspace, new attempts.
//
// The supervisor never branches on which store, sandbox backend or agent
// it has: they are chosen in one place (deps.go) from the run record.
//
// It must never: run git (or anything) in the workspace on the host after
// the agent has had it; write an environment variable's value to any file;
// leave a run "running" when it stops working on it.
package supervisor
