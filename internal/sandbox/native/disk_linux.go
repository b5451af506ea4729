package native

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/sandbox"
)

// Disk defaults for zero limits.
const (
	defaultDisk       = 16 << 30
	defaultDiskInodes = 1_000_000
	// diskInterval is the shortest time between two samples of the host
	// directories; a walk that takes longer than diskInterval/diskDuty
	// spaces the samples further (at most a tenth of a core).
	diskInterval = time.Second
	diskDuty     = 10
)

// diskWatch samples what the sandbox holds in the host directories it can
// write (workspace, HOME) and its tmpfs mounts, and kills the sandbox
// past the bound. The kernel bounds the tmpfs mounts and each file on its
// own; this bounds the whole.
type diskWatch struct {
	dirs                []string // host directories
	tmpfs               []string // tmpfs mounts, seen from the host through /proc/<init>/root
	maxBytes, maxInodes int64
	done                <-chan struct{} // closed when the sandbox has ended

	mu  sync.Mutex
	err error
}

func (w *diskWatch) exceeded() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// run samples until the sandbox ends or passes the bound; then it kills it.
func (w *diskWatch) run(kill func()) {
	if w == nil {
		return
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
		}
		t0 := time.Now()
		bytes, inodes := w.sample()
		if bytes > w.maxBytes || inodes > w.maxInodes {
			select {
			case <-w.done:
				return // ended meanwhile: nothing to stop
			default:
			}
			w.mu.Lock()
			w.err = fmt.Errorf("%w: the workspace, HOME, /tmp and /dev/shm hold %s",
				sandbox.ErrDiskExceeded, describeUse(bytes, inodes, w.maxBytes, w.maxInodes))
			w.mu.Unlock()
			kill()
			return
		}
		t.Reset(max(diskInterval, diskDuty*time.Since(t0)))
	}
}

func describeUse(bytes, inodes, maxBytes, maxInodes int64) string {
	if bytes > maxBytes {
		return fmt.Sprintf("more than %d bytes (the bound, --disk)", maxBytes)
	}
	return fmt.Sprintf("more than %d files and directories (the bound, --disk-inodes)", maxInodes)
}

// sample counts blocks and inodes, stopping as soon as either passes the
// bound: a walk costs at most maxInodes entries.
func (w *diskWatch) sample() (bytes, inodes int64) {
	for _, m := range w.tmpfs {
		var st unix.Statfs_t
		if unix.Statfs(m, &st) != nil || st.Type != unix.TMPFS_MAGIC {
			continue
		}
		bytes += int64(st.Blocks-st.Bfree) * st.Bsize
		inodes += int64(st.Files - st.Ffree)
	}
	type key struct{ dev, ino uint64 }
	seen := map[key]bool{} // hard links count once
	for _, dir := range w.dirs {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if bytes > w.maxBytes || inodes > w.maxInodes {
				return filepath.SkipAll
			}
			if err != nil || d == nil {
				return nil // vanished or unreadable: counted as far as seen
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return nil
			}
			if st.Nlink > 1 && !d.IsDir() {
				k := key{uint64(st.Dev), st.Ino}
				if seen[k] {
					return nil
				}
				seen[k] = true
			}
			inodes++
			bytes += st.Blocks * 512
			return nil
		})
	}
	return bytes, inodes
}

// diskLimits resolves the disk bound of l and the tmpfs options it gives.
func diskLimits(l sandbox.Limits) (bytes, inodes int64) {
	return orDefault(l.DiskBytes, defaultDisk), orDefault(l.DiskInodes, defaultDiskInodes)
}

// newDiskWatch is the watch of the sandbox whose init is p; its run
// samples.
func newDiskWatch(p *proc, c *config, bytes, inodes int64) *diskWatch {
	root := "/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/root"
	w := &diskWatch{
		dirs:     []string{c.Workspace},
		tmpfs:    []string{root + "/tmp", root + "/dev/shm"},
		maxBytes: bytes, maxInodes: inodes, done: p.done,
	}
	if c.Home != "" {
		w.dirs = append(w.dirs, c.Home)
	} else {
		w.tmpfs = append(w.tmpfs, root+homeDir)
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
			diskInterval, bytes, inodes, c.FileSize),
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
