// Package supervisor executes one run through the seams (workspace,
// sandbox, egress, gateway, agent attempts, checks, export), starts and
// resumes runs, handles cancel, and recovers runs whose supervisor died.
//
// One detached supervisor process works on one run (Lite mode). The CLI
// starts it with Start or Resume: they take the run's lease from the
// coordinator (internal/coord) BEFORE starting the child and hand it over
// (coord.Handover: with the flock coordinator, the locked supervisor.lock
// as fd 3), so there is no moment where a queued run looks dead. The
// supervisor holds the lease for its whole life; a run that is active
// while nobody holds its lease has lost its supervisor (kill -9, reboot)
// and Reconcile marks it interrupted. The queue (FIFO by Seq) and the
// concurrency slots are the coordinator's too.
//
// The run's state machine as this package drives it (each arrow is a
// store Transition, journaled before it takes effect):
//
//	          cancel (CLI CAS)
//	queued ───────────────────────────────────────────────> cancelled
//	  │ slot free, FIFO by Seq
//	  v
//	preparing ── workspace, egress proxy, gateway, sandbox ──┐
//	  │                                                      │ error: failed/sandbox_error
//	  v                                                      v
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
// Each step of the run is a unit of its own, in its own file, given only
// what it needs (the run record, the layout, the seam it drives, a
// function that journals an event). The resource steps hold something
// while the run lives; they have Start and Stop, and the supervisor stops
// the ones that started in reverse order, once: before the run's end state
// is stored, or before the export reads the workspace. The action steps
// have Run, with an explicit result; the supervisor (execute.go) moves the
// run's state around them and records their results with the next state
// change. In the order the supervisor drives them:
//
//	preparing   step_workspace.go  the workspace: made from the base commit (filled while
//	                               the sandbox starts; the included files and full history
//	                               added before anything runs in it), or opened again on resume
//	            step_egress.go     the allowlist proxy (network allowlist only)
//	            step_gateway.go    the model gateway (runs with gateway routes only)
//	            step_sandbox.go    the sandbox on the workspace directory, with the proxy's
//	                               and the gateway's sockets; ready once the workspace is
//	                               complete
//	running     step_attempt.go    agent attempt n
//	checking    step_checks.go     the verify checks after attempt n
//	            (resources stopped: sandbox, gateway, proxy, workspace)
//	exporting   step_export.go     scan (the included files taken out), commit on agentrun/<id>,
//	                               patch; the branch moves only if the move to succeeded holds
//
// interrupted and failed runs are resumed by `agentrun resume`: queued
// again, a new supervisor, the same workspace, new attempts.
//
// The supervisor never branches on which store, coordinator, sandbox
// backend or agent it has: the wiring (internal/wire) fills its Deps, and
// it looks up the run's backend by the name the run records.
//
// It must never: run git (or anything) in the workspace on the host after
// the agent has had it; write an environment variable's value to any file;
// leave a run "running" when it stops working on it.
package supervisor
