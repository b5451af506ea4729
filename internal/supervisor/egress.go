package supervisor

import (
	"context"
	"fmt"

	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/run"
)

// canonicalAllow validates allowlist entries and returns their canonical
// form (presets expanded, sorted, deduplicated; catalog.BadAllow for a bad
// entry).
func canonicalAllow(entries []string) ([]string, error) {
	a, err := egress.NewAllowlist(entries)
	if err != nil {
		return nil, err
	}
	return a.Entries(), nil
}

// startEgress starts the allowlist proxy for the run on socket; every
// decision is reported to onRecord (journaled as run.EventEgress).
func startEgress(ctx context.Context, r *run.Run, socket string, onRecord func(egress.Record)) (func(context.Context) error, error) {
	a, err := egress.NewAllowlist(r.Sandbox.Allow)
	if err != nil {
		return nil, fmt.Errorf("allowlist: %w", err)
	}
	p := egress.NewProxy(egress.ProxyOptions{Socket: socket, Policy: a, OnRecord: onRecord})
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	return p.Stop, nil
}
