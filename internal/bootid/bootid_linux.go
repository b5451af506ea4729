package bootid

import (
	"os"
	"strings"
)

func read() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}
