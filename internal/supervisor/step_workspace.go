package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrun/agentrun/internal/run"
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
type workspaceStep struct {
	Provider workspace.Provider
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

// open opens the workspace a previous supervisor made, or creates it.
// With a provider that can fill an existing directory, it only makes the
// empty directory and returns fill, which completes it.
func (s *workspaceStep) open(ctx context.Context) (fill func() (workspace.Workspace, error), err error) {
	if s.Provider == nil {
		return nil, errMissing("the workspace provider")
	}
	r, dir, state := s.Record, s.Dir, s.StateDir
	filler, canFill := s.Provider.(workspace.Filler)
	exists := false
	if _, statErr := os.Lstat(dir); statErr == nil {
		exists = true
		// A directory left empty (a supervisor that died right after
		// making it) is filled; anything else was made by Create.
		if !canFill || !isEmptyDir(dir) {
			s.ws, err = s.Provider.Open(ctx, dir, state)
			s.resumed = len(r.Attempts) > 0
			if err == nil {
				return nil, nil
			}
			if !errors.Is(err, workspace.ErrNoManifest) || len(r.Attempts) > 0 {
				return nil, fmt.Errorf("workspace: %w", err)
			}
			// No manifest and no attempt: the making of the workspace never
			// finished (a supervisor killed while preparing) and no agent
			// has had it. Make it again, from nothing.
			s.Event(run.NewEvent(run.EventWarning, "the workspace was left half made; making it again", nil))
			s.resumed = false
			if err := removeContents(dir); err != nil {
				return nil, fmt.Errorf("workspace: %w", err)
			}
			if !canFill {
				if err := os.Remove(dir); err != nil {
					return nil, fmt.Errorf("workspace: %w", err)
				}
			}
		}
	}
	if canFill && !exists {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
	}
	if !canFill {
		if s.ws, err = s.Provider.Create(ctx, r.Repo, r.Base, dir, state); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		return nil, nil
	}
	return func() (workspace.Workspace, error) {
		ws, err := filler.Fill(ctx, r.Repo, r.Base, dir, state)
		if err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		return ws, nil
	}, nil
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
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
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
