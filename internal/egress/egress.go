package egress

import (
	"context"
	"net"
)

// Request is one connection the sandbox asks for.
type Request struct {
	Host string // as asked (name or IP literal), lowercased, no brackets
	Port int
	IPs  []net.IP // resolved on the host (nil before resolution)
}

// Decision is the answer for one connection.
type Decision struct {
	Allow bool
	Rule  string // the allowlist entry that matched, if any
	Why   string // human reason, e.g. "not in allowlist", "resolves to loopback 127.0.0.1"
	// Code is the machine form of Why (one of the Code* constants), so that
	// callers branch on it and never parse Why.
	Code string
	// IP is the address the decision is about when one address decided it
	// (a denied special-purpose address), in canonical text form.
	IP string
}

// Decision codes.
const (
	CodeAllowed    = "allowed"    // allowed by Rule
	CodeNotListed  = "not_listed" // the name is in no entry
	CodePort       = "port"       // the name is listed, but not for this port
	CodeIPLiteral  = "ip_literal" // an IP literal no IP/CIDR entry covers
	CodeSpecialIP  = "special_ip" // the name resolves to a loopback/private/... address no entry names
	CodeBadHost    = "bad_host"   // the host is not a valid name or address
	CodeUnresolved = "unresolved" // the name did not resolve (Decide got no IPs)
	CodeResolve    = "resolve"    // the proxy could not resolve the name
	CodeUpstream   = "upstream"   // allowed, but the proxy could not reach the upstream
)

// Policy decides connections. Implementations must be safe for concurrent use.
type Policy interface {
	Decide(ctx context.Context, req Request) Decision
}

// NameChecker is an optional Policy capability: decide from the host and
// port alone, before any resolution. The Proxy asks it first so that a name
// the policy would deny is never looked up (DNS queries for unlisted names
// would be a channel out of the sandbox). An allow from CheckName is
// provisional; the Proxy still calls Decide with the resolved IPs.
type NameChecker interface {
	CheckName(ctx context.Context, host string, port int) Decision
}

// Record is one decision with its traffic, reported by the Proxy.
type Record struct {
	Allow   bool   `json:"allowed"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	IP      string `json:"ip,omitempty"` // the address dialed, or the one that caused a denial
	Method  string `json:"method"`       // CONNECT or the HTTP method
	Why     string `json:"why"`
	Rule    string `json:"rule,omitempty"`
	BytesUp int64  `json:"bytes_up"`
	BytesDn int64  `json:"bytes_down"`
	Code    string `json:"code,omitempty"`  // the Decision code (Code* constants)
	Error   string `json:"error,omitempty"` // what went wrong after the decision (dial, upstream)
	// Via is this machine's proxy the connection went through (without
	// its credentials), "" when it went directly.
	Via string `json:"via,omitempty"`
}
