package native

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroups are the per-sandbox cgroup directories made on the host.
type cgroups struct {
	dirs  []string
	ctrls map[string][]string // dir -> the controllers whose limits it holds
	v2    string              // the dir in the v2 hierarchy, if one was made
}

func (cg *cgroups) made(dir string, ctrls ...string) {
	if cg.ctrls == nil {
		cg.ctrls = map[string][]string{}
	}
	if _, ok := cg.ctrls[dir]; !ok {
		cg.dirs = append(cg.dirs, dir)
	}
	cg.ctrls[dir] = append(cg.ctrls[dir], ctrls...)
}

// cgPrefix starts the name of every cgroup a sandbox gets.
const cgPrefix = "agentrun-"

// cgroupName names a sandbox's cgroups after its run and the process
// that makes them: "agentrun-<run>-<pid>-<random>". A stale one (its
// maker is dead) is removed by the next sandbox's sweep.
func cgroupName(runID string) string {
	return cgPrefix + safeName(runID) + "-" + strconv.Itoa(os.Getpid()) + "-" + randomHex(4)
}

// cgLimits are the resolved limits put in cgroups.
type cgLimits struct {
	Memory int64
	Pids   int64
	CPUs   float64
}

// findCgroups maps each controller (and "" for the v2 unified tree) to
// this process's cgroup directory.
func findCgroups() (v1 map[string]string, v2 string) {
	v1 = map[string]string{}
	own := map[string]string{} // hierarchy key -> path
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return v1, ""
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 {
			own[parts[1]] = parts[2]
		}
	}
	f.Close()
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return v1, ""
	}
	defer mi.Close()
	sc = bufio.NewScanner(mi)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+4 || len(fields) < 5 {
			continue
		}
		root, mnt, fstype, opts := fields[3], fields[4], fields[sep+1], fields[sep+3]
		rel := func(p string) (string, bool) {
			r, err := filepath.Rel(root, p)
			if err != nil || strings.HasPrefix(r, "..") {
				return "", false
			}
			return filepath.Join(mnt, r), true
		}
		switch fstype {
		case "cgroup2":
			if p, ok := own[""]; ok {
				if d, ok := rel(p); ok {
					v2 = d
				}
			}
		case "cgroup":
			var ctrls []string
			for _, o := range strings.Split(opts, ",") {
				if slices.Contains(cgControllers, o) {
					ctrls = append(ctrls, o)
				}
			}
			for key, p := range own {
				keyCtrls := strings.Split(key, ",")
				for _, c := range ctrls {
					for _, k := range keyCtrls {
						if k == c {
							if d, ok := rel(p); ok {
								v1[c] = d
							}
						}
					}
				}
			}
		}
	}
	return v1, v2
}

// setupCgroups makes a cgroup per controller for one sandbox and writes
// its limits. What cannot be done is reported, never pretended.
func setupCgroups(name string, lim cgLimits) (*cgroups, map[string]string) {
	cg, out := makeCgroups(name)
	cg.limit(lim, out)
	return cg, out
}

// cgControllers are the controllers whose limits a sandbox gets.
var cgControllers = []string{"memory", "pids", "cpu"}

// makeCgroups makes a cgroup per controller for one sandbox, without
// limits yet (limit writes them): out says which controllers cannot have
// one, and why.
func makeCgroups(name string) (*cgroups, map[string]string) {
	cg := &cgroups{}
	out := map[string]string{}
	v1, v2 := findCgroups()
	var v2Want []string
	for _, ctrl := range cgControllers {
		base, ok := v1[ctrl]
		if !ok {
			v2Want = append(v2Want, ctrl)
			continue
		}
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			out[ctrl] = fmt.Sprintf("unavailable: cannot create cgroup v1 %s: %v", dir, errors.Unwrap(err))
			continue
		}
		cg.made(dir, ctrl)
	}
	if len(v2Want) > 0 {
		cg.makeV2(v2, name, v2Want, out)
	}
	return cg, out
}

