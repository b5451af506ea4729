package supervisor

import "github.com/agentrun/agentrun/internal/run"

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
