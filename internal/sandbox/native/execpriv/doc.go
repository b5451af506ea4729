// Package execpriv takes from every thread of the native sandbox's init
// (pid 1 of a sandbox, the agentrun binary started as "__sandbox init")
// what only an exec could use: the capability bounding set (emptied),
// the ambient capabilities (cleared) and the right to gain privileges
// (no_new_privs). It does so in its package init, when that process has
// run almost nothing yet: the capabilities the init builds the root with
// (effective, permitted) stay, and it execs nothing before it is
// confined.
//
// Why so early: each of these is one system call per thread
// (syscall.AllThreadsSyscall stops the world and signals every other
// thread, then waits for each to make the call), 43 rounds in all, one
// per capability of the bounding set. Each round costs a wake-up of
// every other thread, so the fewer threads the runtime has made the
// cheaper: here, right after package os, it has made three (the main
// thread, sysmon and an idle one), against four or five once every
// package of the binary is initialized. The package imports only os,
// syscall and packages they need already (errors, strconv, unsafe), so
// that it is among the first initialized. Threads made later are cloned
// from these and inherit it all.
package execpriv
