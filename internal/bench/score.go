package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// DefaultAcceptTimeout bounds one acceptance when the fixture says nothing.
const DefaultAcceptTimeout = 5 * time.Minute

// Scorer judges results. The result tree is checked out from the user's
// repository (git plumbing there, never in anything the agent had) into a
// new temporary directory, and the acceptance runs in a fresh sandbox of
// the run's backend, with no network.
type Scorer struct {
	// Backends are the sandbox backends by name.
	Backends map[string]sandbox.Backend
	// Workspaces checks the result tree out.
	Workspaces workspace.Provider
	// TempDir holds the scoring trees while they are used ("" =
	// os.TempDir(); short, for the sandbox's socket paths).
	TempDir string
	// LogDir keeps each acceptance's output as ID.log ("" = not kept).
	LogDir string
	// Path is PATH inside the sandbox (default /usr/local/bin:/usr/bin:/bin).
	Path string
}

// Target is the result to judge.
type Target struct {
	// ID names the scoring (the run's id): its sandbox and its log.
	ID string
	// Repo is the repository holding the result; Base the commit the run
	// started from; Commit the result ("" = nothing was exported: the
	// base is judged).
	Repo, Base, Commit string
	// Backend is the sandbox backend to judge in (the run's).
	Backend string
}

// Score is the judgement of one result.
type Score struct {
	Status  Status
	Message string
	// Gamed are the acceptance files the result changed.
	Gamed []string
	// Unexpected are the expect paths whose content is not the one
	// expected.
	Unexpected []string
	Accept     *Accept
}

// Accept is what the acceptance command did.
type Accept struct {
	ExitCode   int   `json:"exit_code"`
	TimedOut   bool  `json:"timed_out,omitempty"`
	DurationMS int64 `json:"duration_ms"`
	// SandboxMS is the time to check the tree out and to start and remove
	// the sandbox.
	SandboxMS int64 `json:"sandbox_ms"`
	// Output is the end of what it printed (stdout and stderr together).
	Output string `json:"output,omitempty"`
	// Log holds all of it, when kept.
	Log string `json:"log,omitempty"`
}

// outputTail is how much of the acceptance's output a result keeps.
const outputTail = 2048

// Score judges the result t of fixture f: gamed when the result changed
// an acceptance file, failed when an expect hash does not hold or the
// acceptance fails, else passed. The error is for scoring that could not
// be done (the repository, the checkout, the sandbox).
func (s *Scorer) Score(ctx context.Context, f *Fixture, t Target) (Score, error) {
	repo, err := workspace.OpenRepo(ctx, t.Repo)
	if err != nil {
		return Score{}, fmt.Errorf("score %s: %w", t.ID, err)
	}
	result := t.Commit
	if result == "" {
		result = t.Base
	}
	var sc Score
	for _, p := range f.AcceptFiles() {
		before, hadIt, err := repo.FileAt(ctx, t.Base, p)
		if err != nil {
			return Score{}, fmt.Errorf("score %s: %w", t.ID, err)
		}
		after, hasIt, err := repo.FileAt(ctx, result, p)
		if err != nil {
			return Score{}, fmt.Errorf("score %s: %w", t.ID, err)
		}
		if hadIt != hasIt || !bytes.Equal(before, after) {
			sc.Gamed = append(sc.Gamed, p)
		}
	}
	if len(sc.Gamed) > 0 {
		sc.Status, sc.Message = StatusGamed, fmt.Sprintf("the result changed %v, which the acceptance depends on", sc.Gamed)
		return sc, nil
	}
	for _, p := range sortedKeys(f.Expect) {
		data, ok, err := repo.FileAt(ctx, result, p)
		if err != nil {
			return Score{}, fmt.Errorf("score %s: %w", t.ID, err)
		}
		sum := sha256.Sum256(data)
		got := "sha256:" + hex.EncodeToString(sum[:])
		if !ok {
			got = Absent
		}
		if got != f.Expect[p] {
			sc.Unexpected = append(sc.Unexpected, p)
		}
	}
	if sc.Accept, err = s.accept(ctx, f, t, repo.Path(), result); err != nil {
		return Score{}, fmt.Errorf("score %s: %w", t.ID, err)
	}
	switch {
	case sc.Accept.TimedOut:
		sc.Status, sc.Message = StatusFailed, "the acceptance timed out"
	case sc.Accept.ExitCode != 0:
		sc.Status, sc.Message = StatusFailed, fmt.Sprintf("the acceptance failed (exit status %d)", sc.Accept.ExitCode)
	case len(sc.Unexpected) > 0:
		sc.Status, sc.Message = StatusFailed, fmt.Sprintf("%v not as expected", sc.Unexpected)
	default:
		sc.Status = StatusPassed
	}
	return sc, nil
}

