package sandbox

import "net/netip"

// LowestPrivilegedPort is the lowest port below 1024 among forwards
// (ADDRESS:PORT, Spec.Forwards), 0 when there is none. A backend lowers
// its sandbox's net.ipv4.ip_unprivileged_port_start to it (a setting of
// the sandbox's own network namespace), so that the sandbox's runner,
// with no capability, binds such a forward, and no lower port becomes
// bindable.
func LowestPrivilegedPort(forwards []string) int {
	low := 0
	for _, f := range forwards {
		ap, err := netip.ParseAddrPort(f)
		if p := int(ap.Port()); err == nil && p > 0 && p < 1024 && (low == 0 || p < low) {
			low = p
		}
	}
	return low
}
