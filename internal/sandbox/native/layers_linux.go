package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/bootid"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace/overlay"
)

// layersConfig checks spec's layers and returns them for the init (nil
// when the spec has none).
func layersConfig(spec sandbox.Spec) (*overlay.Layers, error) {
	l := spec.Layers
	if l == nil {
		return nil, nil
	}
	for _, p := range []struct{ name, path string }{{"lower", l.Lower}, {"upper", l.Upper}, {"work", l.Work}} {
		if !filepath.IsAbs(p.path) {
			return nil, fmt.Errorf("the workspace's %s layer must be an absolute path, got %q", p.name, p.path)
		}
		if fi, err := os.Stat(p.path); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("the workspace's %s layer %s is not a directory", p.name, p.path)
		}
	}
	var above []string
	for _, p := range l.Above {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("the workspace's layer must be an absolute path, got %q", p)
		}
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("the workspace's layer %s is not a directory", p)
		}
		above = append(above, filepath.Clean(p))
	}
	if filepath.Clean(l.Upper) != filepath.Clean(spec.Workspace) {
		return nil, fmt.Errorf("the workspace %s is not its upper layer %s", spec.Workspace, l.Upper)
	}
	return &overlay.Layers{Lower: filepath.Clean(l.Lower), Above: above, Upper: filepath.Clean(l.Upper), Work: filepath.Clean(l.Work)}, nil
}

// Probe fixture: what the probe's lower layer holds and the init does
// through the overlay (probeLayers).
const (
	probeKept = "kept"     // appended to: copied up
	probeGone = "gone"     // removed: a whiteout
	probeDir  = "dir"      // removed and made again: opaque
	probeText = "probed\n" // appended to probeKept
)

// ProbeLayers implements sandbox.LayerMounter: a throwaway sandbox (a
// whole setup, as Preflight's) mounts an overlay of layers made under
// scratch and edits through it; the host then checks what the kernel
// wrote in the upper layer.
//
// A success is remembered in scratch for the rest of the boot (by the
// same user, with the same kernel): the probe costs a sandbox start, and
// a run would otherwise pay it every time.
func (b *Backend) ProbeLayers(ctx context.Context, scratch string) error {
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return err
	}
	memo, stamp := filepath.Join(scratch, probeMemo), probeStamp()
	if got, err := os.ReadFile(memo); err == nil && string(got) == stamp {
		return nil
	}
	if err := b.probeLayers(ctx, scratch); err != nil {
		return err
	}
	_ = os.WriteFile(memo, []byte(stamp), 0o644)
	return nil
}

// probeMemo remembers a successful probe, in the probe's scratch
// directory.
const probeMemo = "layers-probe-ok"

// probeStamp is what a remembered probe must match: this boot, this
// user, this kernel.
func probeStamp() string {
	var u unix.Utsname
	_ = unix.Uname(&u)
	return fmt.Sprintf("%s %d %s\n", bootid.ID(), os.Getuid(), unix.ByteSliceToString(u.Release[:]))
}

// probeLayers is ProbeLayers without the memo.
func (b *Backend) probeLayers(ctx context.Context, scratch string) error {
	dir, err := os.MkdirTemp(scratch, "layers-probe-")
	if err != nil {
		return err
	}
	defer removeTree(dir)
	l := sandbox.Layers{Lower: filepath.Join(dir, "lower"), Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work")}
	for _, d := range []string{l.Lower, l.Upper, l.Work, filepath.Join(l.Lower, probeDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, f := range []string{probeKept, probeGone, filepath.Join(probeDir, "inner")} {
		if err := os.WriteFile(filepath.Join(l.Lower, f), []byte("base\n"), 0o644); err != nil {
			return err
		}
	}
	spec := sandbox.Spec{RunID: "probe", Workspace: l.Upper, StateDir: filepath.Join(dir, "state"), Network: sandbox.NetworkNone,
		Limits: sandbox.Limits{Pids: 64}, Layers: &l}
	c, lim, err := b.makeConfig(spec, modeProbe)
	if err != nil {
		return err
	}
	p, err := b.launch(ctx, spec, c, lim, nil, nil, nil, nil)
	if err != nil {
		var se *setupError
		if errors.As(err, &se) {
			return fmt.Errorf("the sandbox could not mount an overlay workspace: %s", se.Msg)
		}
		return fmt.Errorf("the sandbox could not mount an overlay workspace: %w", err)
	}
	p.wait()
	p.cg.remove()
	return checkProbe(l)
}

// checkProbe checks what the probe's edits left in the upper layer.
func checkProbe(l sandbox.Layers) error {
	if b, err := os.ReadFile(filepath.Join(l.Upper, probeKept)); err != nil || string(b) != "base\n"+probeText {
		return fmt.Errorf("overlay probe: the edited file is not in the upper layer (%q, %v)", b, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(l.Upper, probeGone), &st); err != nil || !overlay.IsWhiteout(&st) {
		return fmt.Errorf("overlay probe: the removed file left no whiteout (%v)", err)
	}
	fd, err := unix.Open(filepath.Join(l.Upper, probeDir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("overlay probe: %w", err)
	}
	defer unix.Close(fd)
	if opaque, err := overlay.IsOpaque(fd); err != nil || !opaque {
		return fmt.Errorf("overlay probe: the directory made again is not opaque (%v)", err)
	}
	return nil
}

// probeLayers is the init's part of the probe: the edits of checkProbe,
// through the overlay mounted at dir.
func probeLayers(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, probeKept), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("overlay probe: %w", err)
	}
	_, err = f.WriteString(probeText)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Remove(filepath.Join(dir, probeGone))
	}
	if err == nil {
		err = os.RemoveAll(filepath.Join(dir, probeDir))
	}
	if err == nil {
		err = os.Mkdir(filepath.Join(dir, probeDir), 0o755)
	}
	if err != nil {
		return fmt.Errorf("overlay probe: %w", err)
	}
	return nil
}

// removeTree removes dir, making the directories the kernel leaves mode 0
// in an overlay's work directory searchable first.
func removeTree(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// homeLayers are the layers HOME is mounted from: spec.Home as the upper
// layer over an empty lower one, both with the kernel's work directory in
// the sandbox's state dir (on HOME's file system: the run's directory).
// Nothing is ever in the lower layer, so the upper one stays a plain
// directory: no whiteouts, no opaque markers, the files as written.
func homeLayers(spec sandbox.Spec) (*overlay.Layers, error) {
	l := &overlay.Layers{
		Lower: filepath.Join(spec.StateDir, "home-lower"),
		Upper: filepath.Clean(spec.Home),
		Work:  filepath.Join(spec.StateDir, "home-work"),
	}
	for _, d := range []string{l.Lower, l.Work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("make HOME's overlay layers: %w", err)
		}
	}
	if ents, err := os.ReadDir(l.Lower); err != nil || len(ents) != 0 {
		return nil, fmt.Errorf("HOME's lower layer %s is not an empty directory", l.Lower)
	}
	return l, nil
}
