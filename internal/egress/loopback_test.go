package egress

import (
	"slices"
	"testing"
)

// TestHostLoopback: the allowlist's entries for this machine's loopback
// that a sandbox reaches at the same address (one IPv4 loopback address,
// one port, not a bridge's), and the others.
func TestHostLoopback(t *testing.T) {
	forward, other := HostLoopback([]string{
		"127.0.0.1:5432", "127.0.0.2:4873", "127.0.0.1:80", "registry.npmjs.org", "10.0.0.1:5432", // forwards, neither, neither
		"127.0.0.1", "127.0.0.1:*", "127.0.0.0/8:6379", "[::1]:5432", "127.0.0.1:3128", "127.0.0.1:3129", // others
		"not an entry",
	})
	if want := []string{"127.0.0.1:5432", "127.0.0.2:4873", "127.0.0.1:80"}; !slices.Equal(forward, want) {
		t.Errorf("forward %v, want %v", forward, want)
	}
	if want := []string{"127.0.0.1", "127.0.0.1:*", "127.0.0.0/8:6379", "[::1]:5432", "127.0.0.1:3128", "127.0.0.1:3129"}; !slices.Equal(other, want) {
		t.Errorf("other %v, want %v", other, want)
	}
}
