package submit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/agent"
)

// helperProfile is a profile whose CLI (a script in a directory of its
// own) runs a helper "hx" from PATH, or from its data directory.
func helperProfile(t *testing.T) (agent.Info, string) {
	t.Helper()
	cliDir := t.TempDir()
	writeExec(t, filepath.Join(cliDir, "tcli"))
	return agent.Info{Name: "t", Binary: "tcli", Install: "install tcli", Helpers: []agent.Helper{{
		Name: "hx", What: "hx, which tcli's search runs", DataDir: "tcli/bin", Install: "install hx (apt install hx)",
	}}}, cliDir
}

func writeExec(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestLocateProfileHelpers: a profile's helper is found on PATH (a link
// resolved to its program), else in the CLI's data directory under
// $XDG_DATA_HOME or ~/.local/share; found outside the system directories
// it is recorded and made visible; found nowhere, or only as a link to a
// program of another name, it is missing, with a warning that names
// where it was looked for, what fails, and the fix.
func TestLocateProfileHelpers(t *testing.T) {
	p, cliDir := helperProfile(t)
	home, xdg, onPath := t.TempDir(), t.TempDir(), t.TempDir()
	env := map[string]string{"PATH": cliDir, "HOME": home}

	l, err := LocateProfile(p, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	inHome := filepath.Join(home, ".local/share/tcli/bin")
	if len(l.Helpers) != 0 || len(l.Missing) != 1 || !strings.Contains(l.Missing[0].Why, "neither on PATH nor in "+inHome) {
		t.Fatalf("nowhere: %+v", l)
	}
	w := l.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "hx (hx, which tcli's search runs)") || !strings.Contains(w[0], "those tools fail in the sandbox") ||
		!strings.HasSuffix(w[0], "install hx (apt install hx)") {
		t.Fatalf("warning: %q", w)
	}

	// In ~/.local/share/tcli/bin: found, visible, recorded.
	writeExec(t, filepath.Join(inHome, "hx"))
	l, _ = LocateProfile(p, envOf(env))
	if want := filepath.Join(inHome, "hx"); !slices.Equal(l.Helpers, []string{want}) || !slices.Contains(l.Visible, want) || len(l.Missing) != 0 {
		t.Fatalf("in the data home: %+v", l)
	}

	// $XDG_DATA_HOME replaces ~/.local/share.
	env["XDG_DATA_HOME"] = xdg
	l, _ = LocateProfile(p, envOf(env))
	if len(l.Missing) != 1 || !strings.Contains(l.Missing[0].Why, filepath.Join(xdg, "tcli/bin")) {
		t.Fatalf("XDG_DATA_HOME without it: %+v", l)
	}
	writeExec(t, filepath.Join(xdg, "tcli/bin/hx"))
	l, _ = LocateProfile(p, envOf(env))
	if !slices.Equal(l.Helpers, []string{filepath.Join(xdg, "tcli/bin/hx")}) {
		t.Fatalf("in XDG_DATA_HOME: %+v", l)
	}

	// On PATH first, through a link: the program it links to.
	real := filepath.Join(t.TempDir(), "hx")
	writeExec(t, real)
	if err := os.Symlink(real, filepath.Join(onPath, "hx")); err != nil {
		t.Fatal(err)
	}
	env["PATH"] = onPath + ":" + cliDir
	l, _ = LocateProfile(p, envOf(env))
	if !slices.Equal(l.Helpers, []string{real}) || !slices.Contains(l.Visible, real) || len(l.Missing) != 0 {
		t.Fatalf("on PATH: %+v", l)
	}

	// A link to a program of another name cannot be put on PATH as hx.
	other := filepath.Join(t.TempDir(), "hx-15")
	writeExec(t, other)
	os.Remove(filepath.Join(onPath, "hx"))
	if err := os.Symlink(other, filepath.Join(onPath, "hx")); err != nil {
		t.Fatal(err)
	}
	l, _ = LocateProfile(p, envOf(env))
	if len(l.Helpers) != 0 || len(l.Missing) != 1 || !strings.Contains(l.Missing[0].Why, "a program of another name, "+other) {
		t.Fatalf("a link to another name: %+v", l)
	}

	// A helper in the system directories (shown by every sandbox) is
	// neither recorded nor missing, whatever its links.
	p.Helpers[0].Name = "sh"
	env["PATH"] = "/usr/bin:/bin:" + cliDir
	l, _ = LocateProfile(p, envOf(env))
	if len(l.Helpers) != 0 || len(l.Missing) != 0 || slices.ContainsFunc(l.Visible, underSystem) {
		t.Fatalf("in the system directories: %+v", l)
	}
}

// TestLocateProfileHelperPathSeparator: a helper in a directory whose
// name holds PATH's separator cannot be put on PATH: missing, saying so.
func TestLocateProfileHelperPathSeparator(t *testing.T) {
	p, cliDir := helperProfile(t)
	home := filepath.Join(t.TempDir(), "a:b")
	writeExec(t, filepath.Join(home, ".local/share/tcli/bin/hx"))
	l, err := LocateProfile(p, envOf(map[string]string{"PATH": cliDir, "HOME": home}))
	if err != nil || len(l.Helpers) != 0 || len(l.Missing) != 1 || !strings.Contains(l.Missing[0].Why, "a directory PATH cannot name") {
		t.Fatalf("%+v %v", l, err)
	}
}
