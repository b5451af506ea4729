package supervisor

import (
	"path/filepath"

	"github.com/agentrun/agentrun/internal/run"
)

// toolchainEnv is the environment that points the toolchains at the
// host's caches the run reads (submit chose them).
func toolchainEnv(tcs []run.ToolchainCache) []string {
	var env []string
	for _, tc := range tcs {
		env = append(env, tc.Env...)
	}
	return env
}

// toolchainPaths are the caches' host directories, made visible
// read-only.
func toolchainPaths(tcs []run.ToolchainCache) []string {
	var ps []string
	for _, tc := range tcs {
		ps = append(ps, tc.Path)
	}
	return ps
}

// setupToolchainEnv is what a setup command gets of the caches: it
// writes its own caches in its HOME (they become its layer), so it is not
// pointed at the read-only ones, which it can only read. Go takes the
// host's downloaded modules as its first proxy (a file:// GOPROXY over
// the cache's download directory), then the module proxy.
func setupToolchainEnv(tcs []run.ToolchainCache) []string {
	var env []string
	for _, tc := range tcs {
		if tc.Name == "go" {
			env = append(env, "GOPROXY=file://"+filepath.ToSlash(filepath.Join(tc.Path, "cache", "download"))+",https://proxy.golang.org,direct")
		}
	}
	return env
}
