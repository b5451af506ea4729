package native_test

import (
	"strconv"
	"strings"
	"testing"
)

// loopbackScript starts a server on the sandbox's own loopback, then
// connects to it: what a test suite with a local HTTP server does.
const loopbackScript = `perl -MIO::Socket::INET -e '
	my $srv = IO::Socket::INET->new(LocalAddr => "127.0.0.1:18080", Listen => 1, ReuseAddr => 1) or die "listen: $!";
	my $c = IO::Socket::INET->new(PeerAddr => "127.0.0.1:18080", Timeout => 3) or die "connect: $!";
	print "connected\n";'`

// Without --loopback-tcp, Landlock allows TCP connect only to the egress
// bridge, so even the sandbox's own loopback server is out of reach.
func TestLoopbackTCPDeniedByDefault(t *testing.T) {
	requirePerl(t)
	b := backend(t)
	spec := newSpec(t)
	r := sh(t, b, spec, loopbackScript)
	if r.enforced["landlock_net"] != "enforced" {
		t.Skipf("landlock_net is %q here", r.enforced["landlock_net"])
	}
	if r.code == 0 || strings.Contains(r.stdout, "connected") {
		t.Fatalf("connect to the sandbox's loopback succeeded without LoopbackTCP:\n%s", r)
	}
}

// With LoopbackTCP a server the agent starts inside is reachable, Enforced
// says Landlock's TCP rule is off, and the host's loopback is still not.
func TestLoopbackTCPAllowsOwnServers(t *testing.T) {
	requirePerl(t)
	b := backend(t)
	tg := plant(t, t.TempDir())
	spec := newSpec(t)
	spec.LoopbackTCP = true
	r := sh(t, b, spec, loopbackScript)
	if r.code != 0 || !strings.Contains(r.stdout, "connected") {
		t.Fatalf("own loopback server not reachable with LoopbackTCP:\n%s", r)
	}
	if got := r.enforced["landlock_net"]; !strings.HasPrefix(got, "off:") && !strings.HasPrefix(got, "unavailable:") {
		t.Fatalf("landlock_net = %q, want off or unavailable", got)
	}
	host := sh(t, b, spec, `perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => "127.0.0.1:`+strconv.Itoa(tg.tcpPort)+`", Timeout => 3) or exit 1; exit 0'`)
	if host.code == 0 {
		t.Fatalf("host loopback port reachable with LoopbackTCP:\n%s", host)
	}
}
