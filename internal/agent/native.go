package agent

import (
	"os"
	"path/filepath"
	"strings"
)

// Native says how a CLI's npm launcher finds the program it runs. Some
// CLIs ship a native binary in a platform package and put on PATH a Node
// script that only finds that binary and execs it with two variables set
// (codex's bin/codex.js). A run starts the binary itself, as the launcher
// would, and saves the launcher's Node start: about 30 ms of a one-file
// codex run, 60 ms of `codex --version`, on Node 20.
//
// Only the plain npm layout is taken (the platform package nested in the
// CLI's own package, where Node's lookup from the launcher finds it
// first, and which the sandbox shows with the package). Anything else (a
// sibling or missing platform package, pnpm, bun, Vite+, whose launchers
// set other variables) runs the launcher as before.
type Native struct {
	// Launcher is the launcher's path in its package ("bin/codex.js").
	Launcher string
	// Targets are the platform packages by GOOS/GOARCH.
	Targets map[string]NativeTarget
	// Program is the program's path under the platform package's
	// vendor/<target> ("bin/codex").
	Program string
	// RootEnv is set to the launcher's package directory (its real path),
	// and ManagedEnv to "1", as the launcher sets them for npm.
	RootEnv, ManagedEnv string
}

// NativeTarget is one platform's package: its npm name and the target
// directory under its vendor/.
type NativeTarget struct {
	Package string // "@openai/codex-linux-x64"
	Target  string // "x86_64-unknown-linux-musl"
}

// Resolve is the program the launcher at launcher (a real path) runs on
// goos/goarch, with the variables it sets; ok false: run the launcher.
func (n *Native) Resolve(launcher, goos, goarch string) (program string, env []string, ok bool) {
	if n == nil {
		return "", nil, false
	}
	t, found := n.Targets[goos+"/"+goarch]
	root := PackageRoot(launcher)
	if !found || root == "" || launcher != filepath.Join(root, n.Launcher) || !npmInstall(root) {
		return "", nil, false
	}
	// Node looks the platform package up from the launcher's directory
	// upwards: the first node_modules that holds it is the package's own
	// (bin/node_modules, then node_modules), where npm nests it.
	for dir := filepath.Dir(launcher); strings.HasPrefix(dir, root); dir = filepath.Dir(dir) {
		pkg := filepath.Join(dir, "node_modules", t.Package)
		if _, err := os.Stat(filepath.Join(pkg, "package.json")); err != nil {
			continue
		}
		prog, err := filepath.EvalSymlinks(filepath.Join(pkg, "vendor", t.Target, n.Program))
		if err != nil || !strings.HasPrefix(prog, root+string(filepath.Separator)) || !executable(prog) {
			return "", nil, false
		}
		return prog, []string{n.RootEnv + "=" + root, n.ManagedEnv + "=1"}, true
	}
	return "", nil, false
}

// npmInstall says whether the package at root (a real path) was installed
// by npm: not by pnpm (its store, or a .modules.yaml in a node_modules
// above), bun (its global store) or Vite+ (a packages/<name>.json above).
func npmInstall(root string) bool {
	name := packageName(root)
	if strings.Contains(root, "/node_modules/.pnpm/") || strings.Contains(root, "/.bun/install/global/") {
		return false
	}
	for dir := filepath.Dir(root); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, "node_modules", ".modules.yaml")); err == nil {
			return false
		}
		if filepath.Base(dir) == "packages" {
			if _, err := os.Lstat(filepath.Join(dir, name+".json")); err == nil {
				return false
			}
		}
	}
	return true
}

// packageName is the npm name of the package directory root
// (node_modules/NAME or node_modules/@SCOPE/NAME).
func packageName(root string) string {
	if scope := filepath.Base(filepath.Dir(root)); strings.HasPrefix(scope, "@") {
		return scope + "/" + filepath.Base(root)
	}
	return filepath.Base(root)
}

// executable says whether path is a regular file someone may execute.
func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// PackageRoot is the node_modules package directory that holds file
// (node_modules/NAME or node_modules/@SCOPE/NAME), or "".
func PackageRoot(file string) string {
	dir := filepath.Dir(file)
	for dir != "/" && dir != "." {
		parent := filepath.Dir(dir)
		if filepath.Base(parent) == "node_modules" {
			return dir
		}
		if strings.HasPrefix(filepath.Base(parent), "@") && filepath.Base(filepath.Dir(parent)) == "node_modules" {
			return dir
		}
		dir = parent
	}
	return ""
}
