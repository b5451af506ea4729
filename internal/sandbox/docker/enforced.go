package docker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/internal/sandbox/diskwatch"
	"github.com/moby/moby/api/types/container"
)

// enforced reads what the engine applied to the container (its inspect
// record), feature by feature; what the inside checked itself before
// serving (no capability, no_new_privs, read-only root) is said so.
func enforced(in container.InspectResponse, eng engineInfo) map[string]string {
	m := map[string]string{}
	hc := in.HostConfig
	if hc == nil {
		hc = &container.HostConfig{}
	}
	cfg := in.Config
	if cfg == nil {
		cfg = &container.Config{}
	}
	if !hc.PidMode.IsHost() && !hc.IpcMode.IsHost() && !hc.UTSMode.IsHost() && !hc.Privileged {
		m["namespaces"] = "enforced: the container's own pid, mount, network, ipc and uts namespaces"
	} else {
		m["namespaces"] = fmt.Sprintf("unavailable: pid %q, ipc %q, uts %q, privileged %v", hc.PidMode, hc.IpcMode, hc.UTSMode, hc.Privileged)
	}
	switch {
	case eng.rootless:
		m["userns"] = "enforced: a rootless engine"
	case hc.UsernsMode != "" && !hc.UsernsMode.IsHost():
		m["userns"] = "enforced: " + string(hc.UsernsMode)
	default:
		m["userns"] = "unavailable: a rootful engine, the container's uids are the host's"
	}
	if uid, _, _ := strings.Cut(cfg.User, ":"); uid == "0" || uid == "" || uid == "root" {
		m["user"] = "unavailable: runs as root (the host user is root), with every capability dropped"
	} else {
		m["user"] = "enforced: uid:gid " + cfg.User
	}
	if slices.ContainsFunc(hc.CapDrop, func(c string) bool { return strings.EqualFold(c, "ALL") }) && len(hc.CapAdd) == 0 {
		m["caps"] = "enforced: every capability dropped (checked inside)"
	} else if len(hc.CapAdd) == 0 {
		// Some engines list the dropped capabilities rather than ALL; the
		// inside refused to serve with any capability left.
		m["caps"] = "enforced: no capability in any set (checked inside)"
	} else {
		m["caps"] = "unavailable: capabilities added: " + strings.Join(hc.CapAdd, ",")
	}
	if slices.ContainsFunc(hc.SecurityOpt, func(o string) bool {
		return strings.HasPrefix(o, "no-new-privileges") && !strings.HasSuffix(o, "false")
	}) {
		m["no_new_privs"] = "enforced (checked inside)"
	} else {
		m["no_new_privs"] = "enforced: checked inside (the engine's record does not list it)"
	}
	switch {
	case slices.Contains(hc.SecurityOpt, "seccomp=unconfined") || slices.Contains(hc.SecurityOpt, "seccomp:unconfined"):
		m["seccomp"] = "enforced: agentrun's filter (loaded by the init); the engine's profile is off (seccomp=unconfined)"
	case eng.seccomp != "":
		m["seccomp"] = "enforced: agentrun's filter (loaded by the init) over the engine's " + eng.seccomp + " profile"
	default:
		m["seccomp"] = "enforced: agentrun's filter (loaded by the init); the engine applies no profile of its own"
	}
	if hc.ReadonlyRootfs {
		m["read_only_root"] = "enforced (checked inside)"
	} else {
		m["read_only_root"] = "enforced: checked inside (the engine's record does not say)"
	}
	if string(hc.NetworkMode) == "none" {
		m["network"] = "enforced: no network but loopback; bridges to the host's proxy and gateway sockets"
	} else {
		m["network"] = "unavailable: network mode " + string(hc.NetworkMode)
	}
	r := hc.Resources
	m["memory"] = positive(r.Memory, "bytes (cgroup)")
	if r.PidsLimit != nil {
		m["pids"] = positive(*r.PidsLimit, "(cgroup)")
	} else {
		m["pids"] = "unavailable: no pids limit"
	}
	switch {
	case r.NanoCPUs > 0:
		m["cpu"] = "enforced: " + strconv.FormatFloat(float64(r.NanoCPUs)/1e9, 'f', -1, 64) + " CPUs (cgroup)"
	case r.CPUQuota > 0 && r.CPUPeriod > 0:
		m["cpu"] = "enforced: " + strconv.FormatFloat(float64(r.CPUQuota)/float64(r.CPUPeriod), 'f', -1, 64) + " CPUs (cgroup)"
	default:
		m["cpu"] = "unavailable: no CPU quota"
	}
	for _, name := range []string{"nofile", "nproc", "fsize", "core"} {
		key := "rlimit_" + name
		m[key] = "unavailable: not set"
		for _, u := range r.Ulimits {
			// Podman names them RLIMIT_NOFILE, Docker nofile.
			if u != nil && strings.EqualFold(strings.TrimPrefix(strings.ToUpper(u.Name), "RLIMIT_"), name) {
				m[key] = fmt.Sprintf("enforced: %d", u.Hard)
			}
		}
	}
	if opts, ok := hc.Tmpfs["/tmp"]; ok && strings.Contains(opts, "size=") {
		m["disk_tmpfs"] = "enforced: /tmp is a tmpfs, " + sizeOpt(opts)
	} else {
		m["disk_tmpfs"] = "unavailable: /tmp is not a bounded tmpfs"
	}
	return m
}

func positive(v int64, unit string) string {
	if v > 0 {
		return fmt.Sprintf("enforced: %d %s", v, unit)
	}
	return "unavailable: no limit"
}

func sizeOpt(opts string) string {
	for _, o := range strings.Split(opts, ",") {
		if strings.HasPrefix(o, "size=") {
			return o
		}
	}
	return opts
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// diskEnforced describes the disk bound for Enforced: the kernel bounds
// /tmp (its size) and each file (RLIMIT_FSIZE); the whole is sampled.
func diskEnforced(p *plan) string {
	return fmt.Sprintf("sampled every %v or more: the workspace, HOME and /tmp together; the sandbox is killed past %d bytes or %d inodes (each file: RLIMIT_FSIZE %d)",
		diskwatch.Interval, p.diskBytes, p.diskInodes, p.fsize)
}
