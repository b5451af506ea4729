package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent/external"
	"github.com/agentrun/agentrun/internal/agenttest"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/store/files"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// BenchmarkProfileVsBare runs each installed profile's real CLI on the
// same one-file task two ways, interleaved: bare (the profile's own launch
// against the scripted model server, in a fresh checkout) and through
// `agentrun submit --wait` in the native sandbox with --network none and
// the model gateway in between. The bare CLI runs twice, in a fresh HOME
// (ms-bare) and then once more in the HOME it has just run in
// (ms-bare-warm-home), as a user runs it day to day. It reports the
// median wall time of each and the ratio of agentrun to the second
// (target: agentrun ≤ 1.1 × bare): a run's sandbox starts from an empty
// HOME, or from a profile's warm HOME (external.WarmHome), the first run
// of the benchmark making it. ratio-fresh-home is agentrun to the first.
// Where the CLI on PATH is an npm launcher that only runs a native
// program (agent.Native: codex), agentrun runs that program itself; the
// program also runs bare a third time in the same HOME
// (ms-bare-program-warm-home), and ratio-program is agentrun to it.
func BenchmarkProfileVsBare(b *testing.B) {
	for _, p := range []struct {
		name   string
		script func(dir string) modelserver.Script
	}{
		{"claude", func(dir string) modelserver.Script { return modelserver.WriteFileIn(dir, "hello.txt", "hi\n") }},
		{"codex", func(string) modelserver.Script { return modelserver.ShellWriteFile("hello.txt", "hi\n") }},
		{"gemini", func(dir string) modelserver.Script { return modelserver.WriteFileIn(dir, "hello.txt", "hi\n") }},
		{"qwen", func(dir string) modelserver.Script { return modelserver.WriteFileIn(dir, "hello.txt", "hi\n") }},
		{"opencode", func(dir string) modelserver.Script { return modelserver.WriteFileIn(dir, "hello.txt", "hi\n") }},
	} {
		b.Run(p.name, func(b *testing.B) {
			prof, _ := external.Lookup(p.name)
			bin := agenttest.CLI(b, p.name, prof.Binary)
			e := benchEnv(b, 1)
			pathEnv := "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")
			// agentrun: the scripted server behind the gateway, the tool call
			// naming the sandbox's workspace.
			srvIn := modelserver.New(b, realKey, "test-model", p.script("/workspace"))
			writeConfigIn(b, e.root, fmt.Sprintf("[model_servers.scripted]\nurl = %q\napi_key_env = \"SCRIPTED_KEY\"\n", srvIn.URL))
			real, err := filepath.EvalSymlinks(bin)
			if err != nil {
				b.Fatal(err)
			}
			prog, progEnv, native := prof.Native.Resolve(real, runtime.GOOS, runtime.GOARCH)
			var bare, warm, progWarm, wrapped, inside []time.Duration
			st, err := files.Open(e.home)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				// Bare, in a fresh checkout and HOME, with a TMPDIR beside
				// the HOME as a user has it, not around it: codex, for one,
				// skips its PATH aliases when its home is under TMPDIR.
				// Then again in that HOME (a new checkout, a new session):
				// the CLI as a user runs it day to day, its first-run work
				// (codex: its SQLite databases and skills) done.
				dir := filepath.Join(e.root, fmt.Sprintf("bare%d", i))
				home, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "tmp")
				runs := []*[]time.Duration{&bare, &warm}
				if native {
					runs = append(runs, &progWarm)
				}
				for n, d := range runs {
					repo := filepath.Join(dir, fmt.Sprintf("repo%d", n))
					bin, env := real, []string(nil)
					if d == &progWarm {
						bin, env = prog, progEnv
					}
					*d = append(*d, runBare(b, prof, p.script(repo), bin, pathEnv, home, repo, tmp, fmt.Sprintf("5c1c8a52-2b3e-4c4f-9d6e-7f8a9b0c1d2%d", n), env))
				}
				// Through agentrun.
				t0 := time.Now()
				c := exec.Command(e.bin, "submit", "--json", "--agent", p.name, "--model", "test-model", "--model-server", "scripted",
					"--attempts", "1", "--wait", "Write hello.txt")
				c.Dir, c.Env = e.repo, append(append([]string{}, e.vars...), pathEnv, "SCRIPTED_KEY="+realKey)
				out, err := c.CombinedOutput()
				wrapped = append(wrapped, time.Since(t0))
				if err != nil {
					if strings.Contains(string(out), "sandbox_preflight") {
						b.Skipf("native sandbox unavailable: %s", out)
					}
					b.Fatalf("agentrun %s: %v\n%s", p.name, err, out)
				}
				id := between(string(out), `"id": "`, `"`)
				if r, err := st.Get(b.Context(), id); err == nil && len(r.Attempts) == 1 && r.Attempts[0].FinishedAt != nil {
					inside = append(inside, r.Attempts[0].FinishedAt.Sub(r.Attempts[0].StartedAt))
				}
				// What the supervisor does once the result is recorded (the
				// sandbox's teardown, the next run's HOME made ahead) is not
				// in the run's time, and must not be in the next bare runs'.
				e.released(id)
			}
			mb, mh, mw := median(bare), median(warm), median(wrapped)
			b.ReportMetric(mb, "ms-bare(median)")
			b.ReportMetric(mh, "ms-bare-warm-home(median)")
			b.ReportMetric(mw, "ms-agentrun(median)")
			b.ReportMetric(mw/mh, "ratio")
			b.ReportMetric(mw/mb, "ratio-fresh-home")
			if native {
				mp := median(progWarm)
				b.ReportMetric(mp, "ms-bare-program-warm-home(median)")
				b.ReportMetric(mw/mp, "ratio-program")
			}
			if len(inside) > 0 {
				// The CLI's own time inside the sandbox: the rest of the
				// difference is agentrun's fixed cost per run.
				b.ReportMetric(median(inside), "ms-agent-in-sandbox(median)")
			}
		})
	}
}

// runBare runs the profile's own launch of the CLI at real in repo (a new
// checkout) with HOME home, TMPDIR tmp and env added, against a scripted
// model server of its own, and says how long it took.
func runBare(b *testing.B, prof external.Profile, script modelserver.Script, real, pathEnv, home, repo, tmp, session string, env []string) time.Duration {
	b.Helper()
	for _, d := range []string{home, repo, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	testsupport.RepoAt(b, repo, nil)
	srv := modelserver.New(nil, realKey, "test-model", script)
	defer srv.Close()
	l := prof.Launch(external.LaunchInput{Binary: real, BaseURL: srv.URL + "/" + prof.Protocol, Key: realKey,
		Model: "test-model", Home: home, WorkDir: repo, Session: session})
	for n, content := range l.Files {
		fp := filepath.Join(home, n)
		_ = os.MkdirAll(filepath.Dir(fp), 0o700)
		if err := os.WriteFile(fp, []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.Command("sh", "-c", l.Command)
	cmd.Dir = repo
	cmd.Env = slices.Concat([]string{pathEnv, "HOME=" + home, "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=" + tmp}, env, l.Env)
	cmd.Stdin = strings.NewReader("Write hello.txt")
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil || !fileExists(filepath.Join(repo, "hello.txt")) {
		b.Fatalf("bare %s: %v\n%s", prof.Name, err, out)
	}
	return d
}
