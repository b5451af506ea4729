package egress

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
)

// EntryKind says what an allowlist entry names.
type EntryKind int

const (
	KindHost   EntryKind = iota + 1 // one exact host name
	KindDomain                      // every name strictly under a domain: *.example.com
	KindIP                          // an IP address or CIDR prefix
	KindPreset                      // preset:NAME, a named group of host entries
)

// Port values of an Entry besides a real port number.
const (
	PortDefault = 0  // no port given: 443 and 80 only
	PortAny     = -1 // HOST:*: every port
)

// Entry is one parsed allowlist entry. The zero value is invalid.
type Entry struct {
	Kind EntryKind
	// Name is the host (KindHost) or the domain below "*." (KindDomain),
	// lowercase, without a trailing dot.
	Name string
	// Prefix is the address or CIDR (KindIP), masked, IPv4 unmapped.
	Prefix netip.Prefix
	// Port is a port number, PortDefault or PortAny.
	Port int
	// Preset is the preset name (KindPreset).
	Preset string
}

// presets are the named groups for --allow preset:NAME. They are HTTPS
// only (port 443): every registry here serves HTTPS.
//
// goproxy includes storage.googleapis.com because proxy.golang.org answers
// module zip downloads with a redirect there; without it `go mod download`
// fails. That host serves every public Cloud Storage bucket, so the preset
// is wider than the Go module proxy: leave the preset out and list
// proxy.golang.org and sum.golang.org yourself if that matters.
var presets = map[string][]string{
	"npm":     {"registry.npmjs.org:443", "registry.yarnpkg.com:443"},
	"pypi":    {"pypi.org:443", "files.pythonhosted.org:443"},
	"goproxy": {"proxy.golang.org:443", "sum.golang.org:443", "storage.googleapis.com:443"},
	"crates":  {"crates.io:443", "static.crates.io:443", "index.crates.io:443"},
	"github": {"github.com:443", "api.github.com:443", "codeload.github.com:443",
		"objects.githubusercontent.com:443", "raw.githubusercontent.com:443"},
}

// Presets returns the preset names, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PresetEntries returns the entries a preset expands to (canonical form),
// or false for an unknown preset.
func PresetEntries(name string) ([]string, bool) {
	hosts, ok := presets[name]
	if !ok {
		return nil, false
	}
	return append([]string(nil), hosts...), true
}

// maxEntryLen bounds an entry's text; a host name is at most 253 bytes.
const maxEntryLen = 300

// ParseEntry parses one --allow entry:
//
//	example.com            that host, ports 443 and 80
//	example.com:8443       that host, that port
//	example.com:*          that host, every port
//	*.example.com[:PORT]   every name strictly below example.com (not
//	                       example.com itself: list the apex separately)
//	203.0.113.7[:PORT]     that address (also as an IP literal request)
//	[2001:db8::1]:443      an IPv6 address with a port (bare 2001:db8::1 too)
//	10.0.0.0/8[:PORT]      a CIDR prefix; [fd00::/8]:PORT for IPv6
//	preset:NAME            a named group (see Presets)
//
// Names are matched case-insensitively with a trailing dot ignored; they
// must be plain ASCII host names (letters, digits, '-', '_'; no label may
// start or end with '-'; the last label may not be numeric). A wildcard
// needs at least two labels after "*." ("*.com" is refused). The error is
// a catalog.BadAllow error.
func ParseEntry(s string) (Entry, error) {
	e, err := parseEntry(s)
	if err != nil {
		return Entry{}, catalog.BadAllow.Wrap(err, "%q: %v", clip(s), err)
	}
	return e, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func parseEntry(s string) (Entry, error) {
	if len(s) > maxEntryLen {
		return Entry{}, fmt.Errorf("longer than %d bytes", maxEntryLen)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return Entry{}, fmt.Errorf("empty entry")
	}
	if name, ok := strings.CutPrefix(strings.ToLower(s), "preset:"); ok {
		if _, known := presets[name]; !known {
			return Entry{}, fmt.Errorf("unknown preset %q (known: %s)", name, strings.Join(Presets(), ", "))
		}
		return Entry{Kind: KindPreset, Preset: name}, nil
	}
	host, port, err := splitEntryPort(s)
	if err != nil {
		return Entry{}, err
	}
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil || p.Addr().Zone() != "" {
			return Entry{}, fmt.Errorf("invalid CIDR %q", host)
		}
		return Entry{Kind: KindIP, Prefix: canonPrefix(p), Port: port}, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Entry{}, fmt.Errorf("IPv6 zones are not supported")
		}
		a = a.Unmap()
		return Entry{Kind: KindIP, Prefix: netip.PrefixFrom(a, a.BitLen()), Port: port}, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if dom, ok := strings.CutPrefix(name, "*."); ok {
		if err := checkName(dom); err != nil {
			return Entry{}, err
		}
		if !strings.Contains(dom, ".") {
			return Entry{}, fmt.Errorf("wildcard *.%s is too broad: name a domain of two labels or more", dom)
		}
		return Entry{Kind: KindDomain, Name: dom, Port: port}, nil
	}
	if err := checkName(name); err != nil {
		return Entry{}, err
	}
	return Entry{Kind: KindHost, Name: name, Port: port}, nil
}

