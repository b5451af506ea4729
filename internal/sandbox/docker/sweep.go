package docker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/moby/moby/client"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// Sweep implements sandbox.Sweeper: it removes the containers this
// backend made (they carry LabelRun and our owner label) for the caller's
// data directory (their state label is stateDir of their run) whose run
// is not active: left by a supervisor that died (SIGKILL, a crash, a
// reboot) before Destroy. Nothing without those labels is touched: not
// another data directory's containers, nor another user's on a shared
// engine. With no engine to reach (none configured, or down) it does
// nothing.
func (b *Backend) Sweep(ctx context.Context, stateDir func(runID string) string, active func(runID string) bool) ([]sandbox.Swept, error) {
	if EngineHost(b.opts.Host, b.opts.Getenv) == "" {
		return nil, nil
	}
	cl, err := b.engine(ctx)
	if catalog.EngineDown.Is(err) || catalog.EnginePermission.Is(err) {
		return nil, nil // nothing of ours runs where we cannot reach
	}
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	res, err := cl.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", labelOwner+"=agentrun").Add("label", LabelRun),
	})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []sandbox.Swept
	var errs []error
	for _, c := range res.Items {
		id, ok := c.Labels[LabelRun]
		if !ok || c.Labels[labelOwner] != "agentrun" || !sameDir(c.Labels[labelState], stateDir(id)) || active(id) {
			continue
		}
		if _, err := cl.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("remove container %s of run %s: %w", shortID(c.ID), id, err))
			continue
		}
		out = append(out, sandbox.Swept{ID: c.ID, RunID: id})
	}
	return out, errors.Join(errs...)
}

func sameDir(label, dir string) bool {
	return label != "" && dir != "" && filepath.Clean(label) == filepath.Clean(dir)
}
