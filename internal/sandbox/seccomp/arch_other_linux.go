//go:build linux && !amd64 && !arm64

package seccomp

// No filter is written for this architecture: Preflight refuses to run
// rather than run without seccomp.
const (
	auditArch = 0
	x32Bit    = 0
)

var deniedArch []uintptr

var modeArgsArch []modeArg
