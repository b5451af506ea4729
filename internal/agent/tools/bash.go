package tools

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
)

//go:embed bash.md
var bashDesc string

const (
	bashDefaultTimeout = 120
	bashMaxTimeout     = 600
	bashOutputCap      = 4 << 20
)

var bashTool = &Tool{
	Name:        "bash",
	Description: bashDesc,
	Params: []Param{
		{Name: "command", Type: TString, Description: "The shell command to run.", Required: true},
		{Name: "timeout", Type: TInteger, Description: "Timeout in seconds (default 120, max 600)."},
	},
	Run: runBash,
}

// lockedBuffer interleaves stdout and stderr as they arrive.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 2*bashOutputCap {
		l.b.Write(p)
	}
	return len(p), nil
}

func runBash(ctx context.Context, env *Env, a Args) (Result, error) {
	cmd := a.Str("command")
	if cmd == "" {
		return Result{Kind: KindBadArguments, Output: "error: bad arguments: command is empty"}, nil
	}
	secs := a.Int("timeout", bashDefaultTimeout)
	if secs <= 0 {
		secs = bashDefaultTimeout
	}
	if secs > bashMaxTimeout {
		secs = bashMaxTimeout
	}
	var out lockedBuffer
	res, err := env.Runner.Exec(ctx, runner.ExecRequest{Shell: cmd, Cwd: env.WorkDir, Env: env.CmdEnv, Timeout: time.Duration(secs) * time.Second,
		OutputCap: bashOutputCap, KillGrace: 2 * time.Second}, &out, &out)
	if err != nil {
		r, herr := opResult(err, "run command")
		r.Command, r.ExitCode = cmd, -1
		return r, herr
	}
	out.mu.Lock()
	text := out.b.String()
	out.mu.Unlock()
	var b bytes.Buffer
	b.WriteString(text)
	if text != "" && text[len(text)-1] != '\n' {
		b.WriteByte('\n')
	}
	switch {
	case res.TimedOut:
		fmt.Fprintf(&b, "[timed out after %ds; the command and its children were stopped]", secs)
	case res.Cancelled:
		b.WriteString("[cancelled]")
	case res.Signal != "":
		fmt.Fprintf(&b, "[killed by signal %s]", res.Signal)
	default:
		fmt.Fprintf(&b, "[exit code %d]", res.ExitCode)
	}
	if res.Truncated {
		b.WriteString(" [output past 4 MiB was dropped]")
	}
	r := Result{Output: b.String(), Command: cmd, ExitCode: res.ExitCode}
	if res.TimedOut && r.ExitCode == 0 {
		r.ExitCode = -1
	}
	return r, nil
}
