package egress

import (
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{
		"example.com", "EXAMPLE.com.", "example.com:8443", "example.com:*", "*.example.com",
		"*.example.com:443", "*.com", "203.0.113.7", "203.0.113.7:443", "10.0.0.0/8", "10.0.0.0/8:5432",
		"::1", "[::1]", "[::1]:8080", "[fd00::/8]:443", "::ffff:127.0.0.1", "[::ffff:10.0.0.0/104]:22",
		"fe80::1%eth0", "preset:npm", "preset:nope", "127.1", "0x7f000001", "[127.0.0.1]", "a..b",
		"exa mple.com", ":443", "[::1]:", "example.com:080", "xn--bcher-kva.example", "a_b.example",
		"\x00", "[", "]", "*.", "*..com", "::", "0.0.0.0/0", "[::]:*",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEntry(s)
		if err != nil {
			return
		}
		if e.Kind < KindHost || e.Kind > KindPreset {
			t.Fatalf("ParseEntry(%q) kind %d", s, e.Kind)
		}
		canon := e.String()
		again, err := ParseEntry(canon)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", canon, s, err)
		}
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip of %q via %q: %+v != %+v", s, canon, again, e)
		}
		if _, err := NewAllowlist([]string{s}); err != nil {
			t.Fatalf("NewAllowlist(%q): %v", s, err)
		}
		switch e.Kind {
		case KindHost, KindDomain:
			if e.Name != strings.ToLower(e.Name) || strings.HasSuffix(e.Name, ".") || checkName(e.Name) != nil {
				t.Fatalf("ParseEntry(%q) name %q", s, e.Name)
			}
		case KindIP:
			if !e.Prefix.IsValid() || e.Prefix != e.Prefix.Masked() || e.Prefix.Addr().Is4In6() {
				t.Fatalf("ParseEntry(%q) prefix %v", s, e.Prefix)
			}
		}
	})
}

// FuzzDecide checks that no allowlist, host or address makes Decide panic,
// and that an allowed connection to a special-purpose address (or to an IP
// literal) is always covered by an IP/CIDR entry that names it.
func FuzzDecide(f *testing.F) {
	f.Add("example.com", "example.com", uint16(443), []byte{127, 0, 0, 1})
	f.Add("example.com,127.0.0.1:443", "example.com", uint16(443), []byte{127, 0, 0, 1})
	f.Add("example.com,127.0.0.0/8:*", "Example.com.", uint16(80), []byte{127, 1, 2, 3})
	f.Add("*.example.com", "a.example.com", uint16(443), []byte{169, 254, 169, 254})
	f.Add("*.example.com", "example.com", uint16(443), []byte{93, 184, 215, 14})
	f.Add("example.com:*", "example.com", uint16(22), []byte(net.ParseIP("::ffff:10.0.0.1")))
	f.Add("example.com,fd00::/8", "example.com", uint16(443), []byte(net.ParseIP("fd00::1")))
	f.Add("10.0.0.0/8", "10.1.2.3", uint16(80), []byte(nil))
	f.Add("::1", "[::1]", uint16(443), []byte(nil))
	f.Add("preset:github", "api.github.com", uint16(443), []byte(net.ParseIP("64:ff9b::a00:1")))
	f.Add("0.0.0.0/0:*", "::ffff:127.0.0.1", uint16(1), []byte(nil))
	f.Fuzz(func(t *testing.T, list, host string, port uint16, ipb []byte) {
		al, err := NewAllowlist(strings.Split(list, ","))
		if err != nil {
			return
		}
		var reqIPs []net.IP
		if len(ipb) == 4 || len(ipb) == 16 {
			reqIPs = []net.IP{net.IP(ipb)}
		}
		req := Request{Host: host, Port: int(port), IPs: reqIPs}
		d := al.Decide(t.Context(), req)
		if !d.Allow {
			if d.Code == CodeAllowed || d.Why == "" {
				t.Fatalf("denial without reason: %+v", d)
			}
			return
		}
		if d.Code != CodeAllowed || d.Rule == "" {
			t.Fatalf("allow without rule: %+v", d)
		}
		if c := al.CheckName(t.Context(), host, int(port)); !c.Allow {
			t.Fatalf("Decide allows %q but CheckName denies: %+v", host, c)
		}
		covered := func(a netip.Addr) bool {
			a = a.Unmap()
			for _, s := range al.Entries() {
				e, err := ParseEntry(s)
				if err != nil {
					t.Fatalf("canonical entry %q: %v", s, err)
				}
				if e.Kind == KindIP && e.Prefix.Contains(a) && e.portOK(int(port)) {
					return true
				}
			}
			return false
		}
		h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if a, err := netip.ParseAddr(h); err == nil {
			if !covered(a) {
				t.Fatalf("IP literal %q allowed without an IP entry: %+v", host, d)
			}
			return
		}
		if len(reqIPs) == 0 {
			t.Fatalf("name %q allowed without addresses", host)
		}
		for _, ip := range reqIPs {
			a, _ := netip.AddrFromSlice(ip)
			if SpecialClass(a) != "" && !covered(a) {
				t.Fatalf("%q -> %v (%s) allowed by %q without an entry naming it", host, a, SpecialClass(a), d.Rule)
			}
		}
	})
}
