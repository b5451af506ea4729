package submit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/workspace"
)

// RepoConfigName is the repository's own configuration file, read from
// the base commit's objects (never from a working tree, never from the
// agent's workspace), as AGENTS.md is.
const RepoConfigName = ".agentrun.toml"

// maxRepoConfig caps .agentrun.toml.
const maxRepoConfig = 64 << 10

// RepoConfig is .agentrun.toml. What a repository says can only ask: its
// setup_allow opens nothing by itself (a repository cannot widen
// egress); the user's --setup-allow or config does.
type RepoConfig struct {
	Setup      string   `toml:"setup"`
	SetupAllow []string `toml:"setup_allow"`
}

// ReadRepoConfig reads .agentrun.toml at commit of the repository at dir
// (a zero RepoConfig when there is none), through cache (nil: none).
// Errors are catalog errors.
func ReadRepoConfig(ctx context.Context, cache *workspace.CommitCache, dir, commit string) (RepoConfig, error) {
	var c RepoConfig
	// dir was inspected already (submit.Service.Inspect): a work tree, or
	// a server's bare project repository.
	data, ok, err := cache.FileAt(ctx, dir, commit, RepoConfigName)
	if err != nil {
		return c, catalog.BadRepoConfig.Wrap(err, "%v", err)
	}
	if !ok {
		return c, nil
	}
	if len(data) > maxRepoConfig {
		return c, catalog.BadRepoConfig.New("%s at %.12s is %d bytes, more than %d", RepoConfigName, commit, len(data), maxRepoConfig)
	}
	md, err := toml.Decode(string(data), &c)
	if err != nil {
		return c, catalog.BadRepoConfig.Wrap(err, "%s at %.12s: %v", RepoConfigName, commit, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return c, catalog.BadRepoConfig.New("%s at %.12s: unknown key %q", RepoConfigName, commit, und[0].String())
	}
	return c, nil
}

// planSetup is the run's setup: the request's command, else the
// repository's; its allowlist is the user's alone. It warns about hosts
// the repository asks for that the user did not allow.
func planSetup(ctx context.Context, req Request, repo, base string) (*run.SetupSpec, []string, error) {
	if req.NoSetup {
		return nil, nil, nil
	}
	var rc RepoConfig
	if req.Setup == "" || len(req.SetupAllow) == 0 {
		var err error
		if rc, err = ReadRepoConfig(ctx, req.Commits, repo, base); err != nil {
			return nil, nil, err
		}
	}
	spec := &run.SetupSpec{Command: req.Setup, Source: "flag"}
	if spec.Command == "" {
		spec.Command, spec.Source = strings.TrimSpace(rc.Setup), RepoConfigName
	}
	if spec.Command == "" {
		return nil, nil, nil
	}
	if strings.ContainsRune(spec.Command, 0) {
		return nil, nil, catalog.BadRepoConfig.New("the setup command holds a NUL byte")
	}
	allow, err := canonicalAllow(req.SetupAllow)
	if err != nil {
		return nil, nil, err
	}
	spec.Allow = allow
	var warnings []string
	if w := loopbackWarning(f("setup_allow"), req.SetupAllow); w != "" {
		warnings = append(warnings, w)
	}
	var missing []string
	asked, err := canonicalAllow(rc.SetupAllow)
	if err != nil {
		asked = rc.SetupAllow // (named as written: they open nothing either way)
	}
	for _, h := range asked {
		if !slices.Contains(allow, h) {
			missing = append(missing, h)
		}
	}
	if len(missing) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s asks for network to %s in setup; a repository cannot open it: allow it with ‹setup_allow› HOST (or setup_allow in config.toml)",
			RepoConfigName, strings.Join(missing, ", ")))
	}
	return spec, warnings, nil
}

// ToolchainNames are the toolchain caches a run may read.
var ToolchainNames = []string{"go", "npm", "pip", "cargo"}

// planToolchains finds the host's caches of the named toolchains (ones
// not on this machine are left out, with a warning).
func planToolchains(names []string, getenv func(string) string) ([]run.ToolchainCache, []string, error) {
	var out []run.ToolchainCache
	var warnings []string
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		if !slices.Contains(ToolchainNames, n) {
			return nil, nil, catalog.BadToolchain.New("%q", n)
		}
		tc := toolchainCache(n, getenv)
		if fi, err := os.Stat(tc.Path); tc.Path == "" || err != nil || !fi.IsDir() {
			warnings = append(warnings, fmt.Sprintf("the %s cache is not on this machine (%s); the run goes without it", n, cmpOr(tc.Path, "no path")))
			continue
		}
		out = append(out, tc)
	}
	return out, warnings, nil
}

// toolchainCache is where toolchain n keeps its cache on the host, and
// the variables that make it read from there and write nothing there.
func toolchainCache(n string, getenv func(string) string) run.ToolchainCache {
	home := getenv("HOME")
	tc := run.ToolchainCache{Name: n}
	switch n {
	case "go":
		tc.Path = toolOutput(getenv, "go", "env", "GOMODCACHE")
		if tc.Path == "" && home != "" {
			tc.Path = filepath.Join(home, "go", "pkg", "mod")
		}
		tc.Env = []string{"GOMODCACHE=" + tc.Path, "GOFLAGS=-mod=mod"}
	case "npm":
		tc.Path = cmpOr(getenv("npm_config_cache"), filepath.Join(home, ".npm"))
		// Offline first; no log files (npm writes them into its cache).
		tc.Env = []string{"npm_config_cache=" + tc.Path, "npm_config_prefer_offline=true", "npm_config_logs_max=0", "npm_config_update_notifier=false"}
	case "pip":
		tc.Path = cmpOr(getenv("PIP_CACHE_DIR"), filepath.Join(cmpOr(getenv("XDG_CACHE_HOME"), filepath.Join(home, ".cache")), "pip"))
		tc.Env = []string{"PIP_CACHE_DIR=" + tc.Path}
	case "cargo":
		// cargo writes locks into CARGO_HOME, so it cannot be pointed at a
		// read-only one: the registry is only made visible, at its path.
		tc.Path = filepath.Join(cmpOr(getenv("CARGO_HOME"), filepath.Join(home, ".cargo")), "registry")
	}
	if tc.Path != "" {
		tc.Path = filepath.Clean(tc.Path)
	}
	return tc
}

// toolOutput is the trimmed output of a host tool ("" when it fails).
func toolOutput(getenv func(string) string, name string, args ...string) string {
	path, err := lookPath(name, getenv("PATH"))
	if err != nil {
		return ""
	}
	cmd := exec.Command(path, args...)
	cmd.Env = []string{"PATH=" + getenv("PATH"), "HOME=" + getenv("HOME")}
	for _, k := range []string{"GOPATH", "GOMODCACHE", "GOENV", "XDG_CONFIG_HOME"} {
		if v := getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(out))
}

// lookPath finds name on path (the submitting user's PATH).
func lookPath(name, path string) (string, error) {
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
