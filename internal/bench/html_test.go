package bench

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// pageSummary is a summary of two models, one of them named to test the
// escaping.
func pageSummary() Summary {
	h := Header{Bench: "b1", Repeat: 2}
	var rs []Result
	add := func(a Agent, fixture string, st Status, cost float64, wall int64) {
		rs = append(rs, Result{Fixture: fixture, Agent: a, Status: st, CostUSD: cost, WallMS: wall, Tokens: Tokens{Total: 1000}})
	}
	big := Agent{Agent: "claude", Model: "sonnet"}
	small := Agent{Agent: "builtin", Model: `<script>alert(1)</script>`}
	for _, f := range []string{"t1", "t2"} {
		add(big, f, StatusPassed, 0.20, 40000)
		add(big, f, StatusPassed, 0.30, 50000)
		add(small, f, StatusPassed, 0.01, 90000)
		add(small, f, StatusFailed, 0.01, 120000)
	}
	return Summarize(h, rs, 0)
}

// The page, rendered by a real Chromium: the DOM holds a point per model
// in each plot, an agent-chosen name stays text, and the screenshot shows
// each model's colour.
func TestHTMLPageInChromium(t *testing.T) {
	t.Parallel()
	chromium := testsupport.Program(t, "chromium")
	dir := t.TempDir()
	page := filepath.Join(dir, "bench.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, pageSummary(), time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// Self-contained and script-free: nothing fetched, nothing run.
	for _, bad := range []string{"<script", "src=", "href=", "url(", "@import"} {
		if bytes.Contains(b.Bytes(), []byte(bad)) {
			t.Errorf("the page holds %q", bad)
		}
	}
	browse := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=1250,1100"}
		cmd := exec.CommandContext(ctx, chromium, append(append(base, args...), "file://"+page)...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "TMPDIR="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
		}
		return out
	}
	dom := string(browse("--dump-dom"))
	if n := strings.Count(dom, `<g class="point"`); n != 4 {
		t.Errorf("%d points in the DOM, want 2 models × 2 plots\n%s", n, dom)
	}
	for _, want := range []string{`data-model="claude/sonnet"`, `data-pass-rate="1"`, `data-pass-rate="0.5"`, "&lt;script&gt;alert(1)&lt;/script&gt;"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM has no %s", want)
		}
	}
	if strings.Contains(dom, "<script>alert") {
		t.Error("a model's name became markup")
	}
	shot := filepath.Join(dir, "shot.png")
	browse("--screenshot=" + shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// Each point is its model's colour at 85% over the plot's #fafafa.
	for i, hex := range palette[:2] {
		var want [3]int
		for j := range 3 {
			c, err := strconv.ParseUint(hex[1+2*j:3+2*j], 16, 8)
			if err != nil {
				t.Fatal(err)
			}
			want[j] = (85*int(c) + 15*0xfa) / 100
		}
		n := 0
		bounds := img.Bounds()
		for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
			for x := bounds.Min.X; x < bounds.Max.X; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				if near(int(r>>8), want[0]) && near(int(g>>8), want[1]) && near(int(bl>>8), want[2]) {
					n++
				}
			}
		}
		if n < 40 {
			t.Errorf("model %d: %d pixels of its colour %s in the screenshot, want its points drawn", i, n, hex)
		}
	}
}

func near(a, b int) bool { return a-b <= 6 && b-a <= 6 }
