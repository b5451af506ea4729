package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
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

func TestConfigShowsSources(t *testing.T) {
	h := newTestHome(t)
	cfg := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg, "agentrun"), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := "max_parallel = 2\n[model_servers.lm]\nurl = \"http://localhost:1234\"\napi_key_command = \"pass show lm\"\n"
	if err := os.WriteFile(filepath.Join(cfg, "agentrun", "config.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	h.env["XDG_CONFIG_HOME"] = cfg
	h.env["AGENTRUN_TIMEOUT"] = "30m"
	code, js, _ := h.exec("config", "--json")
	var doc configOutput
	if err := json.Unmarshal([]byte(js), &doc); err != nil || code != 0 || !doc.Exists || doc.DataDirectorySource != "environment AGENTRUN_HOME" {
		t.Fatalf("exit %d %v\n%s", code, err, js)
	}
	got := map[string]string{}
	for _, s := range doc.Settings {
		got[s.Key] = s.Value + " / " + s.Source
	}
	for k, want := range map[string]string{
		"max_parallel":                     "2 / config file",
		"timeout":                          "30m0s / environment AGENTRUN_TIMEOUT",
		"attempts":                         "2 / default",
		"model_servers.lm.url":             "http://localhost:1234 / config file",
		"model_servers.lm.api_key_command": "pass show lm / config file",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	code, out, _ := h.exec("config")
	if code != 0 || !strings.Contains(out, "environment AGENTRUN_TIMEOUT") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestConfigTypoBreaksOnlyWhatUsesIt(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	cfg := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg, "agentrun"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "agentrun", "config.toml"), []byte("max_paralel = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.env["XDG_CONFIG_HOME"] = cfg
	for _, args := range [][]string{{"list"}, {"status", r.ID}, {"result", r.ID}} {
		if code, _, errb := h.exec(args...); code != 0 {
			t.Errorf("%v failed on a config typo: %d %s", args, code, errb)
		}
	}
	code, js, _ := h.exec("config", "--json")
	if code != 2 || !strings.Contains(js, `did you mean \"max_parallel\"`) {
		t.Errorf("config: exit %d %s", code, js)
	}
	if code, js, _ := h.exec("resume", "--json", r.ID); code != 2 || !strings.Contains(js, "bad_config") {
		t.Errorf("resume: exit %d %s", code, js)
	}
	h.env["AGENTRUN_HOME"] = "relative/data"
	if code, js, _ := h.exec("list", "--json"); code != 2 || !strings.Contains(js, "relative path") {
		t.Errorf("relative AGENTRUN_HOME: exit %d %s", code, js)
	}
}

func TestStreamFlagErrorIsOneLine(t *testing.T) {
	h := newTestHome(t)
	for _, args := range [][]string{{"submit", "--follow", "--json", "--nope"}, {"logs", "-f", "--json", "--nope", "x"}} {
		code, out, _ := h.exec(args...)
		if code != 2 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, `{"error":`) {
			t.Errorf("%v: exit %d %q", args, code, out)
		}
	}
}
