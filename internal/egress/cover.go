package egress

import "strings"

// Covers reports whether everything entry o allows, e allows too: an
// organization policy's entry bounds what a run's allowlist may hold.
// A host is covered by the same host or a domain above it; a domain by
// the same domain or one above it; an address or prefix by a prefix that
// holds it. Ports: e's every port covers any; its default (443 and 80)
// covers the default, 443 and 80; a port covers itself. Presets are
// expanded before they are compared (see PresetEntries): Covers is false
// for a preset on either side.
func (e Entry) Covers(o Entry) bool {
	if !e.coversPort(o.Port) {
		return false
	}
	switch e.Kind {
	case KindHost:
		return o.Kind == KindHost && o.Name == e.Name
	case KindDomain:
		return (o.Kind == KindHost || o.Kind == KindDomain) && (o.Name == e.Name && o.Kind == KindDomain || strings.HasSuffix(o.Name, "."+e.Name))
	case KindIP:
		return o.Kind == KindIP && e.Prefix.Bits() <= o.Prefix.Bits() && e.Prefix.Contains(o.Prefix.Addr())
	}
	return false
}

func (e Entry) coversPort(p int) bool {
	switch e.Port {
	case PortAny:
		return true
	case PortDefault:
		return p == PortDefault || p == 443 || p == 80
	}
	return p == e.Port
}