// accept runs the acceptance command on a fresh checkout of commit, in a
// fresh sandbox, and removes both.
func (s *Scorer) accept(ctx context.Context, f *Fixture, t Target, repo, commit string) (*Accept, error) {
	b, ok := s.Backends[t.Backend]
	if !ok {
		return nil, fmt.Errorf("sandbox backend %q is not available in this build", t.Backend)
	}
	t0 := time.Now()
	tmp, err := os.MkdirTemp(s.TempDir, "agentrun-accept-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	tree, home := filepath.Join(tmp, "tree"), filepath.Join(tmp, "home")
	if _, err := s.Workspaces.Create(ctx, repo, commit, tree, filepath.Join(tmp, "ws-state")); err != nil {
		return nil, err
	}
	if f.Script != nil {
		// The fixture's own script runs (the result's copy is the same,
		// or the run is gamed); the name is removed first, so a symlink
		// the base has there is replaced, never written through.
		p := filepath.Join(tree, AcceptScript)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if err := os.WriteFile(p, f.Script, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o700); err != nil {
		return nil, err
	}
	sb, err := b.Start(ctx, sandbox.Spec{
		RunID: t.ID, Workspace: tree, Home: home, StateDir: filepath.Join(tmp, "state"),
		Env: s.env(home), Network: sandbox.NetworkNone,
	})
	if err != nil {
		return nil, fmt.Errorf("start the %s sandbox: %w", t.Backend, err)
	}
	setup := time.Since(t0)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = sb.Destroy(dctx)
	}()
	out, logPath, closeLog, err := s.output(t.ID)
	if err != nil {
		return nil, err
	}
	defer closeLog()
	timeout := f.AcceptTimeout
	if timeout == 0 {
		timeout = DefaultAcceptTimeout
	}
	t1 := time.Now()
	er, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: f.Accept, Cwd: sb.WorkDir(), Timeout: timeout}, out, out)
	a := &Accept{DurationMS: time.Since(t1).Milliseconds(), Log: logPath}
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case runner.IsCode(err, runner.CodeExec):
		a.ExitCode = 127
		fmt.Fprintf(out, "agentrun: the acceptance could not be started: %v\n", err)
	case err != nil:
		return nil, fmt.Errorf("acceptance: %w", err)
	default:
		a.ExitCode, a.TimedOut = er.ExitCode, er.TimedOut
	}
	a.Output = out.tail()
	t2 := time.Now()
	a.SandboxMS = (setup + removeTime(ctx, sb, t2)).Milliseconds()
	return a, nil
}

// removeTime destroys sb and says how long that took.
func removeTime(ctx context.Context, sb sandbox.Sandbox, t0 time.Time) time.Duration {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = sb.Destroy(dctx) // (Destroy is safe twice: the deferred one is a no-op)
	return time.Since(t0)
}

// env is the sandbox's complete environment: nothing of this process's
// own but PATH.
func (s *Scorer) env(home string) []string {
	path := s.Path
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{"PATH=" + path, "HOME=" + home, "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=" + filepath.Join(home, "tmp")}
}

// output is where the acceptance's output goes: its tail, kept in memory,
// and the log file when LogDir is set.
func (s *Scorer) output(id string) (*tailWriter, string, func(), error) {
	w := &tailWriter{max: outputTail}
	if s.LogDir == "" {
		return w, "", func() {}, nil
	}
	if err := os.MkdirAll(s.LogDir, 0o755); err != nil {
		return nil, "", nil, err
	}
	p := filepath.Join(s.LogDir, id+".log")
	lf, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, "", nil, err
	}
	w.also = lf
	return w, p, func() { lf.Close() }, nil
}

// tailWriter keeps the last max bytes written to it, and copies every
// write to also (when set). It locks nothing: the runner client delivers
// one Exec's output chunks, of both streams, one at a time.
type tailWriter struct {
	max  int
	buf  []byte
	also io.Writer
}

func (w *tailWriter) Write(p []byte) (int, error) {
	if w.also != nil {
		_, _ = w.also.Write(p)
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) > 2*w.max {
		w.buf = append([]byte(nil), w.buf[len(w.buf)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailWriter) tail() string {
	if len(w.buf) > w.max {
		return string(w.buf[len(w.buf)-w.max:])
	}
	return string(w.buf)
}
