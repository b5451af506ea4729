package native

import "github.com/agentrun/agentrun/internal/sandbox"

// Mark is when a step of a sandbox's start ended (CLOCK_MONOTONIC, ns).
type Mark = mark

// StartMarks lists when the steps of sb's start ended: the host's, then
// the init's, in the order each made them.
func StartMarks(sb sandbox.Sandbox) []Mark { return sb.(*sbox).p.marks }

// WarmPid is the pid of the process's init started ahead (0: none).
func WarmPid() int {
	ahead.mu.Lock()
	defer ahead.mu.Unlock()
	if ahead.w == nil {
		return 0
	}
	return ahead.w.process.Pid
}

// StoppedByInit is closed once sb's pid 1 has said that nothing else runs
// in the sandbox (see quiesce).
func StoppedByInit(sb sandbox.Sandbox) <-chan struct{} { return sb.(*sbox).p.stopped }

// WarmJoined waits until the process's init started ahead (if any) has
// joined all the cgroups it joins while it waits (joinAhead runs beside
// its start), and leaves what it joined for the Start that takes it.
func WarmJoined() {
	ahead.mu.Lock()
	w := ahead.w
	ahead.mu.Unlock()
	if w == nil {
		return
	}
	j := <-w.cgroups
	w.cgroups <- j
}

// EndWarmWhenTaken makes the next Start that takes an init started ahead
// kill it right after it looked that the init runs, and wait until it has
// ended: an init that ends in between (a signal, the OOM killer).
func EndWarmWhenTaken() (restore func()) {
	warmTaken = func(w *warm) {
		w.process.Kill()
		<-w.done
	}
	return func() { warmTaken = nil }
}

// InitPid is sb's pid 1, as the host sees it.
func InitPid(sb sandbox.Sandbox) int { return sb.(*sbox).p.process.Pid }
