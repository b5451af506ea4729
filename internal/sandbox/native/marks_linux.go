package native

import "golang.org/x/sys/unix"

// add marks the end of step now.
func (m *marks) add(step string) {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	*m = append(*m, mark{Step: step, At: ts.Nano()})
}
