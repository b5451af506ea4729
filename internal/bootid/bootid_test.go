package bootid

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// The boot's name is the kernel's: the same for every process of this
// boot, and read once.
func TestID(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the kernel's own name of the boot is read from /proc on Linux")
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	if got := ID(); got == "" || got != strings.TrimSpace(string(b)) || ID() != got {
		t.Fatalf("ID %q, the kernel says %q", got, b)
	}
}