// limit writes lim into the cgroup of each controller that has one and
// is not reported unavailable in out, and reports in out whether it is
// enforced.
func (cg *cgroups) limit(lim cgLimits, out map[string]string) {
	v1 := map[string]map[string]string{
		"memory": {"memory.limit_in_bytes": strconv.FormatInt(lim.Memory, 10), "memory.memsw.limit_in_bytes": strconv.FormatInt(lim.Memory, 10)},
		"pids":   {"pids.max": strconv.FormatInt(lim.Pids, 10)},
		"cpu":    {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": strconv.FormatInt(int64(lim.CPUs*100000), 10)},
	}
	v2 := map[string]map[string]string{
		"memory": {"memory.max": strconv.FormatInt(lim.Memory, 10), "memory.swap.max": "0"},
		"pids":   {"pids.max": strconv.FormatInt(lim.Pids, 10)},
		"cpu":    {"cpu.max": fmt.Sprintf("%d 100000", int64(lim.CPUs*100000))},
	}
	optional := map[string]bool{"memory.memsw.limit_in_bytes": true, "memory.swap.max": true}
	for _, dir := range cg.dirs {
		files := v1
		if dir == cg.v2 {
			files = v2
		}
		for _, c := range cg.ctrls[dir] {
			if _, done := out[c]; done {
				continue
			}
			if err := writeFiles(dir, files[c], optional); err != nil {
				out[c] = "unavailable: " + err.Error()
				continue
			}
			out[c] = "enforced"
		}
	}
}

// rename gives the cgroups name, where the hierarchy lets it: cgroup v1
// does, v2 does not (those keep the name they were made with).
func (cg *cgroups) rename(name string) {
	for i, d := range cg.dirs {
		to := filepath.Join(filepath.Dir(d), name)
		if os.Rename(d, to) != nil {
			continue
		}
		cg.ctrls[to] = cg.ctrls[d]
		delete(cg.ctrls, d)
		cg.dirs[i] = to
		if cg.v2 == d {
			cg.v2 = to
		}
	}
}

// joinedCgroups are the cgroups an init started ahead joined, without
// limits, and what could not be made or joined.
type joinedCgroups struct {
	cg  *cgroups
	out map[string]string
}

// joinAhead puts pid, an init started ahead, in cgroups of its own
// without limits. Joining takes the kernel an RCU grace period (8-11 ms
// on the machines here, nearly all of it waiting), so it is done while
// the init waits for its sandbox rather than on the start's path; the
// limits are written once the sandbox's are known (joinCgroups), before
// the init starts anything.
func joinAhead(pid int) joinedCgroups {
	sweepCgroups()
	cg, out := makeCgroups(cgroupName("ahead"))
	cg.add(pid, out)
	return joinedCgroups{cg, out}
}

// joinCgroups puts pid, a sandbox's init, in cgroups of its own with
// lim: those it joined when it was started ahead (joined, from
// joinAhead), named after the run now, or new ones.
func joinCgroups(runID string, pid int, lim cgLimits, joined <-chan joinedCgroups) (*cgroups, map[string]string) {
	if joined != nil {
		j := <-joined
		j.cg.rename(cgroupName(runID))
		j.cg.limit(lim, j.out)
		return j.cg, j.out
	}
	sweepCgroups()
	cg, out := setupCgroups(cgroupName(runID), lim)
	cg.add(pid, out)
	return cg, out
}

func (cg *cgroups) makeV2(base, name string, want []string, out map[string]string) {
	unavailable := func(why string) {
		for _, c := range want {
			out[c] = "unavailable: " + why
		}
	}
	if base == "" {
		unavailable("no cgroup v2 hierarchy and no v1 controller for it")
		return
	}
	base = delegatedBase(base, want)
	have := readSet(filepath.Join(base, "cgroup.controllers"))
	enabled := readSet(filepath.Join(base, "cgroup.subtree_control"))
	var missing []string
	for _, c := range want {
		if !have[c] {
			missing = append(missing, c)
		} else if !enabled[c] {
			// Works only if the cgroup is delegated to us and holds no
			// processes of its own (the no-internal-process rule).
			if os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+"+c), 0) != nil {
				missing = append(missing, c)
			}
		}
	}
	for _, c := range missing {
		out[c] = fmt.Sprintf("unavailable: cgroup v2 controller %s is not delegated to %s", c, base)
	}
	if len(missing) == len(want) {
		return
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		for _, c := range want {
			if _, done := out[c]; !done {
				out[c] = fmt.Sprintf("unavailable: cannot create cgroup v2 %s: %v", dir, errors.Unwrap(err))
			}
		}
		return
	}
	cg.made(dir)
	cg.v2 = dir
	for _, c := range want {
		if _, done := out[c]; !done {
			cg.made(dir, c)
		}
	}
}

