package egress

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
)

func TestParseEntryCanonical(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		kind     EntryKind
	}{
		{"example.com", "example.com", KindHost},
		{"Example.COM.", "example.com", KindHost},
		{"  example.com  ", "example.com", KindHost},
		{"example.com:8443", "example.com:8443", KindHost},
		{"example.com:*", "example.com:*", KindHost},
		{"localhost", "localhost", KindHost},
		{"under_score.example.com", "under_score.example.com", KindHost},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", KindHost},
		{"*.Example.com", "*.example.com", KindDomain},
		{"*.example.com:443", "*.example.com:443", KindDomain},
		{"*.example.com:*", "*.example.com:*", KindDomain},
		{"203.0.113.7", "203.0.113.7", KindIP},
		{"203.0.113.7:443", "203.0.113.7:443", KindIP},
		{"10.1.2.3/8", "10.0.0.0/8", KindIP},
		{"10.0.0.0/8:5432", "10.0.0.0/8:5432", KindIP},
		{"::1", "::1", KindIP},
		{"[::1]", "::1", KindIP},
		{"[::1]:8080", "[::1]:8080", KindIP},
		{"2001:DB8::1", "2001:db8::1", KindIP},
		{"fd00::/8", "fd00::/8", KindIP},
		{"[fd00::/8]:443", "[fd00::/8]:443", KindIP},
		{"[fd00::/8]:*", "[fd00::/8]:*", KindIP},
		{"::ffff:127.0.0.1", "127.0.0.1", KindIP},
		{"[::ffff:10.0.0.0/104]:22", "10.0.0.0/8:22", KindIP},
		{"preset:npm", "preset:npm", KindPreset},
		{"PRESET:GitHub", "preset:github", KindPreset},
	}
	for _, tt := range tests {
		e, err := ParseEntry(tt.in)
		if err != nil {
			t.Errorf("ParseEntry(%q): %v", tt.in, err)
			continue
		}
		if e.Kind != tt.kind || e.String() != tt.want {
			t.Errorf("ParseEntry(%q) = kind %d %q, want kind %d %q", tt.in, e.Kind, e.String(), tt.kind, tt.want)
		}
		again, err := ParseEntry(e.String())
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Errorf("round trip of %q: %+v, %v; want %+v", e.String(), again, err, e)
		}
	}
}

func TestParseEntryRejects(t *testing.T) {
	t.Parallel()
	bad := []string{
		"", "   ", "*", "*.com", "*:443", "*.*.example.com", "a.*.example.com",
		"example.com:", "example.com:0", "example.com:65536", "example.com:-1", "example.com:+80",
		"example.com:080", "example.com:http", "example.com:80:90", ":443",
		"exa mple.com", "exa/mple.com", "ex\x00ample.com", "exämple.com", "-example.com", "example-.com",
		"example..com", ".example.com", "127.1", "1.2.3.4.5", "0x7f000001", "example.0x10",
		"[127.0.0.1]", "[::1", "[::1]x", "[::1]:", "fe80::1%eth0", "10.0.0.0/33", "10.0.0.0/x",
		"preset:nope", "preset:", "user@example.com", "http://example.com",
		strings.Repeat("a", 64) + ".com", strings.Repeat("a.", 130) + "com",
	}
	for _, s := range bad {
		e, err := ParseEntry(s)
		if err == nil {
			t.Errorf("ParseEntry(%q) = %q, want error", s, e.String())
			continue
		}
		if !catalog.Has(err, catalog.BadAllow) {
			t.Errorf("ParseEntry(%q) error %v is not catalog.BadAllow", s, err)
		}
	}
}

