package overlay

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount mounts the overlay of l on target (an existing directory), nosuid
// and nodev. The layers are named to the kernel as descriptors
// (/proc/self/fd/N) held only for the call, so the mount table shows no
// host path of theirs. It needs CAP_SYS_ADMIN in the user namespace that
// owns the caller's mount namespace (root, or a sandbox's init).
func Mount(l Layers, target string) error {
	if l.Lower == "" || l.Upper == "" || l.Work == "" {
		return errors.New("mount overlay: a layer is not named")
	}
	opts := []string{}
	// The lower layers go to the kernel uppermost first, ':' between.
	var lowers []string
	for _, p := range append(append([]string{}, l.Above...), l.Lower) {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("mount overlay: open lowerdir %s: %w", p, err)
		}
		defer unix.Close(fd)
		lowers = append(lowers, fdPath(fd, p))
	}
	opts = append(opts, "lowerdir="+strings.Join(lowers, ":"))
	for _, d := range []struct{ key, path string }{{"upperdir", l.Upper}, {"workdir", l.Work}} {
		fd, err := unix.Open(d.path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("mount overlay: open %s %s: %w", d.key, d.path, err)
		}
		defer unix.Close(fd)
		opts = append(opts, d.key+"="+fdPath(fd, d.path))
	}
	opts = append(opts, "userxattr")
	if err := unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, strings.Join(opts, ",")); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", target, err)
	}
	return nil
}

// fdPath names the directory open at fd for the mount options: through
// /proc when /proc is there, else by its own path (escaped for the
// option parser).
func fdPath(fd int, path string) string {
	p := "/proc/self/fd/" + strconv.Itoa(fd)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`)
	return r.Replace(path)
}

// Unmount detaches the overlay at target.
func Unmount(target string) error {
	if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount overlay at %s: %w", target, err)
	}
	return nil
}

// IsOpaque reports whether the directory open at fd is opaque: it
// replaces the lower directory of its path instead of merging with it.
// As the kernel does, only the one-byte value "y" counts.
func IsOpaque(fd int) (bool, error) {
	var buf [1]byte
	n, err := unix.Fgetxattr(fd, OpaqueXattr, buf[:])
	switch {
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.ERANGE):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read %s: %w", OpaqueXattr, err)
	}
	return n == 1 && buf[0] == 'y', nil
}
