// Package native is the Linux sandbox backend: a run is isolated with
// nothing to install and no daemon.
//
// Start launches the agentrun binary itself as the hidden "__sandbox"
// entry point in new user (when not root), mount, pid, net, ipc and uts
// namespaces. That process becomes pid 1 of the sandbox (the init): it
// builds a new root on a tmpfs from read-only binds of what toolchains need
// (/usr, /bin, /lib*, /sbin, a curated /etc, extra read-only paths), binds
// the workspace read-write at /workspace, mounts private tmpfs /tmp (and
// HOME when the spec has none), a fresh /proc and a minimal /dev, and
// pivots into it. It then confines the thread that forks the sandboxed
// program: rlimits, every capability dropped, no_new_privs, Landlock when
// the kernel has it, and a seccomp filter denying what a coding agent never
// needs. The sandboxed program is the runner (runner.Serve) or, for
// one-shot use (Backend.Command), a plain command. The init reaps every
// orphan and never waits for the runner's own children, so the runner's
// exec.Cmd waits are never stolen; a runner that dies on its own is
// started again on the same socket once everything it left running is
// killed (its journal, on a private tmpfs, turns resent requests into
// CodeInterrupted). The runner needs no watchdog process of its own: when
// it ends, so does everything it started.
//
// The runner's socket is made by the host: a listening unix socket in
// Spec.StateDir (mode 0600), whose descriptor is passed down to the
// runner. The host dials the path as soon as the init says it is ready;
// nothing inside the sandbox can create or replace that socket, and no
// host directory is bind-mounted writable besides the workspace and HOME.
//
// Egress: the sandbox has its own network namespace with only loopback.
// With NetworkAllowlist the egress proxy's host socket is bind-mounted at
// /.agentrun/proxy.sock, the runner's bridge listens on 127.0.0.1:3128
// and HTTP(S)_PROXY point there. With Landlock ABI >= 4, TCP connect is
// allowed to that port only (so with NetworkNone, to no port at all).
//
// Memory, pids and cpu limits are cgroups set up from the host while the
// init builds the root; the init starts nothing before the host confirms
// it is in them (v1 as root, v2 when a delegated subtree is writable),
// and Destroy removes them. Enforced reports per feature "enforced" or
// "unavailable: why"; nothing is claimed that is not in force. Keys:
// namespaces, userns, seccomp, landlock, landlock_net, no_new_privs, caps,
// rlimit_core, rlimit_fsize, rlimit_nofile, rlimit_nproc, memory, pids,
// cpu.
//
// Stop is SIGTERM to the init, which passes it to the runner (it ends its
// commands' groups with each call's kill grace); the pid namespace is
// killed when the runner is done, after 3 s, or when the caller's context
// ends, whichever comes first. Calls still in flight then fail at once
// with runner.ErrClosed.
//
// Contract: the sandbox dies with its supervisor (the init has
// Pdeathsig SIGKILL; when pid 1 dies the kernel kills the whole pid
// namespace), and nothing stays mounted on the host: every mount lives in
// the sandbox's own mount namespace.
//
// It must never: fall back to less isolation when the kernel refuses a
// namespace or seccomp (Preflight and Start fail with a catalog error),
// let anything of the supervisor's environment into the sandbox, or give
// the sandbox a network other than its own loopback.
package native
