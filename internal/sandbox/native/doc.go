// Package native is the Linux sandbox backend: a run is isolated with
// nothing to install and no daemon.
//
// Start launches the agentrun binary itself as the hidden "__sandbox"
// entry point in new user (when not root), mount, pid, net, ipc and uts
// namespaces. That process becomes pid 1 of the sandbox (the init): it
// builds a new root on a tmpfs from read-only binds of what toolchains need
// (/usr, /bin, /lib*, /sbin, a curated /etc, extra read-only paths), binds
// the workspace read-write at /workspace (or, when the spec has Layers,
// mounts them there as an overlay, in the sandbox's own mount namespace:
// see ProbeLayers and package workspace/overlay; unprivileged, the init
// then also holds CAP_DAC_OVERRIDE over the user's own files until it
// confines itself, as the kernel's work directory needs), mounts private
// tmpfs /tmp (and
// HOME when the spec has none), a fresh /proc and a minimal /dev, and
// pivots into it. It then confines itself, every thread of it (all share
// one address space): rlimits, every capability dropped (bounding set,
// ambient, effective and permitted), no_new_privs, Landlock and a seccomp
// filter denying what a coding agent never needs, on all threads
// (syscall.AllThreadsSyscall, seccomp TSYNC; the binary must be built
// with CGO_ENABLED=0). Landlock gives each thread its own domain from the
// same rules; the main thread, which forks every sandboxed process, also
// gets a layer that scopes signals and abstract sockets (ABI 6+), so the
// sandboxed processes share one domain. Pid 1 is not dumpable
// (PR_SET_DUMPABLE 0), so no process inside can open its memory,
// descriptors or environment through /proc.
//
// What only an exec could use (the bounding set, the ambient
// capabilities, the right to gain privileges) goes first, before the
// root is built, in package execpriv's init, when the runtime has made
// the fewest threads; as root the host's thread that forks the init has
// emptied its own bounding set already, so the init starts with none.
// The init itself runs from this package's init, so pid 1 never
// initializes the packages that come after it in the binary's order
// (about a quarter of those with an init: net/http and all that needs
// it, the servers, the CLI). Those before it still are (about three
// quarters, 40-45 ms between execpriv's init and this one where a
// process start costs 60 ms): the linker runs, of the packages whose
// imports are done, the first by import path, and this package is ready
// only once net is, which waits for vendor/golang.org/x/net/dns/
// dnsmessage, last by path; until then every package that is ready
// goes first.
//
// Without Landlock (an older kernel, or landlock not in lsm=) Preflight
// and Start refuse with a sandbox_preflight catalog error, unless the
// user opts in by name (Options.AllowNoLandlock or
// AGENTRUN_NATIVE_NO_LANDLOCK=1); Enforced then says "landlock:
// unavailable". The confinement above holds either way (no task inside
// has a capability, none of pid 1's memory is writable); what Landlock
// adds is file access bounded by rules rather than by the mounts alone,
// and TCP connect limited to the bridges.
//
// Started ahead (Prewarm, sandbox.Prewarmer): most of a start (the
// process in its new namespaces, the Go runtime and the package inits,
// the exec-only privileges dropped) needs nothing of the Spec, so a
// supervisor starts an init before it knows the run's sandbox, and the
// process's next Start hands it its listener and log (as descriptors on
// its config socket, which it takes as fd 5, stdout and stderr) and then
// its config, as to an init started at once. Unprivileged, such an init
// keeps CAP_DAC_OVERRIDE (over the user's own files) until it confines
// itself, overlay or not. One that dies meanwhile is not used; one no
// Start takes ends with the context Prewarm got, or with the process.
//
// One process: pid 1 then serves the runner's protocol itself
// (runner.Serve) on the host-made socket, or, for one-shot use
// (Backend.Command), runs a plain command and exits with its code. As the
// runner it reaps every orphan of the pid namespace but never a command
// it started and waits for (runner's ReapOrphans), and it handles the
// signals the Go runtime would die of (a process inside may send them;
// SIGTERM, SIGINT and SIGHUP end the sandbox as a Stop does). There is
// no second process to restart a runner that died: if pid 1 ends (a
// Stop, a crash, a kill from the host), the kernel ends the pid namespace
// and so everything in it, and the host's calls in flight fail at once
// with runner.ErrClosed. Nothing inside can kill pid 1: the kernel does
// not deliver SIGKILL or SIGSTOP to it from its own namespace. The runner
// keeps no request journal here (it would only matter to a next runner
// instance, and there is none), and needs no watchdog process: when it
// ends, so does everything it started.
//
// The runner's socket is made by the host: a listening unix socket in
// Spec.StateDir (mode 0600), whose descriptor is passed down to the
// runner. The host dials the path as soon as the init says it is ready;
// nothing inside the sandbox can create or replace that socket, and no
// host directory is bind-mounted writable besides the workspace and HOME.
// The proxy and gateway sockets are held by pid 1 as descriptors, not
// bind-mounted, so the mount table inside names no host path of theirs. Where the kernel
// mounts overlays in the sandbox (the workspace is then an overlay of its
// layers), HOME is an overlay too (its directory as the upper layer over
// an empty lower one), and the layers are named to the kernel as
// /proc/self/fd/N: no mountinfo field names a host path. Known limit:
// with a copy workspace (no overlay), the workspace's and HOME's binds
// show, as mountinfo's root field, their source path within its
// filesystem.
//
// Egress: the sandbox has its own network namespace with only loopback.
// With NetworkAllowlist the runner's bridge relays to the egress proxy's
// host socket, held as a descriptor (never mounted), listens on 127.0.0.1:3128
// and HTTP(S)_PROXY point there. With Landlock ABI >= 4, TCP connect is
// allowed to that port only (so with NetworkNone, to no port at all).
//
// Memory, pids and cpu limits are cgroups set up from the host while the
// init builds the root; the init starts nothing before the host confirms
// it is in them (v1 as root, v2 when a delegated subtree is writable),
// and Destroy removes them. The cgroups are named
// agentrun-<run>-<pid of the maker>-<random>; each start first removes the
// empty ones whose maker is dead (a supervisor killed with SIGKILL). With
// no writable memory cgroup (unprivileged, no delegated v2 subtree),
// memory is bounded per process with RLIMIT_DATA instead, and Enforced
// says so.
//
// Disk: the bound (Limits.DiskBytes, DiskInodes; default 16 GiB and
// 1,000,000) covers the workspace, HOME, /tmp and /dev/shm together.
// /tmp and /dev/shm (and a private HOME) are tmpfs with size= and
// nr_inodes= (ENOSPC past them; size no larger than the memory bound);
// no file may be larger than the bound (RLIMIT_FSIZE); the host
// directories (workspace, HOME) and the tmpfs use are sampled from the
// host every second or more (the walk stops at the bound, and a walk that
// takes long spaces the samples) and the sandbox is killed past the
// bound: LimitExceeded then wraps sandbox.ErrDiskExceeded.
//
// Enforced reports per feature "enforced", "enforced: how", "sampled ..."
// or "unavailable: why"; nothing is claimed that is not in force. Keys:
// namespaces, userns, seccomp, landlock, landlock_net, no_new_privs, caps,
// rlimit_core, rlimit_fsize, rlimit_nofile, rlimit_nproc, memory, pids,
// cpu, disk_tmpfs, disk.
//
// Stop is SIGTERM to pid 1, the runner (it ends its commands' groups
// with each call's kill grace, then kills and reaps whatever else is left
// in its pid namespace, and says so on its status pipe); Stop returns
// when pid 1 has said so, and kills the pid namespace if that takes
// more than 3 s or the caller's context ends. Calls still in flight then
// fail at once with runner.ErrClosed. A stopped pid 1 waits for Destroy
// to kill it: its exit tears the namespaces down, and unmounting the
// overlays then syncs the file system under them, which the caller's
// reads of the workspace between Stop and Destroy need not wait for.
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
