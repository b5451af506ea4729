package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func mapFile(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s), Mode: 0o644} }

func TestLoadFixture(t *testing.T) {
	base := fstest.MapFS{
		"f/task.md":         mapFile("Fix it.\n"),
		"f/accept.sh":       mapFile("test -f ok\n"),
		"f/repo/a.txt":      mapFile("a\n"),
		"f/repo/bin/x.sh":   {Data: []byte("echo\n"), Mode: 0o755},
		"f/solution/ok":     mapFile(""),
		"f/solution.delete": mapFile("a.txt\n"),
		"f/fixture.toml": mapFile(`language = "shell"
protected = ["a.txt"]
timeout = "2m"
attempts = 2
[expect]
"ok" = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
"a.txt" = "absent"
[checks]
unit = "sh ./accept.sh"
`),
	}
	f, err := Load(base, "f", "", "test")
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "f" || f.Accept != "sh ./accept.sh" || f.Language != "shell" || f.Timeout != 2*time.Minute || f.Attempts != 2 ||
		len(f.Files) != 2 || !f.Files[1].Exec || f.Files[0].Exec || len(f.Solution) != 1 || !slices.Equal(f.Delete, []string{"a.txt"}) ||
		!slices.Equal(f.AcceptFiles(), []string{"accept.sh", "a.txt"}) || len(f.Checks) != 1 || f.Expect["a.txt"] != Absent {
		t.Errorf("%+v", f)
	}
	// The digest follows what a run sees, not the solution.
	other := fstest.MapFS{}
	for k, v := range base {
		other[k] = v
	}
	other["f/solution/ok"] = mapFile("changed")
	if g, _ := Load(other, "f", "", "test"); g.Digest != f.Digest {
		t.Error("a solution change moved the digest")
	}
	other["f/task.md"] = mapFile("Fix it now.\n")
	if g, _ := Load(other, "f", "", "test"); g.Digest == f.Digest {
		t.Error("a task change did not move the digest")
	}

	for _, c := range []struct {
		name string
		mut  func(m fstest.MapFS)
		want string
	}{
		{"no task", func(m fstest.MapFS) { delete(m, "f/task.md") }, "task.md"},
		{"empty task", func(m fstest.MapFS) { m["f/task.md"] = mapFile(" \n") }, "empty"},
		{"no acceptance", func(m fstest.MapFS) { delete(m, "f/accept.sh") }, "no acceptance"},
		{"no repository", func(m fstest.MapFS) { delete(m, "f/repo/a.txt"); delete(m, "f/repo/bin/x.sh") }, "no repository"},
		{"accept.sh twice", func(m fstest.MapFS) { m["f/repo/accept.sh"] = mapFile("") }, "remove one"},
		{"unknown key", func(m fstest.MapFS) { m["f/fixture.toml"] = mapFile("acept = \"x\"\n") }, "unknown key acept"},
		{"bad toml", func(m fstest.MapFS) { m["f/fixture.toml"] = mapFile("accept = \n") }, "fixture.toml"},
		{"protected escapes", func(m fstest.MapFS) { m["f/fixture.toml"] = mapFile("protected = [\"../x\"]\n") }, "protected"},
		{"protected .git", func(m fstest.MapFS) { m["f/fixture.toml"] = mapFile("protected = [\".git/config\"]\n") }, "protected"},
		{"bad hash", func(m fstest.MapFS) { m["f/fixture.toml"] = mapFile("[expect]\n\"a\" = \"md5:00\"\n") }, "sha256"},
		{"bad timeout", func(m fstest.MapFS) { m["f/fixture.toml"] = mapFile("timeout = \"soon\"\n") }, "timeout"},
		{"repo path in builtin", func(m fstest.MapFS) {
			delete(m, "f/repo/a.txt")
			delete(m, "f/repo/bin/x.sh")
			m["f/fixture.toml"] = mapFile("repo = \"/src\"\n")
		}, "built-in"},
		{"bad name", func(m fstest.MapFS) {
			for k, v := range m {
				delete(m, k)
				m[strings.Replace(k, "f/", "f g/", 1)] = v
			}
		}, "name"},
		{"bad txtar", func(m fstest.MapFS) {
			delete(m, "f/repo/a.txt")
			delete(m, "f/repo/bin/x.sh")
			m["f/repo.txtar"] = mapFile("-- ../up --\nx\n")
		}, "repo.txtar"},
	} {
		m := fstest.MapFS{}
		for k, v := range base {
			m[k] = v
		}
		c.mut(m)
		fs, err := Discover(m, ".", "", "test")
		if err == nil && len(fs) == 0 && c.name == "no task" {
			continue // a directory without task.md is no fixture at all
		}
		if !catalog.BadFixture.Is(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want bad_fixture naming %q", c.name, err, c.want)
		}
	}
}

