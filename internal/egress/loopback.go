package egress

import "net/netip"

// Bridge ports on a sandbox's loopback (the egress proxy's, the model
// gateway's): never a host service's.
var bridgePorts = map[int]bool{3128: true, 3129: true}

// HostLoopback sorts the entries of allow that name this machine's own
// loopback. A sandbox's 127.0.0.1 is its own, not the host's: for each
// entry of one IPv4 loopback address and one port (127.0.0.1:5432,
// 127.0.0.1:80), a backend listens on that address inside and tunnels
// its connections through the egress proxy, which dials the host's
// (forward, as ADDRESS:PORT; a port below 1024 is made bindable in the
// sandbox's own network namespace: sandbox.LowestPrivilegedPort). Any other
// loopback entry (a range, IPv6, every port, no port, a bridge's port)
// is reached only by clients that go through the proxy for it, which
// NO_PROXY keeps loopback clients from doing (other). Entries that do
// not parse are left out: the allowlist has refused them.
func HostLoopback(allow []string) (forward, other []string) {
	for _, s := range allow {
		e, err := ParseEntry(s)
		if err != nil || e.Kind != KindIP || !e.Prefix.Addr().IsLoopback() {
			continue
		}
		if e.Prefix.IsSingleIP() && e.Prefix.Addr().Is4() && e.Port > 0 && !bridgePorts[e.Port] {
			forward = append(forward, netip.AddrPortFrom(e.Prefix.Addr(), uint16(e.Port)).String())
			continue
		}
		other = append(other, s)
	}
	return forward, other
}
