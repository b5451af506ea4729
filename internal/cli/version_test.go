package cli

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	h := newTestHome(t)
	code, out, _ := h.exec("version", "--json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if v.Version == "" || v.Go != runtime.Version() || v.OS != runtime.GOOS || v.Arch != runtime.GOARCH {
		t.Fatalf("%+v", v)
	}
	code, line, _ := h.exec("version")
	_, flag, _ := h.exec("--version")
	if code != 0 || !strings.HasPrefix(line, "agentrun "+v.Version) || line != flag {
		t.Fatalf("version %q, --version %q", line, flag)
	}
	withCommit := versionInfo{Version: "dev", Commit: "0123456789abcdef0123", Date: "2026-12-01T10:00:00Z", Modified: true, Go: "go1.26.8", OS: "linux", Arch: "amd64"}
	if got := withCommit.String(); got != "agentrun dev (commit 0123456789ab+changes, 2026-12-01T10:00:00Z) go1.26.8 linux/amd64" {
		t.Fatal(got)
	}
}

func TestUnknownCommandIsUsage(t *testing.T) {
	h := newTestHome(t)
	for _, args := range [][]string{{"nosuch", "--json"}, {"--json", "doctorr"}, {"list", "--bogus", "--json"}, {"version", "extra", "--json"}} {
		code, out, errb := h.exec(args...)
		var doc struct {
			Error struct{ Code, Fix string } `json:"error"`
		}
		if code != 2 || json.Unmarshal([]byte(out), &doc) != nil || doc.Error.Code != "usage" || doc.Error.Fix == "" || errb != "" {
			t.Errorf("%v: exit %d stdout %q stderr %q", args, code, out, errb)
		}
	}
	code, _, errb := h.exec("nosuch")
	if code != 2 || !strings.Contains(errb, "invalid usage") || strings.Contains(errb, "report this") {
		t.Errorf("exit %d: %s", code, errb)
	}
}
