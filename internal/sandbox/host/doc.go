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
//
// On Linux this holds for descendants that leave their command's group
// too (setsid, double fork): every command inherits a marker pipe as fd 3
// and the runner's process (the supervisor when in-process) is a child
// subreaper while a command runs; when a command ends, whatever still holds the marker,
// and its descendants, is killed by pid and reaped if re-parented to the
// runner. Processes the sandbox did not start (git, other children of the
// supervisor) are never signalled nor reaped (an orphan of theirs that is
// re-parented to the supervisor while a command runs stays a zombie until
// the supervisor exits). If the supervisor (or a runner subprocess) is
// killed outright, the runner's watchdog, a process of its own that
// outlives it, kills the command groups and whatever holds their markers
// (setsid, double fork included), checking start times so that a later
// pipe reusing an inode number is never taken for a marker. A descendant
// that both closes its inherited descriptors and leaves the group escapes. On macOS
// only the commands' process groups are killed: a process that leaves its
// group may outlive the run.
package host
