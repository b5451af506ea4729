package external

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
)

// WarmHome says that a profile's CLI does enough on its first run in a
// HOME (databases made and migrated, bundled files unpacked) for a run to
// start from a HOME it has run in before, as the CLI does on its user's
// machine. Each run's sandbox starts from an empty HOME; the first run
// after the CLI was installed or updated runs the CLI once more, before
// its attempt, with no task, no key and no model (the gateway refuses the
// request), and keeps what it left in HOME as a template; later runs
// start from a copy of it. Nothing of any run's task reaches it.
type WarmHome struct {
	// Volatile are paths under HOME (slash-separated) the template never
	// keeps: a process's own locks and links, snapshots of its
	// environment.
	Volatile []string
}

// homeTmp is the directory the supervisor makes in every HOME (TMPDIR in
// the host sandbox): never part of a template.
const homeTmp = "tmp"

// warmUpRoute is the gateway route a warm-up's CLI is pointed at: the
// gateway has none by that name and refuses the request in the protocol's
// error format, so the CLI gives up without reaching any model.
const warmUpRoute = "agentrun-warm-up"

// warmUpKey is the key a warm-up's CLI sends: not the run's placeholder,
// so that nothing of the run is in a template.
const warmUpKey = "agentrun-warm-up"

// warmUpWithin bounds a warm-up; a CLI still running then is stopped and
// its HOME emptied.
const warmUpWithin = 30 * time.Second

// Bounds on a template: a HOME past them is not kept.
const (
	templateMaxBytes = 256 << 20
	templateMaxFiles = 20000
)

// PrepareHome fills the HOME of new run r (hostHome, on the host) from
// its profile's template in templates, if there is one: the supervisor
// calls it while the run's sandbox starts, before anything runs in it.
// It says what it did, for the journal (nil: nothing, e.g. no template
// yet: the first attempt then warms the CLI up, warmHome).
func PrepareHome(r *run.Run, hostHome, templates string) *run.Event {
	p, ok := Lookup(r.Agent.Name)
	if !ok {
		return nil
	}
	return prepareHome(p, r, hostHome, templates)
}

func prepareHome(p Profile, r *run.Run, hostHome, templates string) *run.Event {
	if p.Warm == nil || templates == "" || len(r.Attempts) > 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(hostHome, homeTmp), 0o700); err != nil {
		return nil
	}
	recoverHome(hostHome)
	if !freshHome(hostHome) {
		return nil
	}
	key, err := templateKey(p, r.Agent, sandboxOf(r))
	if err != nil {
		return nil
	}
	return applyTemplate(p.Name, hostHome, templates, key)
}

// warmHome starts an attempt's HOME from its CLI's template, or makes the
// template by a warm-up in this sandbox. It only ever fills a HOME that
// holds nothing but the supervisor's empty tmp (the first attempt of a new
// run), and never fails the attempt: at worst the CLI starts from the
// empty HOME, as without it.
func (a *Agent) warmHome(ctx context.Context, in agent.AttemptInput) {
	p := a.profile
	if p == nil || p.Warm == nil || in.HomeTemplates == "" || in.HostHome == "" || in.Gateway == nil ||
		in.N != 1 || in.Resumed || in.ContinueSession || !freshHome(in.HostHome) {
		return
	}
	key, err := templateKey(*p, a.spec, sandboxOf(in.Run))
	if err != nil {
		return
	}
	journal := func(ev *run.Event) {
		if ev != nil && in.Event != nil {
			in.Event(*ev)
		}
	}
	if ev := applyTemplate(p.Name, in.HostHome, in.HomeTemplates, key); ev != nil {
		journal(ev)
		return
	}
	t0 := time.Now()
	markHome(in.HostHome)
	files, err := a.warmUp(ctx, in)
	took := time.Since(t0)
	if err != nil {
		emptyHome(in.HostHome)
		journal(homeEvent("failed", key, fmt.Sprintf("HOME starts empty: warming %s up: %v", p.Name, err), took))
		return
	}
	unmarkHome(in.HostHome)
	// The profile's files are written anew for every attempt.
	leave := slices.Concat(p.Warm.Volatile, slices.Collect(maps.Keys(files)))
	if err := saveTemplate(in.HostHome, in.HomeTemplates, key, leave); err != nil {
		journal(homeEvent("warmed", key, fmt.Sprintf("%s warmed its HOME up in %s (not kept: %v)", p.Name, took.Round(time.Millisecond), err), took))
		return
	}
	spareAfter(in.HomeTemplates, key)
	journal(homeEvent("warmed", key, fmt.Sprintf("%s warmed its HOME up in %s; later runs start from it", p.Name, took.Round(time.Millisecond)), took))
}

