package workspace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/workspace/overlay"
)

// scanUpper lists what changed in an overlay workspace by reading its
// upper layer alone: every entry there is something the agent wrote (or
// a copy the kernel made of a base file it opened for writing or whose
// metadata it changed), so the cost grows with the changes, not with the
// repository. The lower layer, the base checkout, is only opened for
// the .gitignore files of the directories the walk enters.
//
// The upper layer is read by the kernel's rules (overlay package):
//
//   - a whiteout (character device 0/0) deletes the base's entry of its
//     path and everything under it;
//   - an opaque directory replaces the base's directory: the base
//     entries under it that it does not hold are deleted;
//   - any other non-directory hides the base's directory of its path (its
//     entries are deleted), and a directory hides the base's file;
//   - everything else is checked as the plain checkout's scan checks it
//     (scan.go: symlink-safe reads, special files, hard links, .git
//     names, escaping links and the limits refused), and a file equal to
//     its base blob (a copy the kernel made) is no change.
//
// Nothing is refused for what only the kernel may write (the markers
// above, other extended attributes): such an entry, planted from outside
// the mount, only changes what is exported, through the same checks.
func scanUpper(ctx context.Context, upper, lower string, m *mappedManifest, count int, lim Limits) (*ChangeSet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u := &upperScan{scanner: newBaseScanner(ctx, m, m.format, count, lim)}
	u.noStat = true
	root, err := unix.Open(upper, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", upper, err)
	}
	defer func() { _ = unix.Close(root) }()
	lroot, err := unix.Open(lower, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("scan %s: open the lower layer: %w", upper, err)
	}
	defer func() { _ = unix.Close(lroot) }()
	var stack ignoreStack
	if l := u.readExclude(root); l != nil {
		stack = append(stack, l)
	}
	if err := u.walkUpper(root, lroot, "", 0, stack, false); err != nil {
		return nil, fmt.Errorf("scan %s: %w", upper, err)
	}
	if err := u.deletions(); err != nil {
		return nil, fmt.Errorf("scan %s: %w", upper, err)
	}
	if m.damaged() {
		return nil, fmt.Errorf("scan %s: read manifest: damaged record", upper)
	}
	sort.Slice(u.changes, func(i, j int) bool { return u.changes[i].Path < u.changes[j].Path })
	sort.Slice(u.refused, func(i, j int) bool { return u.refused[i].Path < u.refused[j].Path })
	return &ChangeSet{Changes: u.changes, Refused: u.refused}, nil
}

// upperScan is a scan of an overlay's upper layer.
type upperScan struct {
	*scanner
	hidden []hide // base paths the upper layer hides
}

// hide is a base path the upper layer hides: the entry at path itself
// (self), what is under it (below), or both.
type hide struct {
	path        string
	self, below bool
}

// walkUpper scans the upper directory open at fd, whose path is prefix
// (with a trailing slash, or empty at the root); lfd is the lower
// layer's directory of the same path, or -1 when there is none or the
// upper one is opaque.
func (u *upperScan) walkUpper(fd, lfd int, prefix string, depth int, stack ignoreStack, inIgnored bool) error {
	names, err := readNames(fd, u.maxVisited-u.visited)
	if err != nil {
		return fmt.Errorf("read directory %q: %w", prefix, err)
	}
	if !inIgnored {
		// The merged directory's .gitignore: the upper one when the upper
		// layer has that name (a whiteout reads as none), else the base's.
		from := lfd
		if slices.Contains(names, ".gitignore") {
			from = fd
		}
		if from >= 0 {
			if l := u.readIgnore(from, prefix); l != nil {
				stack = append(stack[:len(stack):len(stack)], l)
			}
		}
	}
	for _, name := range names {
		if prefix == "" && name == ".git" {
			continue // the workspace's own repository
		}
		u.visited++
		if u.visited > u.maxVisited {
			return fmt.Errorf("more than %d entries in the workspace: %w", u.maxVisited, ErrTooLarge)
		}
		if u.visited%256 == 0 && u.ctx.Err() != nil {
			return u.ctx.Err()
		}
		if err := u.entry(fd, lfd, name, prefix+name, depth, stack, inIgnored); err != nil {
			return err
		}
	}
	return nil
}

