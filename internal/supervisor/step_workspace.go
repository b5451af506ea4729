package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// workspaceStep is the run's workspace: made from the base commit, or the
// one a previous supervisor made, opened again (resume).
//
// Start opens the workspace or makes it. With a provider that can fill an
// existing directory (workspace.Filler) Start only makes the empty
// directory and fills it in the background, so that the sandbox can start
// on it meanwhile; Wait returns once the workspace is complete, and only
// then may anything run in it. Stop waits for the filling to end. Stop is
// safe twice and before Start, and it never removes or changes what the
// workspace holds: a run that fails or stops keeps it for resume.
//
// With Overlay set, a sandbox that can mount its layers (Probe) and a
// run whose workspace mode is not copy, a new workspace is an overlay
// (made at once, not filled in the background: on a cached base commit
// that takes no longer than making the directory); else, or when making
// it fails, the plain copy of Provider, and a warning event says why. A
// run that asked for an overlay by name fails instead. Mode says which
// was used ("overlay", or "copy" and why not an overlay); the run's
// provenance records it.
type workspaceStep struct {
	Provider workspace.Provider
	// Cached, when set, makes the copy instead of Provider from the
	// cache's checkout of the commit, unless the run asked for a copy by
	// name (which leaves the layer cache alone).
	Cached workspace.Provider
	// Overlay is the copy-on-write provider (nil: none in this build).
	Overlay workspace.Provider
	// Probe says whether the run's sandbox can mount an overlay's layers
	// made under scratch (nil: its backend cannot), ProbeDir (on the data
	// directory's file system, shared by the runs).
	Probe    func(ctx context.Context, scratch string) error
	ProbeDir string
	// Removed is the marker agentrun gc leaves when it removed the
	// workspace: such a run is not made again from the base.
	Removed string
	// Record (the run record) gives the repository and base commit; its attempts say whether
	// an agent has had the workspace already.
	Record        *run.Run
	Dir, StateDir string
	Event         func(run.Event)

	// done is closed when the filling has ended (nil: nothing is filled).
	done    chan struct{}
	ws      workspace.Workspace
	err     error
	took    time.Duration
	resumed bool
	mode    string
}

// Start implements resource.
func (s *workspaceStep) Start(ctx context.Context) error {
	t0 := time.Now()
	fill, err := s.open(ctx)
	if err != nil {
		return err
	}
	if fill == nil {
		s.took = time.Since(t0)
		return nil
	}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		s.ws, s.err = fill()
		s.took = time.Since(t0)
	}()
	return nil
}

// Wait returns once the workspace is complete, with how long making it
// took, or why it could not be made.
func (s *workspaceStep) Wait() (time.Duration, error) {
	if s.done != nil {
		<-s.done
	}
	return s.took, s.err
}

// Stop implements resource: the filling has ended when it returns.
func (s *workspaceStep) Stop(context.Context) {
	if s.done != nil {
		<-s.done
	}
}

// Workspace is the complete workspace (after Wait).
func (s *workspaceStep) Workspace() workspace.Workspace { return s.ws }

// Resumed reports a workspace that an earlier attempt's agent had.
func (s *workspaceStep) Resumed() bool { return s.resumed }

// Mode is "overlay" or "copy" (with why it is not an overlay, when one
// could have been), once Start returned.
func (s *workspaceStep) Mode() string { return s.mode }

// Layers are the overlay workspace's layers for the sandbox (nil: the
// workspace is a plain directory), once Start returned.
func (s *workspaceStep) Layers() *sandbox.Layers {
	if s.done != nil {
		// Being filled (while the sandbox starts, which asks for this):
		// a plain checkout, never layered, and s.ws is the filler's to
		// write until it is done.
		return nil
	}
	l, ok := s.ws.(workspace.Layered)
	if !ok {
		return nil
	}
	ls := l.Layers()
	return &sandbox.Layers{Lower: ls.Lower, Upper: ls.Upper, Work: ls.Work}
}

