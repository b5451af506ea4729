package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
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
	if err != nil || !strings.Contains(string(b), ".TH \"AGENTRUN\"") || !strings.Contains(string(b), "model-server") {
		t.Fatalf("%v\n%.400s", err, b)
	}
	if _, err := os.Stat(filepath.Join(dir, "agentrun.1")); err != nil {
		t.Fatal(err)
	}
}
