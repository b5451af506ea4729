// Package host is the sandbox backend that does not isolate: commands run
// on the host as the supervisor's user, in the workspace, with a minimal
// environment (exactly Spec.Env plus HOME and TMPDIR), in their own process
// groups that die with the runner.
//
// It serves the same runner protocol as every other backend (in-process by
// default, or as an `agentrun __runner` subprocess), so the supervisor and
// the built-in agent see one contract. It is used only when asked for by
// name; Enforced says plainly that nothing is isolated.
//
// It must never claim isolation it does not provide, never pass the
// supervisor's own environment (API tokens) to commands, and never leave a
// process running after Stop.
package host
