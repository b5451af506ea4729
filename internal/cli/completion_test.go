package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/spf13/cobra"
)

func TestCompletion(t *testing.T) {
	h := newTestHome(t)
	older := h.add(func(r *run.Run) { r.CreatedAt = time.Now().Add(-time.Hour); r.Task = "older task" })
	newer := h.add(func(r *run.Run) { r.CreatedAt = time.Now(); r.Task = "newer task" })
	code, out, _ := h.exec("__complete", "status", "")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 3 || !strings.HasPrefix(lines[0], newer.ID+"\t") || !strings.HasPrefix(lines[1], older.ID+"\t") ||
		!strings.Contains(lines[0], "newer task") {
		t.Fatalf("run ids, newest first: exit %d\n%s", code, out)
	}
	_, out, _ = h.exec("__complete", "status", newer.ID[:4])
	if !strings.Contains(out, newer.ID) || (older.ID[:4] != newer.ID[:4] && strings.Contains(out, older.ID)) {
		t.Fatalf("prefix: %s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--agent", ""}, "claude\ncodex\ncrush\ngemini\nopencode\nqwen\nbuiltin\n"},
		{[]string{"submit", "--sandbox", ""}, "native\ndocker\nhost\n"},
		{[]string{"submit", "--network", ""}, "none\nallowlist\n"},
		{[]string{"submit", "--workspace", ""}, "auto\ncopy\noverlay\n"},
		{[]string{"submit", "--history", ""}, "shallow\nfull\n"},
		{[]string{"verdict", newer.ID, ""}, "accept\nreject\n"},
		{[]string{"list", "--status", ""}, "queued\n"},
	} {
		_, out, _ := h.exec(append([]string{"__complete"}, c.args...)...)
		if !strings.HasPrefix(out, c.want) {
			t.Errorf("%v: %q, want it to start with %q", c.args, out, c.want)
		}
	}
}

func TestManPages(t *testing.T) {
	h := newTestHome(t)
	dir := filepath.Join(t.TempDir(), "man1")
	code, out, errb := h.exec("man", dir)
	if code != 0 || !strings.Contains(out, "man pages") {
		t.Fatalf("exit %d %s %s", code, out, errb)
	}
	b, err := os.ReadFile(filepath.Join(dir, "agentrun-submit.1"))
	if err != nil || !strings.Contains(string(b), ".TH \"AGENTRUN\"") || !strings.Contains(string(b), `\fB\-\-model\-server\fP`) ||
		!strings.Contains(string(b), ".SH NAME\nagentrun-submit \\- ") || !strings.Contains(string(b), `\fBagentrun\fP(1)`) {
		t.Fatalf("%v\n%.400s", err, b)
	}
	// A page for every command a user can run, none for hidden ones.
	app, _, _ := h.app()
	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		want = append(want, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub)
			}
		}
	}
	root := app.newRootCmd()
	root.InitDefaultCompletionCmd() // as Execute adds it
	walk(root)
	got, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	if len(got) != len(want) || len(want) < 30 {
		t.Fatalf("%d pages, want %d: %v", len(got), len(want), want)
	}
	for _, w := range want {
		if _, err := os.Stat(filepath.Join(dir, w)); err != nil {
			t.Error(err)
		}
	}
}

// Text that would read as roff requests or escapes is printed as it is.
func TestManPageEscapes(t *testing.T) {
	c := &cobra.Command{Use: "agentrun", Short: `a \ b`, Long: ".start\n'quote\n  .indented \\n\nplain", Run: func(*cobra.Command, []string) {}}
	c.Flags().String("x-y", `C:\dir`, "path with a \\")
	page := string(manPage(c, `agentrun "dev"`))
	for _, want := range []string{"agentrun \\- a \\e b\n", "\n\\&.start\n", "\n\\&'quote\n", ".nf\n  .indented \\en\n.fi\n",
		`\fB\-\-x\-y\fP`, `(default C:\edir)`, `"agentrun \(dqdev\(dq"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
}

// The binary does not link cobra's doc package, whose Markdown and YAML
// libraries' initializers every agentrun process would run.
func TestBinaryDoesNotLinkCobraDoc(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/agentrun/agentrun/cmd/agentrun").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/spf13/cobra/doc" || strings.HasPrefix(pkg, "github.com/russross/blackfriday") || strings.HasPrefix(pkg, "github.com/cpuguy83/go-md2man") {
			t.Errorf("cmd/agentrun links %s", pkg)
		}
	}
}
