package docker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// TestDiskBoundHostDirs: the workspace and HOME are host directories and
// /tmp a tmpfs; a sandbox that writes past the bound across them (bytes,
// or many small files) is killed and says why.
func TestDiskBoundHostDirs(t *testing.T) {
	b, image := requireEngine(t)
	for _, tc := range []struct{ name, script string }{
		{"workspace bytes", `for i in 1 2 3 4 5 6; do head -c 3000000 /dev/zero > /workspace/f$i; done; sleep 20`},
		{"home bytes", `for i in 1 2 3 4 5 6; do head -c 3000000 /dev/zero > $HOME/f$i; done; sleep 20`},
		{"tmp and workspace", `head -c 5000000 /dev/zero > /tmp/t; head -c 5000000 /dev/zero > /workspace/w; sleep 20`},
		{"workspace files", `mkdir /workspace/m; i=0; while [ $i -lt 3000 ]; do : > /workspace/m/$i; i=$((i+1)); done; sleep 20`},
		{"hidden by chmod 000", `mkdir -p /workspace/h/d; for i in 1 2 3 4 5 6; do head -c 3000000 /dev/zero > /workspace/h/d/f$i; done; chmod 000 /workspace/h/d; chmod 100 /workspace/h; sleep 20`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := newSpec(t, image)
			spec.Env = append(spec.Env, "HOME=/home/agent")
			spec.Limits.DiskBytes = 8 << 20
			spec.Limits.DiskInodes = 1000
			sb := start(t, b, spec)
			if v := sb.Enforced()["disk"]; !strings.HasPrefix(v, "sampled") {
				t.Errorf("Enforced[disk] = %q", v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			t0 := time.Now()
			res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: tc.script}, nil, nil)
			if err == nil && ctx.Err() != nil {
				err = ctx.Err()
			}
			lerr := sandbox.Exceeded(sb)
			if !errors.Is(lerr, sandbox.ErrDiskExceeded) {
				t.Fatalf("not stopped after %v: exec %+v, %v; LimitExceeded = %v", time.Since(t0), res, err, lerr)
			}
			if err == nil {
				t.Errorf("exec ended normally (%+v) although the sandbox was killed", res)
			}
			t.Logf("stopped after %v: %v", time.Since(t0).Round(time.Millisecond), lerr)
		})
	}
}