func TestNewAllowlistEntriesCanonical(t *testing.T) {
	t.Parallel()
	a, err := NewAllowlist([]string{"b.example.com", "A.example.com.", "preset:pypi", "pypi.org:443", "a.example.com", "10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1", "a.example.com", "b.example.com", "files.pythonhosted.org:443", "pypi.org:443"}
	if got := a.Entries(); !reflect.DeepEqual(got, want) {
		t.Errorf("Entries() = %q, want %q", got, want)
	}
	if _, err := NewAllowlist([]string{"ok.example.com", "bad host"}); !catalog.Has(err, catalog.BadAllow) {
		t.Errorf("NewAllowlist with a bad entry: %v, want catalog.BadAllow", err)
	}
	empty, err := NewAllowlist(nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := empty.Decide(context.Background(), Request{Host: "example.com", Port: 443, IPs: ips("93.184.215.14")}); d.Allow {
		t.Errorf("empty allowlist allowed: %+v", d)
	}
}

func TestPresets(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"npm":     {"registry.npmjs.org:443", "registry.yarnpkg.com:443"},
		"pypi":    {"files.pythonhosted.org:443", "pypi.org:443"},
		"goproxy": {"proxy.golang.org:443", "storage.googleapis.com:443", "sum.golang.org:443"},
		"crates":  {"crates.io:443", "index.crates.io:443", "static.crates.io:443"},
		"github": {"api.github.com:443", "codeload.github.com:443", "github.com:443",
			"objects.githubusercontent.com:443", "raw.githubusercontent.com:443"},
	}
	if got := Presets(); len(got) != len(want) {
		t.Fatalf("Presets() = %q", got)
	}
	for name, hosts := range want {
		a, err := NewAllowlist([]string{"preset:" + name})
		if err != nil {
			t.Fatalf("preset %s: %v", name, err)
		}
		if got := a.Entries(); !reflect.DeepEqual(got, hosts) {
			t.Errorf("preset %s = %q, want %q", name, got, hosts)
		}
	}
}

func ips(ss ...string) []net.IP {
	var out []net.IP
	for _, s := range ss {
		out = append(out, net.ParseIP(s))
	}
	return out
}

const public4 = "93.184.215.14"

func TestDecide(t *testing.T) {
	t.Parallel()
	list := []string{
		"example.com", "api.example.net:8443", "any.example.org:*",
		"*.pkg.example.com", "*.svc.example.com:9000",
		"203.0.113.7:443", "198.51.100.0/24:*", "[2001:db8::10]:443",
		"db.example.com:5432", "10.0.0.7:5432",
		"meta.example.com", "localhost:8080", "[::1]:8080",
		"preset:github",
	}
	a, err := NewAllowlist(list)
	if err != nil {
		t.Fatal(err)
	}
	pub := ips(public4)
	tests := []struct {
		name string
		req  Request
		code string
		rule string
	}{
		{"exact 443", Request{Host: "example.com", Port: 443, IPs: pub}, CodeAllowed, "example.com"},
		{"exact 80", Request{Host: "example.com", Port: 80, IPs: pub}, CodeAllowed, "example.com"},
		{"exact other port", Request{Host: "example.com", Port: 8080, IPs: pub}, CodePort, ""},
		{"mixed case", Request{Host: "EXAMPLE.Com", Port: 443, IPs: pub}, CodeAllowed, "example.com"},
		{"trailing dot", Request{Host: "example.com.", Port: 443, IPs: pub}, CodeAllowed, "example.com"},
		{"two trailing dots", Request{Host: "example.com..", Port: 443, IPs: pub}, CodeBadHost, ""},
		{"subdomain of exact", Request{Host: "www.example.com", Port: 443, IPs: pub}, CodeNotListed, ""},
		{"suffix lookalike", Request{Host: "badexample.com", Port: 443, IPs: pub}, CodeNotListed, ""},
		{"explicit port", Request{Host: "api.example.net", Port: 8443, IPs: pub}, CodeAllowed, "api.example.net:8443"},
		{"explicit port only", Request{Host: "api.example.net", Port: 443, IPs: pub}, CodePort, ""},
		{"any port", Request{Host: "any.example.org", Port: 22, IPs: pub}, CodeAllowed, "any.example.org:*"},
		{"wildcard one deep", Request{Host: "a.pkg.example.com", Port: 443, IPs: pub}, CodeAllowed, "*.pkg.example.com"},
		{"wildcard two deep", Request{Host: "a.b.pkg.example.com", Port: 80, IPs: pub}, CodeAllowed, "*.pkg.example.com"},
		{"wildcard not apex", Request{Host: "pkg.example.com", Port: 443, IPs: pub}, CodeNotListed, ""},
		{"wildcard lookalike", Request{Host: "xpkg.example.com", Port: 443, IPs: pub}, CodeNotListed, ""},
		{"wildcard port", Request{Host: "a.svc.example.com", Port: 9000, IPs: pub}, CodeAllowed, "*.svc.example.com:9000"},
		{"wildcard wrong port", Request{Host: "a.svc.example.com", Port: 443, IPs: pub}, CodePort, ""},
		{"preset", Request{Host: "api.github.com", Port: 443, IPs: pub}, CodeAllowed, "api.github.com:443"},
		{"preset is https only", Request{Host: "github.com", Port: 80, IPs: pub}, CodePort, ""},
		{"not listed", Request{Host: "evil.example", Port: 443, IPs: pub}, CodeNotListed, ""},
		{"no ips", Request{Host: "example.com", Port: 443}, CodeUnresolved, ""},
		{"weird name", Request{Host: "exa mple.com", Port: 443, IPs: pub}, CodeBadHost, ""},
		{"numeric name", Request{Host: "2130706433", Port: 443, IPs: pub}, CodeBadHost, ""},
		{"zone", Request{Host: "fe80::1%lo", Port: 443}, CodeBadHost, ""},
		// IP literals.
		{"ip literal listed", Request{Host: "203.0.113.7", Port: 443}, CodeAllowed, "203.0.113.7:443"},
		{"ip literal wrong port", Request{Host: "203.0.113.7", Port: 80}, CodeIPLiteral, ""},
		{"ip literal cidr", Request{Host: "198.51.100.99", Port: 5000}, CodeAllowed, "198.51.100.0/24:*"},
		{"ip literal not listed", Request{Host: public4, Port: 443}, CodeIPLiteral, ""},
		{"ip literal loopback", Request{Host: "127.0.0.1", Port: 80}, CodeIPLiteral, ""},
		{"ip literal metadata", Request{Host: "169.254.169.254", Port: 80}, CodeIPLiteral, ""},
		{"ipv6 literal listed", Request{Host: "2001:db8::10", Port: 443}, CodeAllowed, "[2001:db8::10]:443"},
		{"ipv6 literal bracketed", Request{Host: "[2001:DB8::10]", Port: 443}, CodeAllowed, "[2001:db8::10]:443"},
		{"ipv6 loopback literal", Request{Host: "::1", Port: 443}, CodeIPLiteral, ""},
		{"ipv6 loopback listed port", Request{Host: "::1", Port: 8080}, CodeAllowed, "[::1]:8080"},
		{"mapped literal", Request{Host: "::ffff:127.0.0.1", Port: 443}, CodeIPLiteral, ""},
		{"mapped literal listed", Request{Host: "::ffff:203.0.113.7", Port: 443}, CodeAllowed, "203.0.113.7:443"},
		// Names resolving to special addresses.
		{"to loopback", Request{Host: "example.com", Port: 443, IPs: ips("127.0.0.1")}, CodeSpecialIP, ""},
		{"to loopback among public", Request{Host: "example.com", Port: 443, IPs: ips(public4, "127.0.0.2")}, CodeSpecialIP, ""},
		{"to metadata", Request{Host: "example.com", Port: 80, IPs: ips("169.254.169.254")}, CodeSpecialIP, ""},
		{"to mapped metadata", Request{Host: "example.com", Port: 80, IPs: ips("::ffff:169.254.169.254")}, CodeSpecialIP, ""},
		{"to rfc1918", Request{Host: "example.com", Port: 443, IPs: ips("192.168.1.1")}, CodeSpecialIP, ""},
		{"to cgnat", Request{Host: "example.com", Port: 443, IPs: ips("100.100.100.200")}, CodeSpecialIP, ""},
		{"to ula", Request{Host: "example.com", Port: 443, IPs: ips("fd12::1")}, CodeSpecialIP, ""},
		{"to v6 link-local", Request{Host: "example.com", Port: 443, IPs: ips("fe80::1")}, CodeSpecialIP, ""},
		{"to v6 loopback", Request{Host: "example.com", Port: 443, IPs: ips("::1")}, CodeSpecialIP, ""},
		{"to unspecified", Request{Host: "example.com", Port: 443, IPs: ips("0.0.0.0")}, CodeSpecialIP, ""},
		{"to multicast", Request{Host: "example.com", Port: 443, IPs: ips("239.1.1.1")}, CodeSpecialIP, ""},
		{"to nat64 of loopback", Request{Host: "example.com", Port: 443, IPs: ips("64:ff9b::7f00:1")}, CodeSpecialIP, ""},
		{"to named private", Request{Host: "db.example.com", Port: 5432, IPs: ips("10.0.0.7")}, CodeAllowed, "db.example.com:5432"},
		{"to other private", Request{Host: "db.example.com", Port: 5432, IPs: ips("10.0.0.7", "10.0.0.8")}, CodeSpecialIP, ""},
		{"ip entry needs its port", Request{Host: "localhost", Port: 8080, IPs: ips("127.0.0.1", "::1")}, CodeSpecialIP, ""},
		{"to public v6", Request{Host: "example.com", Port: 443, IPs: ips("2606:2800:220:1:248:1893:25c8:1946")}, CodeAllowed, "example.com"},
	}
	ctx := context.Background()
	for _, tt := range tests {
		d := a.Decide(ctx, tt.req)
		if d.Code != tt.code || d.Allow != (tt.code == CodeAllowed) {
			t.Errorf("%s: Decide(%+v) = %+v, want code %s", tt.name, tt.req, d, tt.code)
			continue
		}
		if tt.rule != "" && d.Rule != tt.rule {
			t.Errorf("%s: rule %q, want %q", tt.name, d.Rule, tt.rule)
		}
		if d.Why == "" {
			t.Errorf("%s: empty Why", tt.name)
		}
		if tt.code == CodeSpecialIP && d.IP == "" {
			t.Errorf("%s: special-IP denial without IP", tt.name)
		}
		// CheckName never denies what Decide allows.
		if d.Allow {
			if c := a.CheckName(ctx, tt.req.Host, tt.req.Port); !c.Allow {
				t.Errorf("%s: CheckName denies what Decide allows: %+v", tt.name, c)
			}
		}
	}
	// The loopback case with the IP entry covering both addresses.
	b, _ := NewAllowlist([]string{"localhost:8080", "127.0.0.1:8080", "[::1]:8080"})
	if d := b.Decide(ctx, Request{Host: "localhost", Port: 8080, IPs: ips("127.0.0.1", "::1")}); !d.Allow {
		t.Errorf("localhost with both IP entries: %+v", d)
	}
}

func TestSpecialClass(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"127.0.0.1": "loopback", "127.255.255.254": "loopback", "::1": "loopback",
		"10.1.2.3": "private", "172.16.0.1": "private", "172.31.255.255": "private", "192.168.0.1": "private",
		"fc00::1": "private", "fdff::1": "private",
		"169.254.169.254": "link-local", "fe80::abcd": "link-local", "febf::1": "link-local",
		"224.0.0.1": "multicast", "ff02::1": "multicast",
		"0.0.0.0": "unspecified", "0.1.2.3": "unspecified", "::": "unspecified",
		"100.64.0.1": "shared (CGNAT)", "100.127.255.255": "shared (CGNAT)",
		"255.255.255.255": "reserved", "::ffff:127.0.0.1": "loopback", "::ffff:10.0.0.1": "private",
		"::ffff:169.254.169.254": "link-local", "64:ff9b::a00:1": "NAT64", "2002:7f00:1::": "6to4",
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": "Teredo", "::127.0.0.1": "IPv4-compatible",
		"8.8.8.8": "", "172.32.0.1": "", "100.128.0.1": "", "1.1.1.1": "", "2606:4700::1111": "",
		"169.253.255.255": "", "192.169.0.1": "",
	}
	for s, want := range tests {
		if got := SpecialClass(netip.MustParseAddr(s)); got != want {
			t.Errorf("SpecialClass(%s) = %q, want %q", s, got, want)
		}
	}
	if got := SpecialClass(netip.Addr{}); got != "invalid" {
		t.Errorf("SpecialClass(zero) = %q", got)
	}
}
