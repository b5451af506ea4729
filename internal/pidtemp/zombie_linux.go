package pidtemp

import (
	"bytes"
	"os"
	"strconv"
)

// zombie reports a process that has ended but is not yet reaped: its
// state in /proc/PID/stat (the field after the command name, which may
// itself hold spaces and parentheses) is Z.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && b[i+2] == 'Z'
}
