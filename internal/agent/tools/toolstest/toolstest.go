// Package toolstest is a minimal runner.Client over a local directory, for
// the agent's tests where no sandbox backend is wanted (unit tests of tools
// and loop rules). It runs commands on the host with the directory as the
// workspace; it is no sandbox and must never be used outside tests.
package toolstest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
)

// Dir serves runner ops in Root.
type Dir struct {
	Root string
	Env  []string // base environment of commands
}

// New returns a client over root.
func New(root string) *Dir {
	return &Dir{Root: root, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root}}
}

func opErr(code, msg string) error { return &runner.OpError{Code: code, Message: msg} }

func (d *Dir) resolve(p string) (string, error) {
	if p == "" {
		p = "."
	}
	var full string
	if filepath.IsAbs(p) {
		full = filepath.Clean(p)
	} else {
		full = filepath.Join(d.Root, p)
	}
	rel, err := filepath.Rel(d.Root, full)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", opErr(runner.CodeEscape, p+" is outside the workspace")
	}
	// Refuse symlinked components.
	cur := d.Root
	if rel != "." {
		parts := strings.Split(rel, "/")
		for _, part := range parts {
			cur = filepath.Join(cur, part)
			fi, err := os.Lstat(cur)
			if err != nil {
				break
			}
			if fi.Mode()&os.ModeSymlink != 0 {
				return "", opErr(runner.CodeSymlink, p+" goes through a symlink")
			}
		}
	}
	return full, nil
}

func fsErr(err error, p string) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return opErr(runner.CodeNotFound, p+": no such file or directory")
	case errors.Is(err, fs.ErrPermission):
		return opErr(runner.CodePermission, p+": permission denied")
	case errors.Is(err, syscall.EISDIR):
		return opErr(runner.CodeIsDir, p+" is a directory")
	case errors.Is(err, syscall.ENOTDIR):
		return opErr(runner.CodeNotDir, p+": not a directory")
	}
	return err
}

type capWriter struct {
	w    io.Writer
	n    int64
	cap  int64
	tail bytes.Buffer
	mu   *sync.Mutex
	cut  bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	q := p
	if c.n+int64(len(q)) > c.cap {
		q = q[:max(0, c.cap-c.n)]
		c.cut = true
	}
	c.n += int64(len(q))
	if c.w != nil && len(q) > 0 {
		c.w.Write(q)
	}
	c.tail.Write(q)
	if c.tail.Len() > 64<<10 {
		b := c.tail.Bytes()[c.tail.Len()-(64<<10):]
		c.tail = *bytes.NewBuffer(append([]byte(nil), b...))
	}
	return n, nil
}

// Exec runs the command in its own process group and kills the group when
// it returns, times out or is cancelled.
func (d *Dir) Exec(ctx context.Context, req runner.ExecRequest, stdout, stderr io.Writer) (*runner.ExecResult, error) {
	var cmd *exec.Cmd
	switch {
	case req.Shell != "" && len(req.Argv) == 0:
		cmd = exec.Command("/bin/sh", "-c", req.Shell)
	case len(req.Argv) > 0 && req.Shell == "":
		cmd = exec.Command(req.Argv[0], req.Argv[1:]...)
	default:
		return nil, opErr(runner.CodeBadRequest, "give argv or shell")
	}
	cwd, err := d.resolve(req.Cwd)
	if err != nil {
		return nil, err
	}
	cmd.Dir = cwd
	cmd.Env = append(append([]string(nil), d.Env...), req.Env...)
	cmd.Stdin = bytes.NewReader(req.Stdin)
	capN := req.OutputCap
	if capN <= 0 {
		capN = runner.DefaultOutputCap
	}
	var mu sync.Mutex
	ow := &capWriter{w: stdout, cap: capN, mu: &mu}
	ew := &capWriter{w: stderr, cap: capN, mu: &mu}
	// Own pipes, so Wait returns when the command exits even if a
	// background child still holds them; the group is then killed.
	or, opw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	er, epw, err := os.Pipe()
	if err != nil {
		or.Close()
		opw.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = opw, epw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	err = cmd.Start()
	opw.Close()
	epw.Close()
	if err != nil {
		or.Close()
		er.Close()
		return nil, opErr(runner.CodeExec, err.Error())
	}
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); io.Copy(ow, or); or.Close() }()
	go func() { defer copies.Done(); io.Copy(ew, er); er.Close() }()
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var tc <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		tc = t.C
	}
	res := &runner.ExecResult{}
	kill := func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		grace := req.KillGrace
		if grace <= 0 {
			grace = runner.DefaultKillGrace
		}
		select {
		case <-done:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
	}
	select {
	case err = <-done:
		_ = err
	case <-tc:
		res.TimedOut = true
		kill()
	case <-ctx.Done():
		res.Cancelled = true
		kill()
	}
	// Background children end with the command.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	copies.Wait()
	res.Duration = time.Since(start)
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		res.ExitCode, res.Signal = -1, ws.Signal().String()
	default:
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	mu.Lock()
	res.Stdout, res.Stderr = ow.tail.Bytes(), ew.tail.Bytes()
	res.Truncated = ow.cut || ew.cut
	mu.Unlock()
	return res, nil
}

