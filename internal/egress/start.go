package egress

import (
	"context"
	"fmt"
)

// StartProxy starts an allowlist proxy for one run on a unix socket: the
// policy is the run's canonical allowlist, an admitted connection goes
// through upstream's proxy where it names one, every decision goes to
// onRecord. It returns the proxy's Stop.
func StartProxy(ctx context.Context, allow []string, socket string, upstream Upstream, onRecord func(Record)) (stop func(context.Context) error, err error) {
	a, err := NewAllowlist(allow)
	if err != nil {
		return nil, fmt.Errorf("allowlist: %w", err)
	}
	p := NewProxy(ProxyOptions{Socket: socket, Policy: a, Upstream: upstream.Func, UpstreamRoots: upstream.Roots, OnRecord: onRecord})
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	return p.Stop, nil
}
