package native

import (
	"os"
	"strings"
	"testing"
)

// TestForwardLowPortsLeavesTheHostAlone: in the namespace the sandbox
// was started from (this test's process is in the host's), or where that
// namespace is unknown, a low forward never changes the host's
// ip_unprivileged_port_start: an error, and the value is what it was.
func TestForwardLowPortsLeavesTheHostAlone(t *testing.T) {
	before, err := os.ReadFile(unprivilegedPortStart)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if after, _ := os.ReadFile(unprivilegedPortStart); string(after) != string(before) {
			_ = os.WriteFile(unprivilegedPortStart, before, 0)
			t.Fatalf("the host's ip_unprivileged_port_start went from %q to %q (put back)", before, after)
		}
	}()
	own := netnsInode()
	if own == 0 {
		t.Fatal("cannot read this process's network namespace")
	}
	low := []string{"127.0.0.1:5432", "127.0.0.1:80"}
	for _, host := range []uint64{own, 0} {
		err := forwardLowPorts(&config{ProxySocket: "/nonexistent/proxy.sock", Forwards: low, HostNetNS: host})
		if err == nil || !strings.Contains(err.Error(), "from the host's") {
			t.Errorf("host namespace %d: %v, want the refusal", host, err)
		}
	}
	// Without a low forward, or without the proxy, nothing is asked.
	for _, c := range []*config{{ProxySocket: "/p", Forwards: []string{"127.0.0.1:5432"}}, {Forwards: low}} {
		if err := forwardLowPorts(c); err != nil {
			t.Errorf("%+v: %v", c.Forwards, err)
		}
	}
}
