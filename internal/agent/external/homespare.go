package external

// homespare.go: a spare copy of a profile's HOME template, made in the
// background after a run's HOME was filled from the template, so that the
// next run's HOME is a few renames instead of a copy of every file of the
// template on the way to its agent's start. Codex's template, for one, is
// some 75 files in 35 directories: 3 to 7 ms to copy on a quiet disk, and
// many times that where making a file is slow (an ext4 without a journal,
// after many files were deleted, reads the deletion time of the free
// inodes before the one it gives each new file). The spare is made once
// the supervisor is done with the run (WaitSpares, as it exits: the run's
// result is recorded), or, in a process that goes on (an agent host's),
// once the run's agent has been at work a while: not beside its start,
// where the copy would compete with it for the CPU and the disk.
//
//	<templates>/.spare-<key>/home/         a copy of template key, nobody's yet
//	<templates>/.spare-<key>/boot          the boot it was made in
//	<templates>/.new-spare-<key>-*         a spare being made
//	<templates>/.taken-spare-<key>-*       a spare being taken
//
// A spare appears whole or not at all (made aside, renamed into place),
// and one run takes it (renamed aside first: of two takers, one wins, the
// other copies the template as before). One from an earlier boot is never
// used: its files were not synced, and a crash may have lost some. A
// template is immutable once in place, so a spare of it is as good as a
// copy made now; the spares of a profile's older templates go with them
// (saveTemplate).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/bootid"
	"github.com/agentrun/agentrun/internal/later"
)

const (
	spareHomePrefix = ".spare-"
	spareNewPrefix  = ".new-spare-"
	spareTakePrefix = ".taken-spare-"
	spareHomeDir    = "home"
	spareBootFile   = "boot"
	// defaultSpareDelay is how long a spare waits before it is made
	// unless WaitSpares hurries it: the run that took the last one is on
	// its way to its agent's start, and its agent starting (a CLI loading
	// its runtime: 0.1 to 3 s) is what a copy made now would slow.
	defaultSpareDelay = time.Second
	// staleSpare is the age past which what a spare's maker or taker left
	// (killed meanwhile) is removed.
	staleSpare = time.Hour
)

// homeSpares are the spares this process is making; its work also
// syncs the templates it saved (templatesync.go).
var homeSpares struct {
	work   later.Work
	making sync.Map    // template key → true, while its spare is being made
	off    atomic.Bool // a move across file systems failed: no spare will do
}

func spareName(key string) string { return spareHomePrefix + key }

// takeSpare fills the fresh HOME hostHome (which may already be bound
// into the sandbox: only its content is moved in) from the spare of
// template key in templates. It reports false, having left hostHome as it
// found it, when there is no usable spare: the caller then copies the
// template.
func takeSpare(templates, key, hostHome string) bool {
	spare := filepath.Join(templates, spareName(key))
	if _, err := os.Lstat(spare); err != nil {
		return false
	}
	// Aside, under a name of its own: another taker's rename then fails.
	taken, err := os.MkdirTemp(templates, spareTakePrefix+key+"-")
	if err != nil {
		return false
	}
	if err := os.Remove(taken); err != nil {
		return false
	}
	if err := os.Rename(spare, taken); err != nil {
		return false
	}
	// What the move leaves (an empty directory and the boot file) is
	// nobody's path to the agent's start.
	defer homeSpares.work.Go(func() { _ = os.RemoveAll(taken) })
	if b, err := os.ReadFile(filepath.Join(taken, spareBootFile)); err != nil || bootID() == "" || string(b) != bootID() {
		return false
	}
	from := filepath.Join(taken, spareHomeDir)
	ents, err := os.ReadDir(from)
	if err != nil {
		return false
	}
	for i, e := range ents {
		// HOME is fresh (its tmp only, which no spare has): a name it has
		// already (tmp too) is refused, never replaced.
		to := filepath.Join(hostHome, e.Name())
		err := fmt.Errorf("%s: %w", to, os.ErrExist)
		if _, lerr := os.Lstat(to); errors.Is(lerr, os.ErrNotExist) {
			err = os.Rename(filepath.Join(from, e.Name()), to)
		}
		if errors.Is(err, unix.EXDEV) {
			// The data directory spans file systems: no spare will do.
			homeSpares.off.Store(true)
		}
		if err != nil {
			for _, moved := range ents[:i] {
				_ = os.RemoveAll(filepath.Join(hostHome, moved.Name()))
			}
			return false
		}
	}
	return true
}

