package warmstart

import "os"

// Backend is the native backend's name (native.Name).
const Backend = "native"

// Flag, on a supervisor's command line after --pending, asks its
// initializer to start the native sandbox's init (package ahead adds it).
const Flag = "--warm-native"

// RoleWarm, after the init's role, starts an init that receives its
// listener and its log on its config socket before its config.
const RoleWarm = "warm"

// Init is an init started ahead: the binary it runs, its process, our
// end of its config socket, the read end of its status pipe, and when its
// start began and ended (CLOCK_MONOTONIC, ns).
type Init struct {
	Exe            string
	Proc           *os.Process
	CfgW, StR      *os.File
	Spawn, Spawned int64
}

// Wanted says whether command line args are a pending supervisor's that
// asks for the init (Flag).
func Wanted(args []string) bool {
	if len(args) < 3 || args[1] != "__supervise" {
		return false
	}
	pending, flag := false, false
	for _, a := range args[2:] {
		pending = pending || a == "--pending"
		flag = flag || a == Flag
	}
	return pending && flag
}
