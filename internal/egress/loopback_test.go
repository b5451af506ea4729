package egress

import (
	"slices"
	"testing"
)

// TestHostLoopback: the allowlist's entries for this machine's loopback
// that a sandbox reaches at the same address (one IPv4 loopback address,
// one port of 1024 or more, not a bridge's), and the others.
func TestHostLoopback(t *testing.T) {
	forward, other := HostLoopback([]string{
		"127.0.0.1:5432", "127.0.0.2:4873", "registry.npmjs.org", "10.0.0.1:5432", // a forward, a forward, neither, neither
		"127.0.0.1", "127.0.0.1:*", "127.0.0.1:80", "127.0.0.0/8:6379", "[::1]:5432", "127.0.0.1:3128", // others
		"not an entry",
	})
	if want := []string{"127.0.0.1:5432", "127.0.0.2:4873"}; !slices.Equal(forward, want) {
		t.Errorf("forward %v, want %v", forward, want)
	}
	if want := []string{"127.0.0.1", "127.0.0.1:*", "127.0.0.1:80", "127.0.0.0/8:6379", "[::1]:5432", "127.0.0.1:3128"}; !slices.Equal(other, want) {
		t.Errorf("other %v, want %v", other, want)
	}
}
