package sandboxtest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Fixture file contents.
const (
	readme  = "hello\nworld\n"
	mainGo  = "package main\n\nfunc main() {\n\tprintln(\"Hello\")\n}\n"
	utilGo  = "package util\n\n// Func does nothing.\nfunc Func() {}\n"
	secret  = "outside-secret\n"
	bigSize = 1<<20 + 1 // one byte over runner.DefaultReadCap
)

// makeFixture makes the fixture tree under dir/ws (and a secret beside it
// that the workspace links to) and returns the workspace path.
func makeFixture(t testing.TB, dir string) string {
	t.Helper()
	ws := filepath.Join(dir, "ws")
	files := map[string]string{
		"README.md":           readme,
		"src/main.go":         mainGo,
		"src/util/x.go":       utilGo,
		"notes/todo.txt":      "one func\ntwo\nthree func\n",
		"data.bin":            "func\x00binary\x00",
		".git/config":         "[core]\n\tfunc = 1\n",
		"big.txt":             strings.Repeat("x", bigSize),
		"dup.txt":             "same same\n",
		"script.sh":           "#!/bin/sh\necho script-ran\n",
		"empty/.keep":         "",
		"deep/a/b/c/leaf.txt": "leaf func\n",
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
	must(t, os.Chmod(filepath.Join(ws, "script.sh"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "secret.txt"), []byte(secret), 0o644))
	must(t, os.Symlink("README.md", filepath.Join(ws, "link-in")))
	must(t, os.Symlink("../secret.txt", filepath.Join(ws, "link-out")))
	must(t, os.Symlink("/etc", filepath.Join(ws, "link-etc")))
	must(t, os.Symlink("src", filepath.Join(ws, "link-dir")))
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))
	return ws
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
