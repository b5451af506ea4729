package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/bench"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// benchAnswers are the scripted model's edits for the README's bench: two
// right ones and a wrong one, told apart by the task text.
var benchAnswers = []struct{ marker, path, content string }{
	{"sum_range(a, b)", "sum_range.py", "def sum_range(a, b):\n    return sum(range(a, b + 1))\n"},
	{"toRoman(n)", "roman.js", `function toRoman(n) {
  if (!Number.isInteger(n) || n < 1 || n > 3999) throw new RangeError("out of range");
  const d = [[1000, "M"], [900, "CM"], [500, "D"], [400, "CD"], [100, "C"], [90, "XC"], [50, "L"], [40, "XL"], [10, "X"], [9, "IX"], [5, "V"], [4, "IV"], [1, "I"]];
  let s = "";
  for (const [v, r] of d) while (n >= v) { s += r; n -= v; }
  return s;
}
module.exports = { toRoman };
`},
	{"greet.sh", "greet.sh", "#!/bin/sh\necho \"Hello, $2!\"\n"},
}

// TestReadmeBench runs the README's bench example as written, the
// scripted model server standing in for LM Studio (its URL replaces
// http://localhost:1234), in the native sandbox where it can run; the
// earlier results it compares with are made up.
func TestReadmeBench(t *testing.T) {
	testsupport.Program(t, "git")
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Bench: ")
	if !ok {
		t.Fatal("README has no 'Bench: ...' section")
	}
	block := fenced(t, section, "sh")
	srv := modelserver.New(t, "", "qwen3-coder-30b", func(turn modelserver.Turn) modelserver.Reply {
		if turn.ToolResults > 0 {
			return modelserver.Reply{Text: "Done."}
		}
		for _, a := range benchAnswers {
			if c, ok := modelserver.WriteCall(turn.Tools, "", a.path, a.content); ok && bytes.Contains(turn.Body, []byte(a.marker)) {
				return modelserver.Reply{Text: "Writing " + a.path, Calls: []modelserver.Call{c}}
			}
		}
		return modelserver.Reply{Text: "?"}
	})
	block = strings.ReplaceAll(block, "http://localhost:1234", srv.URL)

	bin := testsupport.Agentrun(t)
	root := t.TempDir()
	home, work := filepath.Join(root, "home"), filepath.Join(root, "work")
	for _, d := range []string{home, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8"}
	shell := func(script string) (string, error) {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := shell(bin + " bench check --builtin-fixtures --task sh-add-flag"); err != nil && strings.Contains(out, "sandbox_preflight") {
		if testsupport.Required() {
			t.Fatalf("requires the native sandbox: %s", out)
		}
		env = append(env, "AGENTRUN_SANDBOX=host")
	}
	// The earlier bench the example compares with: everything failed.
	w, err := bench.Create(filepath.Join(work, "last-week.jsonl"), bench.Header{Bench: "20261124-090000-abcd", Repeat: 2,
		Agents: []bench.Agent{{Agent: "builtin", Model: "qwen3-coder-30b"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"js-roman", "py-off-by-one", "sh-add-flag"} {
		_ = w.Add(bench.Result{Fixture: f, Agent: bench.Agent{Agent: "builtin", Model: "qwen3-coder-30b"}, Repeat: 1, Status: bench.StatusFailed, WallMS: 9000})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := shell(block)
	t.Logf("the README's bench:\n%s", out)
	if err != nil {
		t.Fatalf("the README's bench failed: %v\n--- script\n%s\n--- output\n%s", err, block, out)
	}
	for _, want := range []string{"builtin/qwen3-coder-30b  6     67%", "py-off-by-one", "sh-add-flag", "+67%"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output has no %q", want)
		}
	}
	if page, err := os.ReadFile(filepath.Join(work, "qwen.html")); err != nil || !bytes.Contains(page, []byte("<svg")) {
		t.Errorf("no page: %v", err)
	}
}
