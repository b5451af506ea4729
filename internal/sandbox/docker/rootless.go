package docker

import (
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
)

// rootlessEngine reports whether the engine at host runs as a user other
// than root: its socket (a local unix socket) belongs to another user than
// root, or the engine says so (Docker in rootless mode names "rootless" in
// its security options; Podman's compatible API does not).
func rootlessEngine(host string, securityOptions []string) bool {
	for _, o := range securityOptions {
		if slices.Contains(strings.Split(o, ","), "name=rootless") {
			return true
		}
	}
	u, err := url.Parse(host)
	if err != nil || u.Scheme != "unix" {
		return false
	}
	fi, err := os.Stat(u.Path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid != 0
}

// limitsRefusal is why an engine cannot run the sandbox with its limits,
// or nil: a rootless engine on cgroup v1 cannot apply memory, pids or CPU
// bounds (Podman prints a warning the API never passes on, and starts the
// container without them and without the ulimits), and the backend never
// runs with less isolation than asked.
func limitsRefusal(host string, rootless bool, cgroupVersion string) error {
	if rootless && cgroupVersion == "1" {
		return refuse("the engine at "+host+" is rootless on cgroup v1, where it cannot apply the memory, pids and CPU limits (it would start the container without them)",
			"use a rootful engine (DOCKER_HOST=unix:///run/podman/podman.sock or /var/run/docker.sock), or boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and delegate the memory, pids and cpu controllers to your user, or use --sandbox native")
	}
	return nil
}