// spareAfter makes a spare of template key in templates in the
// background, after defaultSpareDelay or when WaitSpares hurries it,
// unless it has one or this process is making it. WaitSpares waits for
// it.
func spareAfter(templates, key string) {
	if homeSpares.off.Load() || bootID() == "" {
		return
	}
	if _, busy := homeSpares.making.LoadOrStore(key, true); busy {
		return
	}
	homeSpares.work.After(defaultSpareDelay, func() {
		defer homeSpares.making.Delete(key)
		_ = makeSpare(templates, key)
	})
}

// WaitSpares makes the spare HOMEs still waiting to be made at once, and
// syncs the templates still waiting to be synced, and waits for all of it:
// a process about to exit would leave a half-made spare behind (for a
// later one to remove), or a template that the next boot remakes.
func WaitSpares() { homeSpares.work.Wait() }

// makeSpare copies template key in templates aside and renames the copy
// into place as its spare; nothing when it has one, or the template is
// gone (a newer install of the CLI made another).
func makeSpare(templates, key string) error {
	removeStaleSpares(templates, key)
	tpl, spare := filepath.Join(templates, key), filepath.Join(templates, spareName(key))
	if _, err := os.Lstat(spare); err == nil {
		return nil
	}
	if _, err := os.Stat(tpl); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(templates, spareNewPrefix+key+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	home := filepath.Join(tmp, spareHomeDir)
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	if err := copyTree(tpl, home, nil); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, spareBootFile), []byte(bootID()), 0o600); err != nil {
		return err
	}
	// Fails when another process put a spare in place meanwhile: ours
	// goes. A template removed meanwhile leaves a spare of nothing for
	// saveTemplate's next pruning.
	return os.Rename(tmp, spare)
}

// removeStaleSpares removes what makers and takers of key's spare killed
// on the way left in templates.
func removeStaleSpares(templates, key string) {
	ents, _ := os.ReadDir(templates)
	for _, e := range ents {
		if leftBehind(e, key) {
			_ = os.RemoveAll(filepath.Join(templates, e.Name()))
		}
	}
}

// leftBehind says whether templates entry e is what a maker or taker of
// key's spare, killed on the way, left long ago.
func leftBehind(e os.DirEntry, key string) bool {
	n := e.Name()
	if !strings.HasPrefix(n, spareNewPrefix+key+"-") && !strings.HasPrefix(n, spareTakePrefix+key+"-") {
		return false
	}
	fi, err := e.Info()
	return err == nil && time.Since(fi.ModTime()) > staleSpare
}

// staleBesideTemplate says whether templates entry e is what goes with
// a template of kind other than key (its spare, one being made or taken,
// its boot and synced marks), or what key's spare left behind
// (leftBehind): saveTemplate removes those.
func staleBesideTemplate(e os.DirEntry, kind, key string) bool {
	for _, p := range []string{spareHomePrefix, spareNewPrefix, spareTakePrefix, templateBootPrefix, templateSyncedPrefix} {
		if strings.HasPrefix(e.Name(), p+kind) && !strings.HasPrefix(e.Name(), p+key) {
			return true
		}
	}
	return leftBehind(e, key)
}

// bootID names the running boot of the machine ("" where unknown: then
// no spare is made, as one could not tell a crash since).
var bootID = bootid.ID
