package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// safetyConfig is passed to every git invocation: no hooks, no fsmonitor,
// no untracked cache, no split index, no signing prompts, no pager.
var safetyConfig = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.untrackedCache=false",
	"-c", "core.splitIndex=false",
	"-c", "core.pager=cat",
	"-c", "commit.gpgSign=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
}

// keptGitEnv are the GIT_* variables passed through from our environment:
// they say which configuration files to read (the user's identity lives
// there). Every other GIT_* variable (GIT_DIR, GIT_INDEX_FILE,
// GIT_CONFIG_PARAMETERS, ...) is dropped so that git acts only on the
// repository and index we name.
var keptGitEnv = map[string]bool{
	"GIT_CONFIG_GLOBAL":   true,
	"GIT_CONFIG_NOSYSTEM": true,
	"GIT_CONFIG_SYSTEM":   true,
}

// gitEnv is the environment of every git process, plus extra.
func gitEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") && !keptGitEnv[name] {
			continue
		}
		if name == "LC_ALL" || name == "LANG" || name == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "GIT_NO_REPLACE_OBJECTS=1")
	return append(env, extra...)
}

// gitCmd is one git invocation in directory dir.
type gitCmd struct {
	dir   string
	args  []string
	env   []string // extra environment
	stdin io.Reader
}

// gitError is a failed git command with its stderr.
type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("git %s: %s", firstArg(e.args), msg)
}

func (e *gitError) Unwrap() error { return e.err }

func firstArg(args []string) string {
	for len(args) > 2 && args[0] == "-c" { // the command, after its configuration
		args = args[2:]
	}
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// command builds the exec.Cmd with the safety flags.
func (g gitCmd) command(ctx context.Context) *exec.Cmd {
	args := make([]string, 0, len(safetyConfig)+len(g.args))
	args = append(args, safetyConfig...)
	args = append(args, g.args...)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = g.dir
	cmd.Env = gitEnv(g.env...)
	cmd.Stdin = g.stdin
	return cmd
}

// run runs the command and returns its stdout.
func (g gitCmd) run(ctx context.Context) ([]byte, error) {
	cmd := g.command(ctx)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &gitError{args: g.args, stderr: stderr.String(), err: err}
	}
	return stdout.Bytes(), nil
}

// git runs git in dir with args and returns trimmed stdout.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := gitCmd{dir: dir, args: args}.run(ctx)
	return strings.TrimSpace(string(out)), err
}

// exitCode is the exit status of a failed git command, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