// splitEntryPort splits "host[:port]" where host may be a bracketed IPv6
// address or prefix, or a bare IPv6 address without port.
func splitEntryPort(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("missing ']'")
		}
		host, rest := s[1:end], s[end+1:]
		if !strings.Contains(host, ":") {
			return "", 0, fmt.Errorf("brackets are only for IPv6 addresses")
		}
		if rest == "" {
			return host, PortDefault, nil
		}
		p, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return "", 0, fmt.Errorf("unexpected %q after ']'", rest)
		}
		port, err := parseEntryPortNum(p)
		return host, port, err
	}
	if strings.Count(s, ":") > 1 { // bare IPv6, no port
		return s, PortDefault, nil
	}
	host, p, found := strings.Cut(s, ":")
	if !found {
		return host, PortDefault, nil
	}
	if host == "" {
		return "", 0, fmt.Errorf("missing host")
	}
	port, err := parseEntryPortNum(p)
	return host, port, err
}

func parseEntryPortNum(p string) (int, error) {
	if p == "*" {
		return PortAny, nil
	}
	port, err := parsePort(p)
	if err != nil {
		return 0, err
	}
	return port, nil
}

// parsePort parses a decimal port 1..65535 (no sign, no leading zeros
// beyond "0" itself, which is refused).
func parsePort(p string) (int, error) {
	if p == "" || len(p) > 5 {
		return 0, fmt.Errorf("invalid port %q", p)
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("invalid port %q", p)
		}
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || p[0] == '0' {
		return 0, fmt.Errorf("invalid port %q (want 1-65535)", p)
	}
	return n, nil
}

func canonPrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

// checkName refuses anything but a plain lowercase ASCII host name.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("empty host name")
	}
	if len(name) > 253 {
		return fmt.Errorf("host name longer than 253 bytes")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return fmt.Errorf("empty label in host name %q", name)
		}
		if len(l) > 63 {
			return fmt.Errorf("label longer than 63 bytes in host name %q", name)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label starts or ends with '-' in host name %q", name)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("invalid character %q in host name %q", c, name)
			}
		}
	}
	last := labels[len(labels)-1]
	if isNumeric(last) || (len(last) > 2 && last[:2] == "0x" && isHex(last[2:])) {
		return fmt.Errorf("host name %q looks like a number (write IP addresses in dotted or bracketed form)", name)
	}
	return nil
}

func isNumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// String is the canonical text of the entry; ParseEntry(e.String())
// returns e.
func (e Entry) String() string {
	var host string
	switch e.Kind {
	case KindPreset:
		return "preset:" + e.Preset
	case KindHost:
		host = e.Name
	case KindDomain:
		host = "*." + e.Name
	case KindIP:
		if e.Prefix.IsSingleIP() {
			host = e.Prefix.Addr().String()
		} else {
			host = e.Prefix.String()
		}
		if e.Prefix.Addr().Is6() && e.Port != PortDefault {
			host = "[" + host + "]"
		}
	default:
		return "<invalid>"
	}
	switch e.Port {
	case PortDefault:
		return host
	case PortAny:
		return host + ":*"
	default:
		return host + ":" + strconv.Itoa(e.Port)
	}
}

// portOK reports whether the entry's port rule admits port.
func (e Entry) portOK(port int) bool {
	switch e.Port {
	case PortAny:
		return true
	case PortDefault:
		return port == 443 || port == 80
	default:
		return port == e.Port
	}
}

// portText describes the entry's port rule for messages.
func (e Entry) portText() string {
	switch e.Port {
	case PortAny:
		return "every port"
	case PortDefault:
		return "ports 443 and 80"
	default:
		return "port " + strconv.Itoa(e.Port)
	}
}

// hostPort formats host and port for --allow, bracketing IPv6.
func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}
