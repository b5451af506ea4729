package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/workspace"
)

// runDisk is a run's disk use, as list and status show it ("disk" under
// --json).
type runDisk struct {
	// Bytes is what the run directory holds: records, logs, HOME, patch
	// and workspace (allocated blocks; a file with several names once).
	Bytes int64 `json:"bytes"`
	// WorkspaceBytes is the part of it that is the workspace and its
	// state: with an overlay, only the upper layer (what the agent
	// changed); the shared lower layer is the cache's (agentrun doctor).
	WorkspaceBytes int64 `json:"workspace_bytes"`
	// Workspace is overlay, copy, removed (by agentrun gc) or none.
	Workspace string `json:"workspace"`
	// Partial: the count stopped at its bound; the figures are a floor.
	Partial bool `json:"partial,omitempty"`
}

// Disk use is counted without following links and within bounds: at
// most diskEntries entries per run, and in list no more than diskBudget
// of counting altogether (the runs past it show no figure).
const (
	diskEntries = 200000
	diskBudget  = 3 * time.Second
)

// workspaceParts are the run directory's entries that are its workspace.
var workspaceParts = []string{"workspace", "ws-state"}

// diskOf counts r's disk use.
func diskOf(l layout.Layout, r *run.Run) *runDisk {
	d := &runDisk{Workspace: workspaceKind(l, r)}
	dir := l.RunDir(r.ID)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return d
	}
	left := diskEntries
	for _, e := range ents {
		n, seen, complete := workspace.DiskUse(filepath.Join(dir, e.Name()), max(left, 1))
		left -= seen
		d.Bytes += n
		d.Partial = d.Partial || !complete
		for _, w := range workspaceParts {
			if e.Name() == w {
				d.WorkspaceBytes += n
			}
		}
	}
	if n, _, _ := workspace.DiskUse(dir, 1); n > 0 {
		d.Bytes += n // the directory itself
	}
	return d
}

// workspaceKind says what r's workspace is: as the run recorded it, or
// what is on disk.
func workspaceKind(l layout.Layout, r *run.Run) string {
	if _, err := os.Lstat(l.WorkspaceRemoved(r.ID)); err == nil {
		return "removed"
	}
	if _, err := os.Lstat(l.Workspace(r.ID)); err != nil {
		return "none"
	}
	if m, _, _ := strings.Cut(r.Provenance.Enforced["workspace"], ":"); m == "overlay" {
		return m
	}
	return "copy"
}

// diskCounter counts runs' disk use within diskBudget.
type diskCounter struct {
	l     layout.Layout
	until time.Time
}

func newDiskCounter(l layout.Layout) *diskCounter {
	return &diskCounter{l: l, until: time.Now().Add(diskBudget)}
}

// of is r's disk use, or nil once the budget is spent.
func (c *diskCounter) of(r *run.Run) *runDisk {
	if time.Now().After(c.until) {
		return nil
	}
	return diskOf(c.l, r)
}

// diskCell is the DISK column of list: the run's total, and its
// workspace's share when it has one.
func diskCell(d *runDisk) string {
	if d == nil {
		return "?"
	}
	s := humanBytes(d.Bytes)
	if d.Partial {
		s = "≥" + s
	}
	return s
}

// diskLine is status's disk line.
func diskLine(d *runDisk, mode string) string {
	s := humanBytes(d.Bytes) + " in all"
	if d.Partial {
		s = "at least " + s
	}
	switch d.Workspace {
	case "overlay":
		s += ", workspace " + humanBytes(d.WorkspaceBytes) + " (an overlay: the changes only)"
	case "copy":
		s += ", workspace " + humanBytes(d.WorkspaceBytes) + " (a full copy"
		if _, why, ok := strings.Cut(mode, ": "); ok {
			s += ": " + oneLine(why, 80)
		}
		s += ")"
	case "removed":
		s += " (the workspace was removed by agentrun gc)"
	}
	return s
}

// workspaceLine is status's workspace line: what the run asked of its
// workspace beyond the defaults ("" when nothing): the full history, the
// files included from the working tree.
func workspaceLine(r *run.Run) string {
	var parts []string
	if m := r.Workspace.Mode; m == run.WorkspaceCopy || m == run.WorkspaceOverlay {
		parts = append(parts, m+" asked for")
	}
	if r.Workspace.History == run.HistoryFull {
		parts = append(parts, "full history (the repository's objects, read-only)")
	}
	if inc := r.Provenance.Included; len(inc) > 0 {
		var n int64
		for _, f := range inc {
			n += f.Size
		}
		s := fmt.Sprintf("%d ignored file", len(inc))
		if len(inc) != 1 {
			s += "s"
		}
		parts = append(parts, s+" included ("+humanBytes(n)+", never exported)")
	}
	return strings.Join(parts, "; ")
}
