package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
)

// execOut is an exec outcome, normalised.
type execOut struct {
	Exit      int    `json:"exit"`
	Signal    string `json:"signal,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	Cancelled bool   `json:"cancelled,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Stdout    string `json:"stdout"` // as streamed
	Stderr    string `json:"stderr"`
	TailOut   string `json:"tail_out"` // ExecResult.Stdout
	TailErr   string `json:"tail_err"`

	dur time.Duration
}

func runExec(ctx context.Context, e *env, req runner.ExecRequest) (*execOut, error) {
	var out, errb bytes.Buffer
	res, err := e.cl.Exec(ctx, req, &out, &errb)
	if res == nil {
		return nil, err
	}
	return &execOut{
		Exit: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut, Cancelled: res.Cancelled,
		Truncated: res.Truncated, Stdout: e.norm(out.String()), Stderr: e.norm(errb.String()),
		TailOut: e.norm(string(res.Stdout)), TailErr: e.norm(string(res.Stderr)), dur: res.Duration,
	}, err
}

func execStep(name string, req runner.ExecRequest, want execOut) step {
	return step{
		name: name,
		do: func(e *env) outcome {
			o, err := runExec(bg(), e, req)
			if o == nil {
				return result(nil, err)
			}
			return result(o, err)
		},
		check: func(t *testing.T, e *env, o outcome) {
			got, ok := o.Result.(*execOut)
			if !ok {
				t.Fatalf("exec failed: code %q", o.Code)
			}
			got.dur = 0
			if *got != want {
				t.Errorf("got %+v\nwant %+v", *got, want)
			}
		},
	}
}

func execErrStep(name string, req runner.ExecRequest, code string) step {
	return step{
		name: name,
		do: func(e *env) outcome {
			o, err := runExec(bg(), e, req)
			if o == nil {
				return result(nil, err)
			}
			return result(o, err)
		},
		check: wantCode(code),
	}
}

func wantCode(code string) func(t *testing.T, e *env, o outcome) {
	return func(t *testing.T, e *env, o outcome) {
		if o.Code != code {
			t.Errorf("got code %q (result %+v), want %q", o.Code, o.Result, code)
		}
	}
}

func okOut(stdout string) execOut {
	return execOut{Stdout: stdout, TailOut: stdout}
}

// probeScript prints "gone" if process $1 is gone or a zombie (it holds
// nothing and only waits for its reaper), "alive" otherwise. A zombie
// may be reaped while the probe reads its stat: nothing read is gone too.
const probeScript = `p=$1
if [ -d /proc/$p ]; then
  s=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f1)
  case "$s" in ""|Z|X) echo gone ;; *) echo alive ;; esac
elif kill -0 "$p" 2>/dev/null; then
  if ps -o stat= -p "$p" | grep -q Z; then echo gone; else echo alive; fi
else
  echo gone
fi`

// gone reports whether pid (as the sandbox sees it) is gone, asking inside
// the sandbox.
func gone(e *env, pid string) (bool, error) {
	res, err := e.cl.Exec(bg(), runner.ExecRequest{Argv: []string{"/bin/sh", "-c", probeScript, "probe", pid}}, nil, nil)
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(res.Stdout)) == "gone", nil
}

// bgOut is the outcome of a step that starts a background child.
type bgOut struct {
	TimedOut  bool `json:"timed_out"`
	Cancelled bool `json:"cancelled"`
	Gone      bool `json:"gone"`
	Bounded   bool `json:"bounded"` // returned well before the child would have ended
}

// bgStep runs a command that prints the pid of a background child as its
// first line and asserts the child is gone when Exec returns.
func bgStep(name string, req runner.ExecRequest, cancelAfter time.Duration, want bgOut) step {
	return step{
		name: name,
		do: func(e *env) outcome {
			ctx := bg()
			if cancelAfter > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				time.AfterFunc(cancelAfter, cancel)
				defer cancel()
			}
			start := time.Now()
			o, err := runExec(ctx, e, req)
			if o == nil {
				return result(nil, err)
			}
			if cancelAfter > 0 && !errors.Is(err, context.Canceled) {
				return outcome{Err: fmt.Sprintf("cancelled exec returned %v, want context.Canceled", err)}
			}
			pid, _, _ := strings.Cut(o.Stdout, "\n")
			if _, perr := strconv.Atoi(pid); perr != nil {
				return outcome{Err: fmt.Sprintf("no pid in output %q (%+v)", o.Stdout, o)}
			}
			g, err := gone(e, pid)
			if err != nil {
				return result(nil, err)
			}
			return outcome{Result: &bgOut{TimedOut: o.TimedOut, Cancelled: o.Cancelled, Gone: g, Bounded: time.Since(start) < 4*time.Second}}
		},
		check: func(t *testing.T, e *env, o outcome) {
			got, ok := o.Result.(*bgOut)
			if !ok || *got != want {
				t.Errorf("got %+v (code %q), want %+v", o.Result, o.Code, want)
			}
		},
	}
}

