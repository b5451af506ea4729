package bootid

import (
	"strings"

	"golang.org/x/sys/unix"
)

// read is the boot session's UUID, which macOS makes anew at each boot.
func read() string {
	s, _ := unix.Sysctl("kern.bootsessionuuid")
	return strings.TrimSpace(s)
}
