package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
)

func TestDiffVerbatim(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	patch := "diff --git a/x b/x\n+\x1b[31mred\x1b[0m \r\n"
	h.write(h.st.L.Patch(r.ID), patch)
	app, out, _ := h.app()
	if err := runDiff(context.Background(), &diffOptions{ID: r.ID}, app); err != nil {
		t.Fatal(err)
	}
	if out.String() != patch {
		t.Errorf("not verbatim: %q", out.String())
	}
	code, js, _ := h.exec("diff", r.ID[:6], "--json")
	var got map[string]string
	if err := json.Unmarshal([]byte(js), &got); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if got["id"] != r.ID || got["patch"] != patch {
		t.Errorf("%v", got)
	}
}

// On a terminal the agent's escape sequences are shown, not interpreted.
func TestDiffOnTerminal(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	h.write(h.st.L.Patch(r.ID), "+\x1b]0;owned\x07x\n")
	master, slave := openPTY(t)
	app, _, _ := h.app()
	app.Stdout = slave
	if err := runDiff(context.Background(), &diffOptions{ID: r.ID}, app); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, err := master.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); got != "+^[]0;owned^Gx\r\n" {
		t.Errorf("terminal got %q", got)
	}
}

func TestDiffNoPatch(t *testing.T) {
	h := newTestHome(t)
	r := h.add(func(r *run.Run) { r.State, r.Reason = run.StateFailed, run.ReasonNoChanges })
	code, out, _ := h.exec("diff", r.ID, "--json")
	if code != 2 || jsonErr(t, out)["code"] != "no_patch" {
		t.Errorf("exit %d: %s", code, out)
	}
	h.write(h.st.L.Patch(r.ID), "")
	if code, _, stderr := h.exec("diff", r.ID); code != 2 {
		t.Errorf("empty patch: exit %d %s", code, stderr)
	}
}

func TestDiffBadIDs(t *testing.T) {
	badIDCases(t, newTestHome(t), "diff")
}
