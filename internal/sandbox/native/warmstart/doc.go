// Package warmstart starts the native sandbox's init from a package
// initializer of a supervisor started ahead, before the rest of the
// binary's packages are initialized, and holds the thread every init is
// forked from.
//
// A submit's run goes through three starts of the agentrun binary, each
// mostly the package initializers of its libraries (about 25 ms of CPU
// on a slow machine, against 4 for a Go hello world): the submit, its
// supervisor (started from the submit's initializer, package ahead) and
// the sandbox's init, which the supervisor used to start only once its
// own start was done and the submit had told it the backend. The init
// was then the last thing the run waited for before its agent. Here the
// supervisor's initializer starts it, when the submit asked for it on
// the supervisor's command line (Flag: the submit names no other
// backend): its start then overlaps the other two. The native backend
// takes it (Take) once the run's backend is known, and ends it (Drop)
// when the run uses another.
//
// What it starts is the init of native's Prewarm: in its own namespaces,
// waiting on its config socket for its files and its config, knowing
// nothing of any run. A supervisor that exits (the submit made no run)
// takes it along (Pdeathsig).
//
// Only os, syscall and package execpriv (which imports no more) are
// imported, so that the initializer keeps its early place: the runtime
// initializes first the package with the smallest import path among
// those whose imports are, and golang.org/x/sys/unix comes after most of
// the binary.
package warmstart