// applyTemplate copies the template key of profile name from templates
// into the fresh HOME hostHome; nil when there is none.
func applyTemplate(name, hostHome, templates, key string) *run.Event {
	tpl := filepath.Join(templates, key)
	if _, err := os.Stat(tpl); err != nil || !templateUsable(templates, key) {
		return nil
	}
	t0 := time.Now()
	markHome(hostHome)
	// The next run's HOME, made ahead.
	defer spareAfter(templates, key)
	if takeSpare(templates, key, hostHome) {
		unmarkHome(hostHome)
		return homeEvent("template", key, fmt.Sprintf("HOME starts from %s's warm HOME (a copy made ahead)", name), time.Since(t0))
	}
	if err := copyTree(tpl, hostHome, nil); err != nil {
		// (a template removed meanwhile, for a newer install of the CLI)
		emptyHome(hostHome)
		return homeEvent("failed", key, fmt.Sprintf("HOME starts empty: copying %s's warm HOME: %v", name, err), time.Since(t0))
	}
	unmarkHome(hostHome)
	return homeEvent("template", key, fmt.Sprintf("HOME starts from %s's warm HOME", name), time.Since(t0))
}

func homeEvent(kind, key, msg string, took time.Duration) *run.Event {
	ev := run.NewEvent(run.EventHome, msg, map[string]any{"kind": kind, "key": key, "duration": took.String()})
	return &ev
}

// sandboxOf is the userland r's sandbox gives the CLI: its backend and
// image ("" without a run).
func sandboxOf(r *run.Run) string {
	if r == nil {
		return ""
	}
	return strings.TrimSpace(r.Sandbox.Backend + " " + r.Sandbox.Image)
}

// The mark, a file beside HOME, says that HOME is being filled (a copy, a
// warm-up): one a killed supervisor left says that HOME is half filled,
// and recoverHome empties it before any attempt.
func markPath(hostHome string) string { return filepath.Clean(hostHome) + ".filling" }
func markHome(hostHome string)        { _ = os.WriteFile(markPath(hostHome), nil, 0o600) }
func unmarkHome(hostHome string)      { _ = os.Remove(markPath(hostHome)) }

// recoverHome empties a HOME left half filled.
func recoverHome(hostHome string) {
	if _, err := os.Lstat(markPath(hostHome)); err == nil {
		emptyHome(hostHome)
		unmarkHome(hostHome)
	}
}

// warmUp runs the profile's CLI once in the sandbox, in HOME, with no
// task, against a gateway route that refuses it. How the CLI exits does
// not matter: only that it did, on its own. It returns the profile's
// files it wrote.
func (a *Agent) warmUp(ctx context.Context, in agent.AttemptInput) (map[string]string, error) {
	p := a.profile
	l := p.launch(a.spec, warmUpInput(strings.TrimRight(in.Gateway.URL, "/"), a.spec.Model, p.DefaultModel, in.Home))
	if err := writeFiles(in.HostHome, l.Files); err != nil {
		return nil, err
	}
	res, err := in.Runner.Exec(ctx, runner.ExecRequest{
		Shell:     l.Command,
		Cwd:       in.Home,
		Env:       l.Env, // not the run's --env values: nothing of the run is kept
		Stdin:     []byte("Reply with OK."),
		Timeout:   warmUpWithin,
		OutputCap: 64 << 10,
		KillGrace: time.Second,
	}, io.Discard, io.Discard)
	switch {
	case err != nil:
		return nil, err
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case res.TimedOut || res.Cancelled:
		return nil, fmt.Errorf("still running after %s", warmUpWithin)
	case res.ExitCode == 126 || res.ExitCode == 127:
		return nil, fmt.Errorf("the CLI could not be started (exit %d)", res.ExitCode)
	}
	return l.Files, nil
}

// warmUpInput is a warm-up's launch: the refusing route, the warm-up key,
// a session of its own.
func warmUpInput(gatewayURL, model, defaultModel, home string) LaunchInput {
	if model == "" {
		model = defaultModel
	}
	return LaunchInput{BaseURL: gatewayURL + "/" + warmUpRoute, Key: warmUpKey, Model: model,
		Home: home, WorkDir: home, Session: agent.NewSessionID()}
}

