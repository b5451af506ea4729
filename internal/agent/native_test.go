package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var testNative = &Native{
	Launcher: "bin/cli.js",
	Targets: map[string]NativeTarget{
		"linux/amd64": {Package: "@acme/cli-linux-x64", Target: "x86_64-unknown-linux-musl"},
	},
	Program:    "bin/cli",
	RootEnv:    "CLI_PACKAGE_ROOT",
	ManagedEnv: "CLI_MANAGED_BY_NPM",
}

// npmLayout makes an npm install of @acme/cli under prefix (as npm
// install -g --prefix does) and returns the launcher's path and the
// native program's.
func npmLayout(t *testing.T, prefix string) (launcher, program string) {
	t.Helper()
	root := filepath.Join(prefix, "lib", "node_modules", "@acme", "cli")
	launcher = filepath.Join(root, "bin", "cli.js")
	pkg := filepath.Join(root, "node_modules", "@acme", "cli-linux-x64")
	program = filepath.Join(pkg, "vendor", "x86_64-unknown-linux-musl", "bin", "cli")
	write(t, launcher, "#!/usr/bin/env node\n", 0o755)
	write(t, filepath.Join(pkg, "package.json"), "{}\n", 0o644)
	write(t, program, "\x7fELF", 0o755)
	return launcher, program
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestNativeResolvesTheNestedProgram(t *testing.T) {
	prefix, _ := filepath.EvalSymlinks(t.TempDir())
	launcher, program := npmLayout(t, prefix)
	got, env, ok := testNative.Resolve(launcher, "linux", "amd64")
	if !ok || got != program {
		t.Fatalf("Resolve = %q, %v; want %q", got, ok, program)
	}
	root := filepath.Join(prefix, "lib", "node_modules", "@acme", "cli")
	if want := []string{"CLI_PACKAGE_ROOT=" + root, "CLI_MANAGED_BY_NPM=1"}; !slices.Equal(env, want) {
		t.Fatalf("env = %q, want %q", env, want)
	}
	// A platform with no package, and no Native at all: the launcher.
	if _, _, ok := testNative.Resolve(launcher, "linux", "riscv64"); ok {
		t.Fatal("resolved for a platform the table does not name")
	}
	var none *Native
	if _, _, ok := none.Resolve(launcher, "linux", "amd64"); ok {
		t.Fatal("a nil Native resolved")
	}
	// The launcher found anywhere but at its place in its package.
	other := filepath.Join(filepath.Dir(launcher), "other.js")
	write(t, other, "", 0o755)
	if _, _, ok := testNative.Resolve(other, "linux", "amd64"); ok {
		t.Fatal("resolved from a file that is not the launcher")
	}
}

// Every layout but npm's nested one runs the launcher: it may find
// another program than the nested one, set other variables, or find
// nothing the sandbox shows.
func TestNativeKeepsTheLauncher(t *testing.T) {
	cases := map[string]func(t *testing.T, prefix, launcher, program string){
		"no platform package": func(t *testing.T, prefix, launcher, program string) {
			must(t, os.RemoveAll(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(program))))))
		},
		"sibling platform package": func(t *testing.T, prefix, launcher, program string) {
			nested := filepath.Join(prefix, "lib", "node_modules", "@acme", "cli", "node_modules")
			must(t, os.Rename(filepath.Join(nested, "@acme", "cli-linux-x64"), filepath.Join(prefix, "lib", "node_modules", "@acme", "cli-linux-x64")))
		},
		"program not executable": func(t *testing.T, prefix, launcher, program string) {
			must(t, os.Chmod(program, 0o644))
		},
		"program a directory": func(t *testing.T, prefix, launcher, program string) {
			must(t, os.Remove(program))
			must(t, os.Mkdir(program, 0o755))
		},
		"program a link out of the package": func(t *testing.T, prefix, launcher, program string) {
			outside := filepath.Join(prefix, "elsewhere")
			write(t, outside, "\x7fELF", 0o755)
			must(t, os.Remove(program))
			must(t, os.Symlink(outside, program))
		},
		"pnpm": func(t *testing.T, prefix, launcher, program string) {
			write(t, filepath.Join(prefix, "lib", "node_modules", ".modules.yaml"), "", 0o644)
		},
		"vite-plus": func(t *testing.T, prefix, launcher, program string) {
			// Vite+ installs under packages/@acme/cli/<id> and records
			// the install in packages/@acme/cli.json.
			packages, _, _ := strings.Cut(prefix, "/@acme/cli/install-1")
			write(t, filepath.Join(packages, "@acme", "cli.json"), "{}", 0o644)
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			prefix, _ := filepath.EvalSymlinks(t.TempDir())
			if name == "vite-plus" {
				prefix = filepath.Join(prefix, "packages", "@acme", "cli", "install-1")
			}
			launcher, program := npmLayout(t, prefix)
			change(t, prefix, launcher, program)
			if got, env, ok := testNative.Resolve(launcher, "linux", "amd64"); ok {
				t.Fatalf("Resolve = %q %q, want the launcher", got, env)
			}
		})
	}
	t.Run("pnpm store and bun", func(t *testing.T) {
		for _, dir := range []string{"node_modules/.pnpm/@acme+cli@1.0.0", ".bun/install/global"} {
			prefix, _ := filepath.EvalSymlinks(t.TempDir())
			launcher, _ := npmLayout(t, filepath.Join(prefix, dir))
			if got, _, ok := testNative.Resolve(launcher, "linux", "amd64"); ok {
				t.Fatalf("%s: Resolve = %q, want the launcher", dir, got)
			}
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPackageRoot(t *testing.T) {
	for file, want := range map[string]string{
		"/p/lib/node_modules/@openai/codex/bin/codex.js": "/p/lib/node_modules/@openai/codex",
		"/p/lib/node_modules/opencode-ai/bin/opencode":   "/p/lib/node_modules/opencode-ai",
		"/usr/local/bin/claude":                          "",
	} {
		if got := PackageRoot(file); got != want {
			t.Errorf("PackageRoot(%s) = %q, want %q", file, got, want)
		}
	}
}
