package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/runner"
)

// Env is what a tool acts through.
type Env struct {
	Runner  runner.Client
	WorkDir string // workspace path inside the sandbox; bash's cwd
	// CmdEnv is added to the sandbox's environment for bash (KEY=VALUE).
	CmdEnv []string
	// SpillDir is a host directory holding outputs the loop capped; the
	// model reads them back with read_file SpillPrefix+name.
	SpillDir string
}

// SpillPrefix marks a path naming a spill file rather than a workspace file.
const SpillPrefix = "agentrun-spill://"

// Kind classifies a Result.
type Kind string

const (
	KindOK                 Kind = ""
	KindFailed             Kind = "failed"              // the tool ran and failed (model can act)
	KindBadArguments       Kind = "bad_arguments"       // missing or mistyped arguments
	KindMalformedArguments Kind = "malformed_arguments" // arguments are not a JSON object
	KindUnknownTool        Kind = "unknown_tool"
)

// Result is what a tool call gives back to the model.
type Result struct {
	Output string
	Kind   Kind
	// Changed lists the files a successful call wrote.
	Changed []string
	// Command is the bash command run (bash only), with its exit code.
	Command  string
	ExitCode int
	// Finish ends the run with Summary (finish only).
	Finish  bool
	Summary string
}

// Tool is one tool.
type Tool struct {
	Name        string
	Description string
	Params      []Param
	Run         func(ctx context.Context, env *Env, a Args) (Result, error)
}

// All returns every tool, in the order offered to the model.
func All() []*Tool {
	return []*Tool{readFile, writeFile, editFile, applyEdits, listDir, grepTool, bashTool, finishTool}
}

// Lookup finds a tool by name.
func Lookup(name string) *Tool {
	for _, t := range All() {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Definitions are the tool definitions offered to the model.
func Definitions() []provider.Tool {
	var out []provider.Tool
	for _, t := range All() {
		out = append(out, provider.Tool{Name: t.Name, Description: strings.TrimSpace(t.Description), Parameters: t.Schema()})
	}
	return out
}

// aliases map names models trained on other harnesses often use.
var aliases = map[string]string{
	"shell": "bash", "run_command": "bash", "execute_command": "bash", "run_shell_command": "bash", "terminal": "bash",
	"view": "read_file", "open_file": "read_file", "cat": "read_file",
	"create_file": "write_file",
	"str_replace": "edit_file", "replace_in_file": "edit_file",
	"ls": "list_dir", "list_directory": "list_dir", "list_files": "list_dir",
	"search": "grep", "search_files": "grep",
	"attempt_completion": "finish", "task_complete": "finish",
}

// Resolve maps a called name to a tool: exact, then without a
// "functions."-style prefix and case-insensitively, then by alias.
func Resolve(name string) *Tool {
	if t := Lookup(name); t != nil {
		return t
	}
	n := strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndexByte(n, '.'); i >= 0 {
		n = n[i+1:]
	}
	if t := Lookup(n); t != nil {
		return t
	}
	if a, ok := aliases[n]; ok {
		return Lookup(a)
	}
	return nil
}

// Call parses raw arguments and runs the named tool.
func Call(ctx context.Context, env *Env, name, raw string) (Result, error) {
	t := Resolve(name)
	if t == nil {
		var names []string
		for _, t := range All() {
			names = append(names, t.Name)
		}
		return Result{Kind: KindUnknownTool, Output: fmt.Sprintf("error: unknown tool %q; the tools are: %s", name, strings.Join(names, ", "))}, nil
	}
	a, bad := Parse(t.Params, raw)
	if bad != nil {
		return *bad, nil
	}
	return t.Run(ctx, env, a)
}

// opResult turns an error the model can act on into a Result; other errors
// are the harness's.
func opResult(err error, what string) (Result, error) {
	var oe *runner.OpError
	if errors.As(err, &oe) {
		return Result{Kind: KindFailed, Output: fmt.Sprintf("error: %s: %s (%s)", what, oe.Message, oe.Code)}, nil
	}
	return Result{}, fmt.Errorf("%s: %w", what, err)
}

var spillName = lazyre.New(`^[a-z0-9][a-z0-9._-]{0,80}$`)

// readSpill reads a spill file the loop wrote, by its opaque name.
func readSpill(env *Env, path string) ([]byte, error) {
	name := strings.TrimPrefix(path, SpillPrefix)
	if env.SpillDir == "" || !spillName.MatchString(name) || strings.Contains(name, "..") {
		return nil, &runner.OpError{Code: runner.CodeNotFound, Message: "no such spill file " + path}
	}
	b, err := os.ReadFile(filepath.Join(env.SpillDir, name))
	if err != nil {
		return nil, &runner.OpError{Code: runner.CodeNotFound, Message: "no such spill file " + path}
	}
	return b, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