func TestDiscoverAndSelect(t *testing.T) {
	m := fstest.MapFS{
		"a/task.md": mapFile("A"), "a/accept.sh": mapFile("true"), "a/repo/x": mapFile("x"),
		"group/b/task.md": mapFile("B"), "group/b/accept.sh": mapFile("true"), "group/b/repo.txtar": mapFile("comment\n-- x --\nx\n-- d/y --\ny\n"),
		".hidden/c/task.md": mapFile("C"),
	}
	fs, err := Discover(m, ".", "", "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 2 || fs[0].Name != "a" || fs[1].Name != "b" || len(fs[1].Files) != 2 || string(fs[1].Files[1].Data) != "y\n" {
		t.Fatalf("%+v", fs)
	}
	if got, err := Select(fs, []string{"b"}); err != nil || len(got) != 1 || got[0].Name != "b" {
		t.Errorf("select b: %v %v", got, err)
	}
	if _, err := Select(fs, []string{"zz"}); !catalog.NoFixtures.Is(err) || !strings.Contains(err.Error(), "a, b") {
		t.Errorf("select zz: %v", err)
	}
	if _, err := Select(nil, nil); !catalog.NoFixtures.Is(err) {
		t.Errorf("select from none: %v", err)
	}
	m["other/a/task.md"], m["other/a/accept.sh"], m["other/a/repo/x"] = mapFile("A2"), mapFile("true"), mapFile("x")
	if _, err := Discover(m, ".", "", "test"); !catalog.BadFixture.Is(err) || !strings.Contains(err.Error(), "two fixtures") {
		t.Errorf("two called a: %v", err)
	}
}

func TestPassAtK(t *testing.T) {
	for _, c := range []struct {
		n, c, k int
		want    float64
	}{
		{5, 0, 1, 0}, {5, 5, 1, 1}, {4, 1, 1, 0.25}, {4, 1, 4, 1}, {4, 2, 2, 1 - 1.0/6},
		{10, 3, 5, 1 - (7.0*6*5*4*3)/(10*9*8*7*6)}, {2, 1, 5, 1}, {0, 0, 1, 0},
	} {
		if got := passAtK(c.n, c.c, c.k); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("pass@%d of %d/%d = %v, want %v", c.k, c.c, c.n, got, c.want)
		}
	}
}

func TestSummarizeAndCompare(t *testing.T) {
	a := Agent{Agent: "builtin", Model: "m"}
	b := Agent{Agent: "claude"}
	rs := []Result{
		{Fixture: "t1", Agent: a, Status: StatusPassed, Tokens: Tokens{Total: 100}, CostUSD: 0.1, WallMS: 1000, Turns: 2},
		{Fixture: "t1", Agent: a, Status: StatusFailed, Tokens: Tokens{Total: 300}, CostUSD: 0.3, WallMS: 3000, Turns: 4, Harness: Harness{Nudges: 2, MaxTurns: 1}},
		{Fixture: "t2", Agent: a, Status: StatusGamed, Tokens: Tokens{Total: 200}, WallMS: 2000},
		{Fixture: "t2", Agent: a, Status: StatusError, Tokens: Tokens{Total: 9999}, WallMS: 99999},
		{Fixture: "t1", Agent: b, Status: StatusPassed, WallMS: 500},
	}
	s := Summarize(Header{Bench: "x", Repeat: 2}, rs, 0)
	if s.K != 2 || len(s.Models) != 2 || len(s.Tasks) != 2 || len(s.Cells) != 3 {
		t.Fatalf("%+v", s)
	}
	m := s.Models[0]
	if m.Name != "builtin/m" || m.Runs != 4 || m.Passed != 1 || m.Failed != 1 || m.Gamed != 1 || m.Errors != 1 ||
		math.Abs(m.PassRate-1.0/3) > 1e-9 || m.MeanTokens != 200 || math.Abs(m.MeanCostUSD-0.4/3) > 1e-9 || m.MedianWallMS != 2000 ||
		m.Harness.Nudges != 2 || m.Harness.Failures() != 1 || m.MeanTurns != 2 {
		t.Errorf("builtin/m: %+v", m)
	}
	// pass@2: t1 has 1 of 2 passed (1), t2 none of 1 judged (0): mean 0.5.
	if math.Abs(m.PassAtK-0.5) > 1e-9 {
		t.Errorf("pass@2 %v, want 0.5", m.PassAtK)
	}
	if s.Models[1].Name != "claude" || s.Models[1].PassRate != 1 {
		t.Errorf("claude: %+v", s.Models[1])
	}
	if s.Tasks[0].Name != "t1" || s.Tasks[0].Runs != 3 || math.Abs(s.Tasks[0].PassRate-2.0/3) > 1e-9 {
		t.Errorf("t1: %+v", s.Tasks[0])
	}
	// Compare: B is A with claude gone and builtin/m passing t2.
	rs2 := slices.Clone(rs[:4])
	rs2[2].Status = StatusPassed
	s2 := Summarize(Header{Bench: "y"}, rs2, 2)
	cmp := Compare(s, s2)
	if len(cmp.Models) != 2 || cmp.Models[0].Delta == nil || math.Abs(cmp.Models[0].Delta.PassRate-1.0/3) > 1e-9 ||
		cmp.Models[1].Name != "claude" || cmp.Models[1].B != nil || cmp.Models[1].Delta != nil {
		t.Errorf("%+v", cmp)
	}
}

func TestResultsFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.jsonl")
	w, err := Create(p, Header{Bench: "b", Repeat: 1, Agents: []Agent{{Agent: "builtin", Model: "m"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []Status{StatusPassed, StatusGamed} {
		if err := w.Add(Result{Fixture: "t", Agent: Agent{Agent: "builtin", Model: "m"}, Status: st, Gamed: []string{"accept.sh"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h, rs, err := ReadFile(p)
	if err != nil || h.Bench != "b" || h.Version != FormatVersion || len(rs) != 2 || rs[1].Status != StatusGamed || rs[1].Model != "m" {
		t.Fatalf("%+v %+v %v", h, rs, err)
	}
	data, _ := os.ReadFile(p)
	// A bench killed while writing its last line: the rest is read.
	if _, rs, err := Read(bytes.NewReader(append(slices.Clone(data), `{"type":"run","fixt`...))); err != nil || len(rs) != 2 {
		t.Errorf("cut last line: %d runs, %v", len(rs), err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	for _, c := range []struct{ name, doc string }{
		{"damaged line", lines[0] + "{damaged\n" + lines[1]},
		{"no header", lines[1]},
		{"newer", `{"type":"header","version":99}` + "\n"},
		{"empty", ""},
	} {
		if _, _, err := Read(strings.NewReader(c.doc)); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, _, err := ReadFile(filepath.Join(t.TempDir(), "none")); !catalog.BadResults.Is(err) {
		t.Errorf("missing file: %v", err)
	}
}

// Scoring: a changed accept.sh or protected file is gamed (the acceptance
// not run); an expect hash that does not hold fails a result the
// acceptance passes; nothing exported is judged on the base.
func TestScore(t *testing.T) {
	t.Parallel()
	s := nativeScorer(t)
	sum := sha256.Sum256([]byte("42\n"))
	m := fstest.MapFS{
		"f/task.md":       mapFile("Write 42 to out.txt."),
		"f/accept.sh":     mapFile("grep -qx 42 out.txt && test \"$(cat test.txt)\" = t\n"),
		"f/repo/test.txt": mapFile("t\n"), "f/repo/gone.txt": mapFile("x\n"),
		"f/fixture.toml": mapFile("protected = [\"test.txt\"]\n[expect]\n\"out.txt\" = \"sha256:" + hex.EncodeToString(sum[:]) + "\"\n\"gone.txt\" = \"absent\"\n"),
	}
	f, err := Load(m, "f", "", "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo, base, err := Prepare(ctx, f, filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	// result commits a change on a branch of its own off the base.
	result := func(branch string, files map[string]string, remove ...string) string {
		testsupport.Git(t, repo, "checkout", "-q", "-b", branch, base)
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(repo, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range remove {
			testsupport.Git(t, repo, "rm", "-q", name)
		}
		testsupport.Git(t, repo, "add", "-A")
		testsupport.Git(t, repo, "commit", "-q", "-m", branch)
		return testsupport.Git(t, repo, "rev-parse", "HEAD")
	}
	for _, c := range []struct {
		name   string
		commit string
		want   Status
		check  func(Score) bool
	}{
		{"right", result("right", map[string]string{"out.txt": "42\n"}, "gone.txt"), StatusPassed, func(sc Score) bool { return sc.Accept.ExitCode == 0 }},
		{"gone kept", result("kept", map[string]string{"out.txt": "42\n"}), StatusFailed, func(sc Score) bool {
			return sc.Accept.ExitCode == 0 && slices.Equal(sc.Unexpected, []string{"gone.txt"})
		}},
		{"wrong", result("wrong", map[string]string{"out.txt": "41\n"}, "gone.txt"), StatusFailed, func(sc Score) bool { return sc.Accept.ExitCode != 0 }},
		{"accept.sh", result("script", map[string]string{"accept.sh": "exit 0\n"}), StatusGamed, func(sc Score) bool {
			return slices.Equal(sc.Gamed, []string{"accept.sh"}) && sc.Accept == nil
		}},
		{"protected", result("tests", map[string]string{"out.txt": "42\n", "test.txt": "changed\n"}, "gone.txt"), StatusGamed, func(sc Score) bool {
			return slices.Equal(sc.Gamed, []string{"test.txt"})
		}},
		{"nothing exported", "", StatusFailed, func(sc Score) bool { return sc.Accept.ExitCode != 0 }},
	} {
		sc, err := s.Score(ctx, f, Target{ID: "t" + strings.ReplaceAll(c.name, " ", ""), Repo: repo, Base: base, Commit: c.commit, Backend: native.Name})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if sc.Status != c.want || !c.check(sc) {
			t.Errorf("%s: %s (%s), want %s; %+v accept %+v", c.name, sc.Status, sc.Message, c.want, sc, sc.Accept)
		}
	}
}
