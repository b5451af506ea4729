// Package seccomp is the sandboxes' seccomp filter, shared by the native
// backend (its init loads it before the sandboxed program starts) and the
// docker backend (its init loads it over the engine's own profile, which
// may allow what this one refuses: new user namespaces, the kernel's
// keyrings). What it refuses: what a coding agent never needs and what
// helps escape or attack the kernel; clone with namespace flags; setuid
// and setgid files; terminal input injection; every foreign
// architecture's calls (the process is killed). Linux on amd64 and arm64;
// elsewhere Available is false and a backend refuses to start.
package seccomp