// templateKey names the template of profile p's CLI (as spec runs it:
// Profile.program), in the sandbox where: the CLI file as installed (a
// reinstall or an update replaces it: a new inode and change time), what
// the profile gives a warm-up (its config) and the sandbox's backend and
// image, so that a change of any makes a new one.
func templateKey(p Profile, spec run.AgentSpec, where string) (string, error) {
	binary, env := p.program(spec)
	real, err := filepath.EvalSymlinks(binary)
	if err != nil {
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		return "", err
	}
	l := p.launchProgram(binary, env, LaunchInput{BaseURL: "http://gateway/" + warmUpRoute, Key: warmUpKey,
		Model: p.DefaultModel, Home: "/home", WorkDir: "/home", Session: "session"})
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%d.%d\x00%d.%d\x00%s\x00%s\x00", p.Name, real, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, where, l.Command)
	for _, e := range slices.Sorted(slices.Values(l.Env)) {
		fmt.Fprintf(h, "env %s\x00", e)
	}
	for _, n := range slices.Sorted(maps.Keys(l.Files)) {
		fmt.Fprintf(h, "file %s\x00%s\x00", n, l.Files[n])
	}
	w := sha256.Sum256([]byte(where))
	return p.Name + "-" + hex.EncodeToString(w[:4]) + "-" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// templateKind is what the templates of one profile in one kind of
// sandbox share: their key up to its last part (the CLI's install).
func templateKind(key string) string { return key[:strings.LastIndex(key, "-")+1] }

// freshHome says whether dir holds nothing but an empty tmp.
func freshHome(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name() != homeTmp || !e.IsDir() {
			return false
		}
		if sub, err := os.ReadDir(filepath.Join(dir, homeTmp)); err != nil || len(sub) > 0 {
			return false
		}
	}
	return true
}

// emptyHome takes a HOME back to what freshHome accepts (after a copy or a
// warm-up that did not finish), and drops its mark. Removing never
// follows a link.
func emptyHome(dir string) {
	defer unmarkHome(dir)
	for _, d := range []string{dir, filepath.Join(dir, homeTmp)} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if d == dir && e.Name() == homeTmp {
				continue
			}
			_ = os.RemoveAll(filepath.Join(d, e.Name()))
		}
	}
}

// saveTemplate keeps HOME (less tmp and the volatile paths) as the
// template key in dir: copied aside, then renamed into place, so a
// template is whole or absent. Another run that made the same one first
// wins. The profile's older templates for the same kind of sandbox go,
// with their spares, and what a killed supervisor left aside.
func saveTemplate(home, dir, key string, volatile []string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, ".new-"+key+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	skip := func(rel string) bool {
		return rel == homeTmp || slices.ContainsFunc(volatile, func(v string) bool { return rel == v || strings.HasPrefix(rel, v+"/") })
	}
	if err := copyTree(home, tmp, skip); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, key)); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, key)); serr == nil {
			return nil // made by another run meanwhile
		}
		return err
	}
	madeTemplate(dir, key)
	kind := templateKind(key)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		old := e.Name() != key && strings.HasPrefix(e.Name(), kind) || staleBesideTemplate(e, kind, key)
		if strings.HasPrefix(e.Name(), ".new-"+kind) {
			fi, err := e.Info()
			old = err == nil && time.Since(fi.ModTime()) > 2*warmUpWithin
		}
		if old {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// copyTree copies the tree at src into the existing directory dst: its
// directories, regular files and symbolic links (as links, never
// followed), with their permissions, leaving out the paths skip names
// (relative, slash-separated). Both sides are opened as roots: nothing
// outside either is read or written, whatever links the tree holds. It
// refuses a tree past the template bounds, and any name already in dst.
func copyTree(src, dst string, skip func(rel string) bool) error {
	from, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer to.Close()
	var files int
	var bytes int64
	return fs.WalkDir(from.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if files++; files > templateMaxFiles {
			return fmt.Errorf("more than %d files", templateMaxFiles)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return to.Mkdir(rel, fi.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := from.Readlink(rel)
			if err != nil {
				return err
			}
			return to.Symlink(target, rel)
		case d.Type().IsRegular():
			if bytes += fi.Size(); bytes > templateMaxBytes {
				return fmt.Errorf("more than %d MiB", templateMaxBytes>>20)
			}
			return copyFile(from, to, rel, fi.Mode().Perm())
		}
		return nil // sockets, fifos, devices: not kept
	})
}

func copyFile(from, to *os.Root, rel string, perm fs.FileMode) error {
	in, err := from.OpenFile(rel, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := to.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
