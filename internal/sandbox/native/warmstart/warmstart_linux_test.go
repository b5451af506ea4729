package warmstart

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWanted(t *testing.T) {
	for _, c := range []struct {
		args string
		want bool
	}{
		{"agentrun __supervise --home /h --pending " + Flag, true},
		{"agentrun __supervise " + Flag + " --home /h --pending", true},
		{"agentrun __supervise --home /h --pending", false},        // not asked
		{"agentrun __supervise --home /h --id abc " + Flag, false}, // not started ahead
		{"agentrun submit --pending " + Flag, false},               // not a supervisor
		{"agentrun __sandbox init " + RoleWarm, false},             // the init itself
		{"agentrun", false},
	} {
		if got := Wanted(strings.Fields(c.args)); got != c.want {
			t.Errorf("Wanted(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

// TestConstantsAreTheKernels: the numbers this package writes out itself
// (package syscall lacks them) are the kernel's, as x/sys/unix has them.
func TestConstantsAreTheKernels(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"CAP_DAC_OVERRIDE", capDacOverride, unix.CAP_DAC_OVERRIDE},
		{"CAP_SETPCAP", capSetpcap, unix.CAP_SETPCAP},
		{"CAP_NET_ADMIN", capNetAdmin, unix.CAP_NET_ADMIN},
		{"CAP_SYS_ADMIN", capSysAdmin, unix.CAP_SYS_ADMIN},
		{"_LINUX_CAPABILITY_VERSION_3", linuxCapabilityVersion3, unix.LINUX_CAPABILITY_VERSION_3},
		{"PR_CAPBSET_DROP", prCapbsetDrop, unix.PR_CAPBSET_DROP},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}