func execSteps() []step {
	zeros := strings.Repeat("a", 65536)
	return []step{
		execStep("exec/argv", runner.ExecRequest{Argv: []string{"echo", "a b", "c"}}, okOut("a b c\n")),
		execStep("exec/shell", runner.ExecRequest{Shell: "echo $((6*7)); echo oops >&2; exit 3"},
			execOut{Exit: 3, Stdout: "42\n", Stderr: "oops\n", TailOut: "42\n", TailErr: "oops\n"}),
		execStep("exec/stdin", runner.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("line1\nline2")}, okOut("line1\nline2")),
		execStep("exec/stdin-large", runner.ExecRequest{Shell: "wc -c | tr -d ' '", Stdin: bytes.Repeat([]byte("z"), 1<<20)}, okOut("1048576\n")),
		execStep("exec/env", runner.ExecRequest{Shell: `echo "$SANDBOXTEST_VAR:$EXTRA:${` + secretEnv + `:-absent}"`, Env: []string{"EXTRA=x"}}, okOut("marker:x:absent\n")),
		execStep("exec/env-override", runner.ExecRequest{Shell: `echo "$SANDBOXTEST_VAR"`, Env: []string{"SANDBOXTEST_VAR=over"}}, okOut("over\n")),
		execStep("exec/home-and-tmp", runner.ExecRequest{Shell: `test -d "$HOME" && touch "$HOME/.x" && test -d "$TMPDIR" && touch "$TMPDIR/x" && echo ok`}, okOut("ok\n")),
		execStep("exec/cwd-default", runner.ExecRequest{Shell: "pwd"}, okOut("$WORK\n")),
		execStep("exec/cwd-relative", runner.ExecRequest{Shell: "pwd", Cwd: "src"}, okOut("$WORK/src\n")),
		execStep("exec/relative-argv0", runner.ExecRequest{Argv: []string{"./script.sh"}}, okOut("script-ran\n")),
		execErrStep("exec/cwd-missing", runner.ExecRequest{Shell: "pwd", Cwd: "nope"}, runner.CodeNotFound),
		execErrStep("exec/cwd-file", runner.ExecRequest{Shell: "pwd", Cwd: "README.md"}, runner.CodeNotDir),
		execErrStep("exec/command-not-found", runner.ExecRequest{Argv: []string{"agentrun-no-such-command"}}, runner.CodeExec),
		execErrStep("exec/argv-and-shell", runner.ExecRequest{Argv: []string{"true"}, Shell: "true"}, runner.CodeBadRequest),
		execErrStep("exec/nothing", runner.ExecRequest{}, runner.CodeBadRequest),
		execStep("exec/killed-by-signal", runner.ExecRequest{Shell: "kill -KILL $$"}, execOut{Exit: -1, Signal: "SIGKILL"}),
		execStep("exec/output-cap", runner.ExecRequest{Shell: "head -c 200000 /dev/zero | tr '\\0' a", OutputCap: 65536},
			// The stream keeps the first and the last half of the cap, with a
			// note where the middle was cut.
			execOut{Truncated: true, Stdout: zeros[:32768] + runner.CutNote(200000-65536) + zeros[:32768], TailOut: zeros}),
		{
			name: "exec/output-cap-streamed",
			do: func(e *env) outcome {
				o, err := runExec(bg(), e, runner.ExecRequest{Shell: "head -c 200000 /dev/zero | tr '\\0' b; echo end", OutputCap: 1000})
				if o == nil {
					return result(nil, err)
				}
				return result(map[string]any{"streamed": len(o.Stdout), "truncated": o.Truncated, "tail": len(o.TailOut), "tail_end": strings.HasSuffix(o.TailOut, "bend\n")}, err)
			},
			check: func(t *testing.T, e *env, o outcome) {
				m, _ := o.Result.(map[string]any)
				if m["streamed"] != 1000+len(runner.CutNote(200004-1000)) || m["truncated"] != true || m["tail"] != 65536 || m["tail_end"] != true {
					t.Errorf("got %v", o.Result)
				}
			},
		},
		bgStep("exec/timeout-kills-background", runner.ExecRequest{Shell: "sleep 100 & echo $!; wait", Timeout: 300 * time.Millisecond, KillGrace: 300 * time.Millisecond},
			0, bgOut{TimedOut: true, Gone: true, Bounded: true}),
		bgStep("exec/return-kills-background", runner.ExecRequest{Shell: "sleep 100 >/dev/null 2>&1 & echo $!"},
			0, bgOut{Gone: true, Bounded: true}),
		bgStep("exec/background-holding-pipes", runner.ExecRequest{Shell: "sleep 100 & echo $!"},
			0, bgOut{Gone: true, Bounded: true}),
		bgStep("exec/background-ignoring-sigterm", runner.ExecRequest{Shell: "(trap '' TERM; exec sleep 100) & echo $!", KillGrace: 300 * time.Millisecond},
			0, bgOut{Gone: true, Bounded: true}),
		bgStep("exec/cancel-kills-group", runner.ExecRequest{Shell: "sleep 100 & echo $!; wait", KillGrace: 300 * time.Millisecond},
			300*time.Millisecond, bgOut{Cancelled: true, Gone: true, Bounded: true}),
		{
			name: "exec/concurrent",
			do: func(e *env) outcome {
				var wg sync.WaitGroup
				outs := make([]string, 8)
				errs := make([]error, 8)
				for i := range outs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						o, err := runExec(bg(), e, runner.ExecRequest{Shell: fmt.Sprintf("sleep 0.05; echo %d", i)})
						if err != nil {
							errs[i] = err
							return
						}
						outs[i] = o.Stdout
					}()
				}
				wg.Wait()
				return result(outs, errors.Join(errs...))
			},
			check: func(t *testing.T, e *env, o outcome) {
				outs, _ := o.Result.([]string)
				for i, s := range outs {
					if s != fmt.Sprintf("%d\n", i) {
						t.Errorf("exec %d: got %q", i, s)
					}
				}
			},
		},
	}
}
