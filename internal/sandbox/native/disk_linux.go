package native

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/diskwatch"
)

// Disk defaults for zero limits.
const (
	defaultDisk       = 16 << 30
	defaultDiskInodes = 1_000_000
)

// diskLimits resolves the disk bound of l and the tmpfs options it gives.
func diskLimits(l sandbox.Limits) (bytes, inodes int64) {
	return orDefault(l.DiskBytes, defaultDisk), orDefault(l.DiskInodes, defaultDiskInodes)
}

// newDiskWatch is the watch of the sandbox whose init is p; its Run
// samples.
func newDiskWatch(p *proc, c *config, bytes, inodes int64) *diskwatch.Watch {
	root := "/proc/" + strconv.Itoa(p.process.Pid) + "/root"
	w := &diskwatch.Watch{
		Dirs:     []string{c.Workspace},
		Tmpfs:    []string{root + "/tmp", root + "/dev/shm"},
		MaxBytes: bytes, MaxInodes: inodes, Done: p.done,
		What: "the workspace, HOME, /tmp and /dev/shm",
	}
	if c.Home != "" {
		w.Dirs = append(w.Dirs, c.Home)
	} else {
		w.Tmpfs = append(w.Tmpfs, root+homeDir)
	}
	return w
}

// diskEnforced describes the disk bound for Enforced.
func diskEnforced(c *config, bytes, inodes int64) map[string]string {
	where := "/tmp and /dev/shm"
	if c.Home == "" {
		where = "/tmp, /dev/shm and HOME"
	}
	return map[string]string{
		"disk_tmpfs": fmt.Sprintf("enforced: tmpfs size=%d,nr_inodes=%d on %s (ENOSPC)", c.TmpSize, c.TmpInodes, where),
		"disk": fmt.Sprintf("sampled every %v or more: the workspace, HOME, /tmp and /dev/shm together; the sandbox is killed past %d bytes or %d inodes (each file: RLIMIT_FSIZE %d)",
			diskwatch.Interval, bytes, inodes, c.FileSize),
	}
}

// minDataRlimit is the smallest RLIMIT_DATA memoryFallback sets.
const minDataRlimit = 256 << 20

// memoryFallback bounds memory per process (RLIMIT_DATA: private writable
// mappings, which PROT_NONE reservations such as V8's or Go's are not)
// when no memory cgroup is in force, and says so in out. pid 0 only
// describes it.
func memoryFallback(pid int, memory int64, out map[string]string) error {
	why, ok := out["memory"]
	if ok && why == "enforced" {
		return nil
	}
	data, raised := memory, ""
	if data < minDataRlimit {
		data = minDataRlimit
		raised = fmt.Sprintf(", raised from the bound of %d: every Go program, the sandbox's own runner too, maps about 100 MiB at start", memory)
	}
	if pid > 0 {
		rl := unix.Rlimit{Cur: uint64(data), Max: uint64(data)}
		if err := unix.Prlimit(pid, unix.RLIMIT_DATA, &rl, nil); err != nil {
			out["memory"] = fmt.Sprintf("unavailable: %s; RLIMIT_DATA: %v", trimUnavailable(why), err)
			return err
		}
	}
	out["memory"] = fmt.Sprintf("enforced: RLIMIT_DATA %d bytes per process%s, not for the sandbox as a whole (no memory cgroup: %s)", data, raised, trimUnavailable(why))
	return nil
}

func trimUnavailable(s string) string {
	const p = "unavailable: "
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// LimitWarnings implements sandbox.LimitWarner: it makes (and removes at
// once) the cgroups a sandbox with lim would get, and lists the limits
// that would not be in force, or only per process.
func (b *Backend) LimitWarnings(ctx context.Context, lim sandbox.Limits) []string {
	_ = ctx
	sweepCgroups()
	cl := resolveCgLimits(lim)
	cg, out := setupCgroups(cgroupName("preflight"), cl)
	cg.remove()
	memoryFallback(0, cl.Memory, out)
	var warn []string
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := out[k]
		switch {
		case v == "enforced":
		case k == "memory" && len(v) > 9 && v[:9] == "enforced:":
			warn = append(warn, "memory: "+v[len("enforced: "):])
		default:
			warn = append(warn, k+": "+trimUnavailable(v))
		}
	}
	return warn
}