// open opens the workspace a previous supervisor made, or creates it.
// With a provider that can fill an existing directory, it only makes the
// empty directory and returns fill, which completes it.
func (s *workspaceStep) open(ctx context.Context) (fill func() (workspace.Workspace, error), err error) {
	if s.Provider == nil {
		return nil, errMissing("the workspace provider")
	}
	r, dir := s.Record, s.Dir
	defer func() {
		if s.mode == "" {
			s.mode = modeCopy
		}
	}()
	if _, err := os.Lstat(s.Removed); s.Removed != "" && err == nil {
		return nil, errors.New("workspace: agentrun gc removed this run's workspace; submit the task again")
	}
	if _, statErr := os.Lstat(dir); statErr == nil {
		done, err := s.reopen(ctx)
		if err != nil || done {
			return nil, err
		}
	} else if ok, err := s.overlayUsable(ctx); err != nil || ok {
		return nil, err
	}
	p := s.Provider
	if s.Cached != nil && r.Workspace.ModeOrAuto() != run.WorkspaceCopy {
		p = s.Cached
	}
	filler, canFill := p.(workspace.Filler)
	if !canFill {
		if _, err := os.Lstat(dir); err == nil {
			if err := os.Remove(dir); err != nil {
				return nil, fmt.Errorf("workspace: %w", err)
			}
		}
		if s.ws, err = p.Create(ctx, r.Repo, r.Base, dir, s.StateDir); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		return nil, s.ready(ctx, s.ws)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !(errors.Is(err, os.ErrExist) && isEmptyDir(dir)) {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	return func() (workspace.Workspace, error) {
		ws, err := filler.Fill(ctx, r.Repo, r.Base, dir, s.StateDir)
		if err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		return ws, s.ready(ctx, ws)
	}, nil
}

// reopen opens the existing workspace directory (done), or, when the
// making of the workspace never finished and no agent has had it, empties
// it to be made again (not done; the directory is left, empty).
func (s *workspaceStep) reopen(ctx context.Context) (done bool, err error) {
	r, dir, state := s.Record, s.Dir, s.StateDir
	if s.Overlay != nil {
		ws, err := s.Overlay.Open(ctx, dir, state)
		if err == nil {
			if err := s.probe(ctx); err != nil {
				return false, fmt.Errorf("workspace: the sandbox cannot mount this run's overlay workspace: %w", err)
			}
			s.ws, s.resumed, s.mode = ws, len(r.Attempts) > 0, modeOverlay
			return true, nil
		}
		if !errors.Is(err, workspace.ErrNotOverlay) {
			return false, fmt.Errorf("workspace: %w", err)
		}
	}
	// A directory left empty (a supervisor that died right after making
	// it, or while making an overlay) is made again, or filled; anything
	// else was made by Create.
	if _, canFill := s.Provider.(workspace.Filler); canFill && isEmptyDir(dir) {
		if len(r.Attempts) == 0 {
			return s.overlayUsable(ctx)
		}
		return false, nil
	}
	s.ws, err = s.Provider.Open(ctx, dir, state)
	s.resumed = len(r.Attempts) > 0
	if err == nil {
		s.mode = modeCopy
		return true, nil
	}
	if !errors.Is(err, workspace.ErrNoManifest) || len(r.Attempts) > 0 {
		return false, fmt.Errorf("workspace: %w", err)
	}
	// No manifest and no attempt: the making of the workspace never
	// finished (a supervisor killed while preparing) and no agent has had
	// it. Make it again, from nothing.
	s.Event(run.NewEvent(run.EventWarning, "the workspace was left half made; making it again", nil))
	s.resumed = false
	if err := removeContents(dir); err != nil {
		return false, fmt.Errorf("workspace: %w", err)
	}
	return s.overlayUsable(ctx)
}

// Workspace modes.
const (
	modeOverlay = "overlay"
	modeCopy    = "copy"
)

// overlayUsable makes the run's new workspace an overlay when the run
// may have one (its workspace mode is not copy) and the sandbox can mount
// one, and says whether it did. When not, Mode says why, and so does a
// warning event when the sandbox could have mounted one. A run that asked
// for an overlay by name gets none of that fallback: the error says why
// it cannot have one.
func (s *workspaceStep) overlayUsable(ctx context.Context) (bool, error) {
	asked := s.Record.Workspace.ModeOrAuto()
	switch {
	case asked == run.WorkspaceCopy:
		s.mode = modeCopy + ": asked for (workspace copy)"
		return false, nil
	case s.Overlay == nil && asked == run.WorkspaceOverlay:
		return false, errors.New("workspace: an overlay was asked for, and this build has no overlay workspaces")
	case s.Overlay == nil:
		return false, nil
	case s.Probe == nil && asked == run.WorkspaceOverlay:
		return false, fmt.Errorf("workspace: an overlay was asked for, and the %s sandbox mounts no overlay", s.Record.Sandbox.Backend)
	case s.Probe == nil:
		// A backend that mounts no overlay (host): the copy is its
		// workspace, nothing to warn about.
		s.mode = modeCopy + ": the " + s.Record.Sandbox.Backend + " sandbox mounts no overlay"
		return false, nil
	}
	why := ""
	if err := s.probe(ctx); err != nil {
		why = err.Error()
	} else {
		if _, err := os.Lstat(s.Dir); err == nil {
			if err := os.Remove(s.Dir); err != nil {
				why = err.Error()
			}
		}
		if why == "" {
			ws, err := s.Overlay.Create(ctx, s.Record.Repo, s.Record.Base, s.Dir, s.StateDir)
			if err == nil {
				s.ws, s.mode = ws, modeOverlay
				return true, s.ready(ctx, ws)
			}
			why = "making the overlay failed: " + err.Error()
		}
	}
	if asked == run.WorkspaceOverlay {
		return false, errors.New("workspace: an overlay was asked for, and it cannot be had: " + why)
	}
	s.mode = modeCopy + ": " + why
	s.Event(run.NewEvent(run.EventWarning, "the workspace is a full copy of the repository, not an overlay: "+why, map[string]any{"workspace": s.mode}))
	return false, nil
}

// ready makes the new workspace what the run asked for, before anything
// runs in it: it copies in the git-ignored files of the user's working
// tree the run's provenance lists, and with full history gives it the
// user's object directories (which the sandbox shows read-only).
func (s *workspaceStep) ready(ctx context.Context, ws workspace.Workspace) error {
	r := s.Record
	if files := r.Provenance.Included; len(files) > 0 {
		if err := workspace.Include(ctx, ws, r.Repo, files); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
	}
	if r.Workspace.HistoryOrShallow() == run.HistoryFull {
		if err := workspace.ShareHistory(ws, r.Workspace.Objects); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
	}
	return nil
}

// probe asks the sandbox whether it can mount an overlay's layers, made
// beside the run's own (on their file system).
func (s *workspaceStep) probe(ctx context.Context) error {
	if s.Probe == nil {
		return errors.New("the sandbox backend cannot mount an overlay")
	}
	dir := s.ProbeDir
	if dir == "" {
		dir = s.StateDir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return s.Probe(ctx, dir)
}

// removeContents removes everything inside dir (os.RemoveAll never
// follows a symlink).
func removeContents(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := workspace.RemoveTree(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

// isEmptyDir reports a directory (not a symlink) with nothing in it.
func isEmptyDir(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}
