// Package egress decides and carries the sandbox's network traffic: an
// allowlist Policy that says allow or deny for one connection and why, and
// a Proxy (HTTP CONNECT and absolute-URI HTTP) on a host unix socket that
// asks the Policy for every connection and reports each decision.
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
}

// Policy decides connections. Implementations must be safe for concurrent use.
type Policy interface {
	Decide(ctx context.Context, req Request) Decision
}

// Record is one decision with its traffic, reported by the Proxy.
type Record struct {
	Allow   bool   `json:"allowed"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	IP      string `json:"ip,omitempty"`
	Method  string `json:"method"` // CONNECT or the HTTP method
	Why     string `json:"why"`
	Rule    string `json:"rule,omitempty"`
	BytesUp int64  `json:"bytes_up"`
	BytesDn int64  `json:"bytes_down"`
}
