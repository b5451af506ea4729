package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": dir}
	s, err := Load(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxParallel != DefaultMaxParallel || s.Attempts != DefaultAttempts || s.Timeout != DefaultTimeout {
		t.Fatalf("defaults: %v", s)
	}
	p := filepath.Join(dir, "agentrun", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("max_parallel = 2\ntimeout = \"5m\"\nauthor_name = \"File\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Load(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxParallel != 2 || s.Timeout != 5*time.Minute || s.AuthorName != "File" {
		t.Fatalf("file: %v %q", s, s.AuthorName)
	}
	env["AGENTRUN_MAX_PARALLEL"] = "7"
	env["AGENTRUN_AUTHOR_NAME"] = "Env"
	s, err = Load(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxParallel != 7 || s.AuthorName != "Env" || s.Timeout != 5*time.Minute {
		t.Fatalf("env: %v %q", s, s.AuthorName)
	}
}

func TestBadConfig(t *testing.T) {
	for name, body := range map[string]string{
		"syntax":   "max_parallel = = 2",
		"unknown":  "max_paralel = 2",
		"duration": "timeout = \"soon\"",
		"negative": "attempts = -1",
		"pin":      "[images]\n\"node:22\" = \"latest\"",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "agentrun", "config.toml")
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			_ = os.WriteFile(p, []byte(body), 0o644)
			_, err := Load(envOf(map[string]string{"XDG_CONFIG_HOME": dir}))
			if !catalog.Has(err, catalog.BadConfig) {
				t.Fatalf("want BadConfig, got %v", err)
			}
		})
	}
	_, err := Load(envOf(map[string]string{"XDG_CONFIG_HOME": t.TempDir(), "AGENTRUN_MAX_PARALLEL": "x"}))
	if !catalog.Has(err, catalog.BadConfig) {
		t.Fatalf("env: want BadConfig, got %v", err)
	}
}

// FuzzRead: any config file content yields settings or a BadConfig error,
// never a panic or another kind of error.
func FuzzRead(f *testing.F) {
	for _, s := range []string{"", "max_parallel = 2", "timeout = \"5m\"\nsandbox = \"native\"", "max_paralel = 2", "[x]\ny=1", "attempts = -1", "max_bytes = 1e99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		dir := t.TempDir()
		p := filepath.Join(dir, "agentrun", "config.toml")
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Load(envOf(map[string]string{"XDG_CONFIG_HOME": dir}))
		if err != nil {
			if !catalog.Has(err, catalog.BadConfig) {
				t.Fatalf("non-catalog error: %v", err)
			}
			return
		}
		if s.MaxParallel < 1 || s.Attempts < 1 || s.MaxFiles < 1 || s.MaxBytes < 1 || s.Timeout < 0 {
			t.Fatalf("invalid settings from %q: %v", body, s)
		}
	})
}

func TestImage(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": dir}
	p := filepath.Join(dir, "agentrun", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	d := "sha256:" + strings.Repeat("ab", 32)
	if err := os.WriteFile(p, []byte("image = \"node:22\"\n[images]\n\"node:22\" = \""+d+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if s.Image != "node:22" || s.File.Images["node:22"] != d {
		t.Fatalf("image %q, pins %v", s.Image, s.File.Images)
	}
	env["AGENTRUN_IMAGE"] = "other@" + d
	if s, err = Load(envOf(env)); err != nil || s.Image != "other@"+d {
		t.Fatalf("environment over file: %q %v", s.Image, err)
	}
}

func TestCacheBudget(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": dir}
	if s, err := Load(envOf(env)); err != nil || s.CacheBudget != DefaultCacheBudget {
		t.Fatalf("default: %d %v", s.CacheBudget, err)
	}
	p := filepath.Join(dir, "agentrun", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]int64{`cache_budget = "2G"`: 2 << 30, `cache_budget = "none"`: -1, `cache_budget = "0"`: -1} {
		if err := os.WriteFile(p, []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Load(envOf(env))
		if want < 0 {
			if !catalog.Has(err, catalog.BadConfig) {
				t.Errorf("%s: %v, want bad_config", text, err)
			}
			continue
		}
		if err != nil || s.CacheBudget != want {
			t.Errorf("%s: %d %v", text, s.CacheBudget, err)
		}
	}
	if err := os.WriteFile(p, []byte(`cache_budget = "2G"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env["AGENTRUN_CACHE_BUDGET"] = "512M"
	if s, err := Load(envOf(env)); err != nil || s.CacheBudget != 512<<20 {
		t.Fatalf("environment: %d %v", s.CacheBudget, err)
	}
}

func TestSetupAllowAndToolchainCaches(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agentrun", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("setup_allow = [\"proxy.golang.org\"]\ntoolchain_caches = [\"go\", \"npm\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(envOf(map[string]string{"XDG_CONFIG_HOME": dir}))
	if err != nil || len(s.File.SetupAllow) != 1 || s.File.SetupAllow[0] != "proxy.golang.org" || len(s.File.ToolchainCaches) != 2 {
		t.Fatalf("%+v %v", s.File, err)
	}
}