// entry scans one upper entry, name in the directory open at fd.
func (u *upperScan) entry(fd, lfd int, name, p string, depth int, stack ignoreStack, inIgnored bool) error {
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return u.refuse(p, reasonUnreadable)
	}
	if overlay.IsWhiteout(&st) {
		u.hidden = append(u.hidden, hide{path: p, self: true, below: true})
		return nil
	}
	kind := uint32(st.Mode) & unix.S_IFMT
	i, tracked := u.base.find(p)
	if kind == unix.S_IFDIR {
		if tracked && u.base.at(i).mode != modeGitlink {
			u.hidden = append(u.hidden, hide{path: p, self: true}) // a directory over a base file
		}
		tracked = tracked || u.base.trackedDir(p)
	} else if u.base.trackedDir(p) {
		u.hidden = append(u.hidden, hide{path: p, below: true}) // a file over a base directory
	}
	ignored := inIgnored || ((!tracked || kind == unix.S_IFDIR) && stack.ignored(p, kind == unix.S_IFDIR))
	if ignored && !tracked {
		return nil // an untracked, ignored entry: not a change
	}
	switch kind {
	case unix.S_IFDIR:
		return u.upperDir(fd, lfd, name, p, depth, stack, ignored)
	case unix.S_IFREG:
		return u.file(fd, name, p, &st)
	case unix.S_IFLNK:
		return u.symlink(fd, name, p, &st)
	}
	return u.refuse(p, reasonSpecial)
}

// upperDir enters the upper directory name (path p) of the directory open
// at fd, with the lower one of the same path when it merges with it.
func (u *upperScan) upperDir(fd, lfd int, name, p string, depth int, stack ignoreStack, ignored bool) error {
	if i, ok := u.base.find(p); ok && u.base.at(i).mode == modeGitlink {
		u.markSeen(i)
		return u.submodule(fd, name, p)
	}
	if err := ValidatePath(p); err != nil {
		return u.refuse(p, err.Error())
	}
	if depth+1 >= maxDepth {
		return u.refuse(p, reasonDeep)
	}
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return u.refuse(p, reasonUnreadable)
	}
	defer func() { _ = unix.Close(sub) }()
	opaque, err := overlay.IsOpaque(sub)
	if err != nil {
		return u.refuse(p, reasonUnreadable)
	}
	lsub := -1
	if opaque {
		u.hidden = append(u.hidden, hide{path: p, below: true})
	} else if lfd >= 0 {
		if lsub, err = unix.Openat(lfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
			lsub = -1
		} else {
			defer func() { _ = unix.Close(lsub) }()
		}
	}
	return u.walkUpper(sub, lsub, p+"/", depth+1, stack, ignored)
}

// deletions records the base entries the upper layer hides, but those
// it holds itself (seen), submodules (never deleted, as in the plain
// scan) and those a refusal keeps. The manifest is sorted by path, so the
// entries under a path are one run of it.
func (u *upperScan) deletions() error {
	del := func(i int) error {
		e := u.base.at(i)
		if u.isSeen(i) || e.mode == modeGitlink || u.keptByRefusal(e.path) {
			return nil
		}
		u.markSeen(i)
		return u.addChange(Change{Path: e.path, Kind: "delete", Mode: e.mode})
	}
	for _, h := range u.hidden {
		if i, ok := u.base.find(h.path); ok && h.self {
			if err := del(i); err != nil {
				return err
			}
		}
		if h.below {
			if err := u.base.below(h.path, del); err != nil {
				return err
			}
		}
	}
	return nil
}