// delegatedBase is where this process may make v2 cgroups with the
// controllers in want: its own cgroup when it can enable them there, else
// the nearest ancestor that has them enabled for its children and that
// this process may move processes in (a delegated subtree, such as a
// systemd user manager's), else its own cgroup (and the caller reports
// what is missing).
func delegatedBase(own string, want []string) string {
	root := own
	for d := own; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "cgroup.controllers")); err != nil {
			break // above the cgroup2 mount
		}
		root = d
		if d == "/" {
			break
		}
	}
	for d := own; ; d = filepath.Dir(d) {
		if unix.Access(d, unix.W_OK) != nil || unix.Access(filepath.Join(d, "cgroup.procs"), unix.W_OK) != nil {
			return own // left the delegated subtree
		}
		enabled := readSet(filepath.Join(d, "cgroup.subtree_control"))
		all := true
		for _, c := range want {
			all = all && enabled[c]
		}
		if all {
			return d
		}
		if d == root {
			return own
		}
	}
}

func readSet(p string) map[string]bool {
	m := map[string]bool{}
	b, err := os.ReadFile(p)
	if err != nil {
		return m
	}
	for _, f := range strings.Fields(string(b)) {
		m[f] = true
	}
	return m
}

func writeFiles(dir string, files map[string]string, optional map[string]bool) error {
	// Deterministic order: a memsw limit must not be set below the memory
	// limit, so memory.limit_in_bytes goes first.
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	if len(keys) == 2 && keys[0] > keys[1] {
		keys[0], keys[1] = keys[1], keys[0]
	}
	for _, k := range keys {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(files[k]), 0); err != nil {
			if optional[k] {
				continue
			}
			return fmt.Errorf("write %s: %w", filepath.Join(dir, k), errors.Unwrap(err))
		}
	}
	return nil
}

// add puts pid in every cgroup. A cgroup the kernel does not let it join
// (a v2 subtree whose common ancestor is not ours to write) is removed
// and its controllers reported unavailable in out.
func (cg *cgroups) add(pid int, out map[string]string) {
	var kept []string
	for _, d := range cg.dirs {
		err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		if err == nil {
			kept = append(kept, d)
			continue
		}
		for _, c := range cg.ctrls[d] {
			out[c] = fmt.Sprintf("unavailable: cannot join cgroup %s: %v", d, errors.Unwrap(err))
		}
		os.Remove(d)
	}
	cg.dirs = kept
}

// sweepCgroups removes the cgroups stale sandboxes left next to the ones
// this process makes: those whose maker (the pid in the name) is dead,
// or, for names without one, those older than a minute. A cgroup that
// still holds a process is never removed (rmdir refuses it, also for
// processes of other pid namespaces); nor is one younger than a second,
// which its maker (perhaps in another pid namespace, where its pid means
// nothing here) may be about to join.
func sweepCgroups() (removed []string) {
	v1, v2 := findCgroups()
	bases := map[string]bool{}
	for _, d := range v1 {
		bases[d] = true
	}
	if v2 != "" {
		for _, c := range cgControllers {
			bases[delegatedBase(v2, []string{c})] = true
		}
		bases[v2] = true
	}
	for base := range bases {
		ents, err := os.ReadDir(base)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), cgPrefix) || !staleCgroup(filepath.Join(base, e.Name())) {
				continue
			}
			if os.Remove(filepath.Join(base, e.Name())) == nil {
				removed = append(removed, filepath.Join(base, e.Name()))
			}
		}
	}
	return removed
}

func staleCgroup(dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		return false
	}
	age := time.Since(fi.ModTime())
	if age < time.Second {
		return false
	}
	f := strings.Split(filepath.Base(dir), "-")
	if len(f) >= 4 {
		if pid, err := strconv.Atoi(f[len(f)-2]); err == nil && pid > 0 && unix.Kill(pid, 0) == unix.ESRCH {
			return true
		}
	}
	return age > time.Minute
}

// remove deletes the cgroups; their processes must be gone (it waits a
// little for exiting ones). Safe to call twice.
func (cg *cgroups) remove() error {
	var errs []error
	for _, d := range cg.dirs {
		var err error
		for i := 0; i < 50; i++ {
			err = os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
		}
	}
	cg.dirs = nil
	return errors.Join(errs...)
}
