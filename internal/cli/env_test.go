package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
)

func TestDataHome(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	get := func(k string) string { return env[k] }
	if got := DataHome(get); got != "/home/u/.local/share/agentrun" {
		t.Fatalf("default %q", got)
	}
	env["XDG_DATA_HOME"] = "/xdg"
	if got := DataHome(get); got != "/xdg/agentrun" {
		t.Fatalf("xdg %q", got)
	}
	env["AGENTRUN_HOME"] = "/data"
	if got := DataHome(get); got != "/data" {
		t.Fatalf("AGENTRUN_HOME %q", got)
	}
}

func TestOpenEnvReadsConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg", "agentrun", "config.toml")
	_ = os.MkdirAll(filepath.Dir(cfg), 0o755)
	_ = os.WriteFile(cfg, []byte("max_parallel = 3\n"), 0o644)
	env := map[string]string{"AGENTRUN_HOME": filepath.Join(dir, "data"), "XDG_CONFIG_HOME": filepath.Join(dir, "cfg")}
	app := &App{Getenv: func(k string) string { return env[k] }, Deps: testDeps}
	e, err := app.openEnv()
	if err != nil {
		t.Fatal(err)
	}
	if e.Settings.MaxParallel != 3 || e.Home != filepath.Join(dir, "data") {
		t.Fatalf("%+v", e.Settings)
	}
	_ = os.WriteFile(cfg, []byte("max_parallel = \"x\"\n"), 0o644)
	app = &App{Getenv: func(k string) string { return env[k] }, Deps: testDeps}
	// A bad config fails only what uses a setting.
	e, err = app.openEnv()
	if err != nil {
		t.Fatalf("a bad config stopped a command that uses no setting: %v", err)
	}
	if _, err := e.Configured(); !catalog.Has(err, catalog.BadConfig) {
		t.Fatalf("bad config: %v", err)
	}
}
