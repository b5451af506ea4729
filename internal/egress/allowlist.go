package egress

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Allowlist is the allowlist Policy: a set of parsed entries, presets
// expanded. It is immutable after NewAllowlist and safe for concurrent use.
type Allowlist struct {
	entries []Entry // canonical order, no duplicates, no presets
}

var _ Policy = (*Allowlist)(nil)
var _ NameChecker = (*Allowlist)(nil)

// NewAllowlist parses entries (the --allow values, presets included, and
// each agent profile's API hosts) into an Allowlist. An empty list denies
// everything. The error is a catalog.BadAllow error naming the first bad
// entry.
func NewAllowlist(entries []string) (*Allowlist, error) {
	seen := map[string]bool{}
	var out []Entry
	add := func(e Entry) {
		k := e.String()
		if !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	for _, s := range entries {
		e, err := ParseEntry(s)
		if err != nil {
			return nil, err
		}
		if e.Kind != KindPreset {
			add(e)
			continue
		}
		for _, ps := range presets[e.Preset] {
			pe, err := parseEntry(ps)
			if err != nil {
				return nil, fmt.Errorf("preset %s: %w", e.Preset, err) // a bug in the preset table
			}
			add(pe)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return &Allowlist{entries: out}, nil
}

// Entries returns the canonical entries: presets expanded, sorted,
// deduplicated. It is the input of the policy digest.
func (a *Allowlist) Entries() []string {
	out := make([]string, len(a.entries))
	for i, e := range a.entries {
		out[i] = e.String()
	}
	return out
}

// CheckName implements NameChecker: the name (or IP literal) and port
// alone. For a name it allows provisionally when a host or domain entry
// matches; Decide still has to check the resolved addresses.
func (a *Allowlist) CheckName(_ context.Context, host string, port int) Decision {
	h, addr, err := normalizeHost(host)
	if err != nil {
		return Decision{Why: err.Error(), Code: CodeBadHost}
	}
	if addr.IsValid() {
		return a.decideLiteral(h, addr, port)
	}
	return a.matchName(h, port)
}

// Decide implements Policy. A name must match a host or domain entry for
// the port, and every resolved IP must be an ordinary public address, or
// be covered (with the port) by an IP/CIDR entry. An IP literal must be
// covered by an IP/CIDR entry. A name with no IPs is denied.
func (a *Allowlist) Decide(_ context.Context, req Request) Decision {
	h, addr, err := normalizeHost(req.Host)
	if err != nil {
		return Decision{Why: err.Error(), Code: CodeBadHost}
	}
	if addr.IsValid() {
		return a.decideLiteral(h, addr, req.Port)
	}
	d := a.matchName(h, req.Port)
	if !d.Allow {
		return d
	}
	if len(req.IPs) == 0 {
		return Decision{Rule: d.Rule, Why: "no addresses for " + h, Code: CodeUnresolved}
	}
	for _, ip := range req.IPs {
		ipa, ok := netip.AddrFromSlice(ip)
		if !ok {
			return Decision{Rule: d.Rule, Why: fmt.Sprintf("resolves to an invalid address %v", ip), Code: CodeBadHost}
		}
		ipa = ipa.Unmap()
		class := SpecialClass(ipa)
		if class == "" {
			continue
		}
		if _, ok := a.coveringIP(ipa, req.Port); ok {
			continue
		}
		return Decision{
			Rule: d.Rule,
			Why:  fmt.Sprintf("resolves to %s %s", class, ipa),
			Code: CodeSpecialIP,
			IP:   ipa.String(),
		}
	}
	return d
}

func (a *Allowlist) decideLiteral(h string, addr netip.Addr, port int) Decision {
	if e, ok := a.coveringIP(addr, port); ok {
		return Decision{Allow: true, Rule: e.String(), Why: "allowed by " + e.String(), Code: CodeAllowed, IP: addr.String()}
	}
	return Decision{Why: fmt.Sprintf("IP literal %s is not in the allowlist", hostPort(h, port)), Code: CodeIPLiteral, IP: addr.String()}
}

// matchName finds a host or domain entry for name and port.
func (a *Allowlist) matchName(name string, port int) Decision {
	var portMiss *Entry
	for i := range a.entries {
		e := &a.entries[i]
		var hit bool
		switch e.Kind {
		case KindHost:
			hit = name == e.Name
		case KindDomain:
			hit = len(name) > len(e.Name) && strings.HasSuffix(name, e.Name) && name[len(name)-len(e.Name)-1] == '.'
		}
		if !hit {
			continue
		}
		if e.portOK(port) {
			return Decision{Allow: true, Rule: e.String(), Why: "allowed by " + e.String(), Code: CodeAllowed}
		}
		if portMiss == nil {
			portMiss = e
		}
	}
	if portMiss != nil {
		return Decision{
			Why:  fmt.Sprintf("port %d is not allowed for %s (%s allows %s)", port, name, portMiss.String(), portMiss.portText()),
			Code: CodePort,
		}
	}
	return Decision{Why: name + " is not in the allowlist", Code: CodeNotListed}
}

// coveringIP finds an IP/CIDR entry that contains addr and admits port.
func (a *Allowlist) coveringIP(addr netip.Addr, port int) (Entry, bool) {
	for _, e := range a.entries {
		if e.Kind == KindIP && e.Prefix.Contains(addr) && e.portOK(port) {
			return e, true
		}
	}
	return Entry{}, false
}

// normalizeHost lowercases host, strips brackets and one trailing dot, and
// returns the address when host is an IP literal (IPv4-mapped forms
// unmapped). Anything that is neither a plain host name nor an address
// without zone is an error.
func normalizeHost(host string) (string, netip.Addr, error) {
	h := host
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("invalid host %q: IPv6 zones are not allowed", clip(host))
		}
		a = a.Unmap()
		return a.String(), a, nil
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if err := checkName(h); err != nil {
		return "", netip.Addr{}, fmt.Errorf("invalid host: %v", err)
	}
	return h, netip.Addr{}, nil
}

// special is the table of special-purpose ranges a name may not resolve
// to unless an IP/CIDR entry names the address. Addresses are checked
// after unmapping IPv4-mapped IPv6, so ::ffff:127.0.0.1 is loopback.
var special = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // includes 255.255.255.255
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// SpecialClass names the special-purpose range addr is in ("loopback",
// "private", "link-local", "multicast", "unspecified", ...), or "" for an
// ordinary public address. IPv4-mapped IPv6 addresses are classified as
// their IPv4 address; an invalid address is "invalid".
func SpecialClass(addr netip.Addr) string {
	if !addr.IsValid() {
		return "invalid"
	}
	addr = addr.WithZone("").Unmap()
	for _, s := range special {
		if s.prefix.Contains(addr) {
			return s.class
		}
	}
	return ""
}
