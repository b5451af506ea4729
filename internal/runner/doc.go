// Package runner is the program inside every sandbox and its client.
//
// The agentrun binary serves it (hidden subcommand `agentrun __runner`,
// Main) inside isolating sandboxes (native); the host backend serves it
// in-process (Serve). The supervisor and the built-in agent reach it only
// through Client (Dial).
//
// Protocol: one unix-socket stream of frames, each a 4-byte big-endian
// length and a JSON message (at most MaxFrameSize; a bad frame closes the
// connection, never panics). The server speaks first with its hello
// (protocol version, instance id random per process start). Requests carry
// an id, an op and its arguments; the server answers with stream chunks
// (stdout/stderr with byte offsets) and one final message: a result, an
// OpError the caller can act on, or a runner failure.
//
// Contract:
//   - A request id runs once. A resent id that is running attaches to the
//     running execution and gets its output from the offset the client
//     already has; a finished id returns the stored result (bounded LRU).
//   - Ids of mutating ops (exec, write_file, edit_file) are journaled in the
//     state dir before they run: after a runner restart a resent id is
//     answered CodeInterrupted, never run again. The client also compares
//     instance ids when it reconnects and fails what it had sent with
//     CodeInterrupted instead of resending it to a new instance.
//   - A cut stream is redialled with backoff (bounded by
//     DialOptions.ReconnectTimeout) and the requests in flight resume.
//   - exec runs each command in its own process group; on return, timeout
//     or cancellation the whole group, background children included, is
//     killed (SIGTERM, grace, SIGKILL) and the call never waits on pipes a
//     leftover child holds. On Linux the direct child also gets Pdeathsig.
//   - A server that is pid 1 of its pid namespace (ServerOptions.ReapOrphans,
//     the native sandbox) reaps every orphan re-parented to it, but never a
//     command os/exec waits for: a command's exit status is never lost.
//   - File ops resolve paths under Root through os.Root: component by
//     component, never following a symlink out of Root; ".." and absolute
//     paths outside Root are refused (CodeEscape). Writes are atomic (temp
//     file and rename) and never go through a symlink at the final
//     component.
//
// It must never: run a request id twice, follow a path out of Root in a file
// op, leave a process group running after its exec returned, trust a frame
// from the other side (sizes are capped on both ends), or pass its own
// environment to commands (the base environment is exactly
// ServerOptions.Env).
//
// Dying outright: Pdeathsig reaches only a command's direct child, so the
// server starts a watchdog (the runner's own executable again, in its own
// group, needing no shell or other program in the sandbox; fed the live
// process groups on a pipe) that kills every group still listed when the
// pipe ends because the runner died. A watchdog that cannot start fails
// the exec (CodeExec): no command runs uncovered. There is one per
// process, shared by its servers (an agent host runs one per run), from
// the first command until the process exits.
package runner
