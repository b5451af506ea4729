package egress

import (
	"fmt"
	"net/netip"
	"sort"
)

// Summary is what `agentrun egress ID` prints: the hosts a run reached and
// the hosts it was denied, each denial with the flag that would allow it.
type Summary struct {
	Allowed []AllowedHost `json:"allowed"`
	Denied  []DeniedHost  `json:"denied"`
}

// AllowedHost is one host:port the run reached.
type AllowedHost struct {
	Host    string   `json:"host"`
	Port    int      `json:"port"`
	Count   int      `json:"count"` // connections and forwarded requests
	BytesUp int64    `json:"bytes_up"`
	BytesDn int64    `json:"bytes_down"`
	Rules   []string `json:"rules,omitempty"` // entries that allowed it
	Errors  int      `json:"errors,omitempty"`
	// Via is this machine's proxy its connections went through, if any.
	Via string `json:"via,omitempty"`
}

// DeniedHost is one host:port the run was denied.
type DeniedHost struct {
	Host  string `json:"host"`
	Port  int    `json:"port"`
	Count int    `json:"count"`
	Why   string `json:"why"`            // the reason of the latest denial
	Code  string `json:"code,omitempty"` // its Code* constant
	Flag  string `json:"flag,omitempty"` // e.g. "--allow example.com:443"; "" if no entry can allow it
}

// Summarize groups records by host and port, allowed and denied apart,
// each list sorted by host then port.
func Summarize(records []Record) Summary {
	type key struct {
		host string
		port int
	}
	allowed := map[key]*AllowedHost{}
	denied := map[key]*DeniedHost{}
	var s Summary
	for _, r := range records {
		k := key{r.Host, r.Port}
		if r.Allow {
			a := allowed[k]
			if a == nil {
				a = &AllowedHost{Host: r.Host, Port: r.Port}
				allowed[k] = a
			}
			a.Count++
			a.BytesUp += r.BytesUp
			a.BytesDn += r.BytesDn
			if r.Error != "" {
				a.Errors++
			}
			if r.Via != "" {
				a.Via = r.Via
			}
			if r.Rule != "" && !contains(a.Rules, r.Rule) {
				a.Rules = append(a.Rules, r.Rule)
			}
			continue
		}
		d := denied[k]
		if d == nil {
			d = &DeniedHost{Host: r.Host, Port: r.Port}
			denied[k] = d
		}
		d.Count++
		d.Why, d.Code = r.Why, r.Code
		if f := SuggestFlag(r); f != "" || d.Flag == "" {
			d.Flag = f
		}
	}
	for _, a := range allowed {
		sort.Strings(a.Rules)
		s.Allowed = append(s.Allowed, *a)
	}
	for _, d := range denied {
		s.Denied = append(s.Denied, *d)
	}
	sort.Slice(s.Allowed, func(i, j int) bool {
		return less(s.Allowed[i].Host, s.Allowed[i].Port, s.Allowed[j].Host, s.Allowed[j].Port)
	})
	sort.Slice(s.Denied, func(i, j int) bool {
		return less(s.Denied[i].Host, s.Denied[i].Port, s.Denied[j].Host, s.Denied[j].Port)
	})
	return s
}

func less(h1 string, p1 int, h2 string, p2 int) bool {
	if h1 != h2 {
		return h1 < h2
	}
	return p1 < p2
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SuggestFlag returns the --allow flag that would allow a denied record,
// the narrowest one: "--allow HOST:PORT" for a name not listed or listed
// for other ports, "--allow IP:PORT" for an IP literal, and for a name
// that resolved to a loopback/private/... address the IP entry it needs
// ("--allow 10.0.0.7:5432"; the name is listed already). It is "" for an
// allowed record and for denials no entry can fix (an invalid host, a
// name that did not resolve).
func SuggestFlag(r Record) string {
	if r.Allow {
		return ""
	}
	switch r.Code {
	case CodeNotListed, CodePort:
		if _, _, err := normalizeHost(r.Host); err != nil {
			return ""
		}
		return "--allow " + hostPort(r.Host, r.Port)
	case CodeIPLiteral, CodeSpecialIP:
		ip := r.IP
		if ip == "" && r.Code == CodeIPLiteral {
			ip = r.Host
		}
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return ""
		}
		return fmt.Sprintf("--allow %s", hostPort(a.Unmap().String(), r.Port))
	}
	return ""
}

// String is the record as one journal line, e.g.
//
//	allowed CONNECT api.github.com:443 (140.82.112.5) by api.github.com:443, 517 B up, 4.2 KiB down
//	denied CONNECT evil.example:443: evil.example is not in the allowlist
func (r Record) String() string {
	hp := hostPort(r.Host, r.Port)
	if !r.Allow {
		return fmt.Sprintf("denied %s %s: %s", r.Method, hp, r.Why)
	}
	s := fmt.Sprintf("allowed %s %s", r.Method, hp)
	if r.IP != "" && r.IP != r.Host {
		s += " (" + r.IP + ")"
	}
	if r.Rule != "" {
		s += " by " + r.Rule
	}
	s += ", " + byteSize(r.BytesUp) + " up, " + byteSize(r.BytesDn) + " down"
	if r.Error != "" {
		s += ": " + r.Error
	}
	return s
}

func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
