package workspace

import "golang.org/x/sys/unix"

// DiskUse adds up the disk space (allocated blocks) of the tree at dir,
// without following symlinks, counting a file with several names once and
// staying on dir's file system. It looks at no more than maxEntries
// entries (0: no bound); complete is false when it stopped there, and the
// sum is then a lower bound. A missing dir uses nothing.
func DiskUse(dir string, maxEntries int) (bytes int64, entries int, complete bool) {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return 0, 0, true
	}
	w := &duWalk{dev: uint64(st.Dev), max: maxEntries, seen: map[[2]uint64]bool{}}
	w.add(&st)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			w.walk(fd, 0)
			_ = unix.Close(fd)
		}
	}
	return w.bytes, w.entries, !w.stopped
}

type duWalk struct {
	dev     uint64
	max     int
	seen    map[[2]uint64]bool
	bytes   int64
	entries int
	stopped bool
}

func (w *duWalk) add(st *unix.Stat_t) {
	w.entries++
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		k := [2]uint64{uint64(st.Dev), uint64(st.Ino)}
		if w.seen[k] {
			return
		}
		w.seen[k] = true
	}
	w.bytes += st.Blocks * 512
}

// walk adds what the directory open at fd holds.
func (w *duWalk) walk(fd, depth int) {
	if depth >= maxDepth {
		return
	}
	names, err := readNames(fd, 1<<30)
	if err != nil {
		return
	}
	for _, name := range names {
		if w.max > 0 && w.entries >= w.max {
			w.stopped = true
			return
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		w.add(&st)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || uint64(st.Dev) != w.dev {
			continue
		}
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // unreadable: counted, not entered
		}
		w.walk(sub, depth+1)
		_ = unix.Close(sub)
		if w.stopped {
			return
		}
	}
}
