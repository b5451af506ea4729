package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/run"
)

// Include copies files (as ResolveInclude recorded them) from the working
// tree of repo into the new workspace ws, before anything has run in it:
// into its directory, which for an overlay is the run's own upper layer
// (the shared lower layer is never written). Each file is read again with
// symlink-safe calls and must still be what was recorded: one that
// changed since is an error, since the record says what the agent got.
// A path the base commit's tree has (or has a file where the path needs a
// directory) is an error too: the copy would change a tracked file.
func Include(ctx context.Context, ws Workspace, repo string, files []run.IncludedFile) error {
	if len(files) == 0 {
		return nil
	}
	lower := ""
	if l, ok := ws.(Layered); ok {
		lower = l.Layers().Lower
	}
	src, err := unix.Open(repo, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("include: open %s: %w", repo, err)
	}
	defer unix.Close(src)
	dst, err := unix.Open(ws.Dir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("include: open %s: %w", ws.Dir(), err)
	}
	defer unix.Close(dst)
	var low = -1
	if lower != "" {
		if low, err = unix.Open(lower, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("include: open %s: %w", lower, err)
		}
		defer unix.Close(low)
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := includeOne(src, dst, low, f); err != nil {
			return fmt.Errorf("include %s: %w", f.Path, err)
		}
	}
	return nil
}

// includeOne copies f from src into dst; low is the overlay's lower
// layer (-1: none), which must not have f.
func includeOne(src, dst, low int, f run.IncludedFile) error {
	content, mode, err := readIncludedPath(src, f.Path, MaxIncludeBytes)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(content)
	if hex.EncodeToString(sum[:]) != f.SHA256 || mode != f.Mode {
		return errors.New("it changed in your working tree since the run was submitted; submit again")
	}
	if low >= 0 {
		if err := absentIn(low, f.Path); err != nil {
			return err
		}
	}
	dir, name, err := openParent(dst, f.Path, true)
	if err != nil {
		return fmt.Errorf("the base commit's tree is in the way: %w", err)
	}
	defer unix.Close(dir)
	if mode == includeSymlink {
		if err := unix.Symlinkat(string(content), dir, name); err != nil {
			return inTheWay(err)
		}
		return nil
	}
	perm := uint32(0o644)
	if mode == includeExecutable {
		perm = 0o755
	}
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return inTheWay(err)
	}
	for b := content; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return err
		}
		b = b[n:]
	}
	if err := unix.Fchmod(fd, perm); err != nil { // past the umask
		unix.Close(fd)
		return err
	}
	return unix.Close(fd)
}

func inTheWay(err error) error {
	if errors.Is(err, unix.EEXIST) {
		return errors.New("the base commit's tree has this path")
	}
	return err
}

// absentIn checks that the tree at root neither has p nor a non-directory
// where p needs a directory.
func absentIn(root int, p string) error {
	comps := strings.Split(p, "/")
	for i := range comps {
		var st unix.Stat_t
		err := unix.Fstatat(root, strings.Join(comps[:i+1], "/"), &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return err
		}
		if i == len(comps)-1 || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return errors.New("the base commit's tree has " + path.Join(comps[:i+1]...))
		}
	}
	return nil
}

// DropIncluded takes the included files out of cs: they are the user's
// own, never the agent's work, so none is exported, whatever the agent
// did with it (nor anything under an included path). It returns how many
// changes it took out.
func DropIncluded(cs *ChangeSet, files []run.IncludedFile) (dropped int) {
	if cs == nil || len(files) == 0 {
		return 0
	}
	byPath := map[string]bool{}
	for _, f := range files {
		byPath[f.Path] = true
	}
	kept := cs.Changes[:0]
	for _, c := range cs.Changes {
		if byPath[c.Path] || includedAbove(byPath, c.Path) {
			dropped++
			continue
		}
		kept = append(kept, c)
	}
	clear(cs.Changes[len(kept):])
	cs.Changes = kept
	return dropped
}

// includedAbove reports whether p is under an included path.
func includedAbove(byPath map[string]bool, p string) bool {
	for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p[:i], '/') {
		if byPath[p[:i]] {
			return true
		}
	}
	return false
}

// ChangedIncluded lists the included files the agent changed in ws (their
// content or mode, or removed or replaced them), for the journal: what is
// in ws's directory (an overlay's upper layer holds them) is read with the
// same symlink-safe calls as the export's, and compared with the record.
func ChangedIncluded(ws Workspace, files []run.IncludedFile) []string {
	if len(files) == 0 {
		return nil
	}
	root, err := unix.Open(ws.Dir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(root)
	var changed []string
	for _, f := range files {
		content, mode, err := readIncludedPath(root, f.Path, MaxIncludeBytes)
		sum := sha256.Sum256(content)
		if err != nil || mode != f.Mode || hex.EncodeToString(sum[:]) != f.SHA256 {
			changed = append(changed, f.Path)
		}
	}
	return changed
}