func (d *Dir) ReadFile(ctx context.Context, req runner.ReadFileRequest) (*runner.ReadFileResult, error) {
	p, err := d.resolve(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fsErr(err, req.Path)
	}
	if fi.IsDir() {
		return nil, opErr(runner.CodeIsDir, req.Path+" is a directory")
	}
	if !fi.Mode().IsRegular() {
		return nil, opErr(runner.CodeNotRegular, req.Path+" is not a regular file")
	}
	maxB := req.MaxBytes
	if maxB <= 0 {
		maxB = runner.DefaultReadCap
	}
	if req.Limit == 0 && fi.Size() > maxB {
		return nil, opErr(runner.CodeTooLarge, req.Path+" is too large")
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fsErr(err, req.Path)
	}
	defer f.Close()
	lim := req.Limit
	if lim == 0 {
		lim = maxB
	}
	data, err := io.ReadAll(io.NewSectionReader(f, req.Offset, lim))
	if err != nil {
		return nil, err
	}
	return &runner.ReadFileResult{Data: data, Size: fi.Size(), EOF: req.Offset+int64(len(data)) >= fi.Size()}, nil
}

func (d *Dir) WriteFile(ctx context.Context, req runner.WriteFileRequest) (*runner.WriteFileResult, error) {
	p, err := d.resolve(req.Path)
	if err != nil {
		return nil, err
	}
	mode := os.FileMode(req.Mode)
	if mode == 0 {
		mode = 0o644
	}
	_, statErr := os.Lstat(p)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fsErr(err, req.Path)
	}
	if err := os.WriteFile(p, req.Data, mode); err != nil {
		return nil, fsErr(err, req.Path)
	}
	_ = os.Chmod(p, mode)
	return &runner.WriteFileResult{Created: statErr != nil, Size: int64(len(req.Data))}, nil
}

func (d *Dir) EditFile(ctx context.Context, req runner.EditFileRequest) (*runner.EditFileResult, error) {
	p, err := d.resolve(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fsErr(err, req.Path)
	}
	if !fi.Mode().IsRegular() {
		return nil, opErr(runner.CodeNotRegular, req.Path+" is not a regular file")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fsErr(err, req.Path)
	}
	switch n := strings.Count(string(b), req.Old); {
	case n == 0:
		return nil, opErr(runner.CodeNoMatch, "old text not found in "+req.Path)
	case n > 1:
		return nil, opErr(runner.CodeNotUnique, "old text occurs more than once in "+req.Path)
	}
	out := strings.Replace(string(b), req.Old, req.New, 1)
	if err := os.WriteFile(p, []byte(out), fi.Mode().Perm()); err != nil {
		return nil, fsErr(err, req.Path)
	}
	return &runner.EditFileResult{Size: int64(len(out))}, nil
}

func entryType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	}
	return "other"
}

func (d *Dir) ListDir(ctx context.Context, req runner.ListDirRequest) (*runner.ListDirResult, error) {
	p, err := d.resolve(req.Path)
	if err != nil {
		return nil, err
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 1000
	}
	res := &runner.ListDirResult{Entries: []runner.DirEntry{}}
	err = filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return fsErr(err, req.Path)
		}
		if path == p {
			return nil
		}
		if len(res.Entries) >= limit {
			res.Truncated = true
			return filepath.SkipAll
		}
		rel, _ := filepath.Rel(p, path)
		fi, _ := e.Info()
		de := runner.DirEntry{Name: rel, Type: entryType(e.Type())}
		if fi != nil {
			de.Size, de.Mode, de.ModTime = fi.Size(), uint32(fi.Mode()), fi.ModTime()
		}
		res.Entries = append(res.Entries, de)
		if e.IsDir() && (!req.Recursive || e.Name() == ".git") {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(res.Entries, func(i, j int) bool { return res.Entries[i].Name < res.Entries[j].Name })
	return res, nil
}

func (d *Dir) Grep(ctx context.Context, req runner.GrepRequest) (*runner.GrepResult, error) {
	pat := req.Pattern
	if req.IgnoreCase {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, opErr(runner.CodeBadRequest, err.Error())
	}
	p, err := d.resolve(req.Path)
	if err != nil {
		return nil, err
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 200
	}
	res := &runner.GrepResult{Matches: []runner.GrepMatch{}}
	err = filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.IsDir() {
			if e.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(d.Root, path)
		if req.Glob != "" {
			m1, _ := filepath.Match(req.Glob, e.Name())
			m2, _ := filepath.Match(req.Glob, rel)
			if !m1 && !m2 {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil || bytes.IndexByte(b, 0) >= 0 {
			return nil
		}
		for i, line := range strings.Split(string(b), "\n") {
			if re.MatchString(line) {
				if len(res.Matches) >= limit {
					res.Truncated = true
					return filepath.SkipAll
				}
				res.Matches = append(res.Matches, runner.GrepMatch{Path: rel, Line: i + 1, Text: line})
			}
		}
		return nil
	})
	return res, err
}

func (d *Dir) Stat(ctx context.Context, req runner.StatRequest) (*runner.StatResult, error) {
	p, err := d.resolve(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &runner.StatResult{}, nil
	}
	if err != nil {
		return nil, fsErr(err, req.Path)
	}
	return &runner.StatResult{Exists: true, Type: entryType(fi.Mode()), Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), ModTime: fi.ModTime()}, nil
}

func (d *Dir) Close() error { return nil }

var _ runner.Client = (*Dir)(nil)
