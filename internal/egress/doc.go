// Package egress decides and carries the sandbox's network traffic.
//
// In network mode "allowlist" a sandbox has only loopback; the in-sandbox
// runner relays each connection over a unix socket to the Proxy here, on
// the host. The Proxy serves HTTP CONNECT and absolute-URI HTTP, resolves
// each name once on the host, asks the Policy, dials the checked address
// itself (a later resolution cannot move the connection: no DNS
// rebinding), and reports every decision as a Record for the run journal.
//
// The Policy is an Allowlist built from --allow entries, presets and each
// agent profile's API hosts (see ParseEntry for the syntax). Its rules:
//
//   - An entry without a port allows 443 and 80 only; HOST:PORT that port;
//     HOST:* every port.
//   - *.example.com matches names strictly below example.com, never
//     example.com itself; list the apex as its own entry.
//   - Names are compared lowercase with one trailing dot trimmed; names that
//     are not plain ASCII host names are refused (no IDNA).
//   - Every address a name resolves to must be an ordinary public address.
//     Loopback, private (RFC 1918, fc00::/7), link-local (169.254/16 with
//     the cloud metadata address, fe80::/10), multicast, unspecified, CGNAT
//     (100.64/10), NAT64, 6to4, Teredo, documentation and reserved ranges,
//     also in IPv4-mapped IPv6 form, are denied unless an IP/CIDR entry
//     names that address (with the port). One bad address denies the name.
//   - An IP literal is denied unless an IP/CIDR entry covers it.
//   - A name not in the allowlist is never resolved (the policy's
//     NameChecker answers first), so DNS is no channel out either.
//
// Presets (--allow preset:NAME) are HTTPS-only host groups; goproxy
// includes storage.googleapis.com, where proxy.golang.org redirects module
// downloads.
//
// Summarize and SuggestFlag turn a run's records into what
// `agentrun egress ID` prints.
//
// Limits: a CONNECT tunnel reaches only the checked address, but the TLS
// inside is opaque; the server name a client sends there is not checked
// against the decided host.
//
// This package must never dial an address the Policy did not decide on,
// never resolve a name twice for one connection, and never forward a
// request it could not parse.
package egress
