package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/mcp"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/workspace"
)

// remoteSubmit plans what it can here (the repository, its base commit,
// the task), sends the spec with a bundle of the base commit, and prints
// the server's answer, or waits for / follows the run.
func (app *App) remoteSubmit(ctx context.Context, o *submitOptions) error {
	switch {
	case len(o.ReadOnly) > 0:
		return catalog.Usage.New("--ro names paths of this machine; a team server's agents cannot see them")
	case o.set("max-parallel"):
		return catalog.Usage.New("--max-parallel: a team server's workers decide how many runs go at once")
	case o.Image != "":
		return catalog.Usage.New("--image: a team server's sandbox images are its operator's to choose")
	}
	task, err := app.readTask(o)
	if err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(task) == "":
		return catalog.EmptyTask.New("no task given")
	case len(task) > submit.MaxTaskBytes:
		return catalog.TaskTooLarge.New("the task is %d bytes", len(task))
	}
	repo, base, dirty, err := workspace.Inspect(ctx, o.Repo, o.Base)
	if err != nil {
		return err
	}
	if dirty && !o.IncludeDirty {
		return catalog.DirtyRepo.New("%s", repo.Path())
	}
	if dirty {
		app.warn("the uncommitted changes of %s are not sent: the run starts from the base commit %s", repo.Path(), shortCommit(base))
	}
	dir, err := os.MkdirTemp("", "agentrun-submit-")
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	defer os.RemoveAll(dir)
	spec := server.SubmitRequest{SubmitInput: o.input(task)}
	if spec.Subdir == "" {
		spec.Subdir = app.remoteSubdir(ctx, repo.Path(), o.Repo, base)
	}
	author := app.remoteAuthor(ctx, o, repo.Path())
	bundle, err := app.baseBundle(ctx, repo.Path(), base, dir, o.Quiet)
	if err != nil {
		return err
	}
	spec.Author = <-author
	spec.Base = baseHead
	if bundle == "" {
		spec.Base = base // the server holds it: no bundle
	}
	doc, err := app.remote.Submit(ctx, spec, bundle)
	if err != nil {
		return err
	}
	out, err := decodeSubmitted(doc)
	if err != nil {
		return err
	}
	app.quiet = o.Quiet
	return app.remoteAfter(ctx, doc, out, repo.Path(), o.Wait, o.Follow)
}

// remoteSubdir is where a team server's run starts: the directory
// submitted from (or --repo's), at the same place in the server's
// workspace, when the base commit has it; else the top, as a local run
// whose directory the workspace lacks (an untracked one) starts there,
// and says so.
func (app *App) remoteSubdir(ctx context.Context, repo, dir, base string) string {
	sub := submit.Subdir(repo, dir)
	if sub == "" {
		return ""
	}
	if ok, err := workspace.IsDirAt(ctx, repo, base, sub); err != nil || !ok {
		app.warn("%s, where the task was given, is not a directory of the base commit %s: the agent and the checks start at the top", sub, shortCommit(base))
		return ""
	}
	return sub
}

// remoteAuthor starts finding the result's author as a local submit
// would, here: --author, else this machine's author settings, else the
// repository's user.name and user.email ("" when none names both), so
// that the commit a team server's host writes is the submitter's, not
// whoever's the host's or the server's git configuration names. It reads
// the repository's configuration beside the bundle's making.
func (app *App) remoteAuthor(ctx context.Context, o *submitOptions, repo string) <-chan string {
	ch := make(chan string, 1)
	if o.Author != "" {
		ch <- o.Author
		return ch
	}
	var name, email string
	if s, err := config.Load(app.Getenv); err == nil {
		name, email = s.AuthorName, s.AuthorEmail
	}
	go func() {
		if name == "" || email == "" {
			n, e := workspace.ConfigIdentity(ctx, repo)
			name, email = cmp.Or(name, n), cmp.Or(email, e)
		}
		author := fmt.Sprintf("%s <%s>", name, email)
		if _, _, err := parseAuthor(author); err != nil {
			author = "" // the server's settings decide
		}
		ch <- author
	}()
	return ch
}

// input is the spec of these flags. Unlike a local submit, the settings of
// this machine (config file, AGENTRUN_* variables) are not applied: the
// server applies its own (the author is the exception: remoteAuthor).
func (o *submitOptions) input(task string) mcp.SubmitInput {
	in := mcp.SubmitInput{Task: task, Subdir: o.Subdir, Agent: o.Agent, AgentCmd: o.AgentCmd, Attempts: int64(o.Attempts), Timeout: o.Timeout,
		Sandbox: o.Sandbox, Env: o.Env, Labels: o.Labels, Network: o.Network, Allow: o.Allow, LoopbackTCP: o.LoopbackTCP,
		MaxFiles: int64(o.MaxFiles), MaxBytes: o.MaxBytes, Disk: o.Disk, DiskInodes: o.DiskInodes, Model: o.Model,
		Provider: o.Provider, BaseURL: o.BaseURL, ModelServer: o.ModelServer, MaxTurns: int64(o.MaxTurns), ContextWin: int64(o.ContextWin),
		Author: o.Author}
	checks, _ := parseChecks(o.Checks) // (Validate refused what does not parse)
	for _, c := range checks {
		in.Checks = append(in.Checks, mcp.Check{Name: c.Name, Command: c.Command})
	}
	if o.set("temperature") {
		t := o.Temperature
		in.Temperature = &t
	}
	if o.set("max-tokens") {
		n := o.MaxTokens
		in.MaxTokens = &n
	}
	if o.set("max-cost") {
		c := o.MaxCost
		in.MaxCost = &c
	}
	return in
}

// remoteAfter prints a run the server started (doc, out), or waits for /
// follows it; a run that succeeded with a branch has it brought into repo.
func (app *App) remoteAfter(ctx context.Context, doc []byte, out submitOutput, repo string, wait, follow bool) error {
	if !wait && !follow {
		switch {
		case app.quiet && !app.JSON:
			fmt.Fprintln(app.Stdout, out.ID)
			return nil
		case app.JSON:
			return app.printDoc(doc)
		}
		fmt.Fprintf(app.Stdout, "run %s %s on %s\nbranch %s (once it succeeds: 'agentrun result %s' brings it here)\n", out.ID, out.Status, app.remote.URL(), out.Branch, out.ID)
		fmt.Fprintf(app.Stdout, "follow it with: agentrun logs -f %s\n", out.ID)
		return nil
	}
	var prog *progress
	if !app.JSON && !follow && !app.quiet {
		fmt.Fprintf(app.Stderr, "run %s %s on %s; waiting for it to end (Ctrl-C stops waiting, not the run)\n", out.ID, out.Status, app.remote.URL())
		prog = newProgress(app.Stderr, isTerminal(app.Stderr) && app.Getenv("TERM") != "dumb", 0, time.Now())
	}
	endDoc, end, err := app.remoteAwait(ctx, out.ID, follow, prog)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(app.Stderr, "stopped waiting; run %s goes on. Follow it again with: agentrun logs -f %s\n", out.ID, out.ID)
		}
		return err
	}
	r, _, err := app.remoteRun(ctx, end.ID)
	if err != nil {
		return err
	}
	switch {
	case r.State != run.StateSucceeded || resultCommit(r) == "":
	case repo == "":
		app.warn("not inside a git repository: branch %s stays on the server; run 'agentrun result %s' inside the repository to bring it here", r.Branch, r.ID)
	default:
		if err := app.importResult(ctx, repo, r); err != nil {
			return err
		}
	}
	switch {
	case app.quiet && !app.JSON:
		fmt.Fprintln(app.Stdout, end.ID)
	case app.JSON && follow:
		if err := writeJSONLineCompact(app.Stdout, endLine{Type: lineEnd, submitOutput: end}); err != nil {
			return err
		}
	case app.JSON:
		if err := app.printDoc(endDoc); err != nil {
			return err
		}
	default:
		app.printRemoteEnd(r, repo)
	}
	if end.Status != run.StateSucceeded {
		return &reported{exit: catalog.ExitRunFailed}
	}
	return nil
}

// printRemoteEnd is printEnd for a run of a server: its patch is there,
// its branch (brought into repo) here.
func (app *App) printRemoteEnd(r *run.Run, repo string) {
	fmt.Fprintln(app.Stdout, endedLine(r))
	if c := resultCommit(r); r.State == run.StateSucceeded && c != "" && repo != "" {
		fmt.Fprintf(app.Stdout, "branch %s (in %s)\ncommit %s\npatch  agentrun diff %s\n", r.Branch, app.tildePath(repo), c, r.ID)
	}
}

// remoteAwait follows run id's stream to its end: with follow its events
// and output are printed as 'logs -f' prints them; with prog its progress
// is shown. It returns the end event's document (submit's).
func (app *App) remoteAwait(ctx context.Context, id string, follow bool, prog *progress) ([]byte, submitOutput, error) {
	if prog != nil {
		defer prog.done()
	}
	q := url.Values{}
	if !follow {
		q.Set("events", "true")
	}
	var endDoc []byte
	err := app.remote.Stream(ctx, id, q, func(ev client.Event) error {
		switch ev.Name {
		case "event":
			var e run.Event
			if err := decodeDoc(ev.Data, &e); err != nil {
				return err
			}
			if prog != nil {
				prog.event(e, time.Now())
				prog.tick(time.Now())
			}
			if follow {
				app.printEvent(e)
			}
		case "output":
			if follow {
				return app.printPiece(ev.Data)
			}
		case "end":
			endDoc = ev.Data
		}
		return nil
	})
	if err != nil {
		return nil, submitOutput{}, err
	}
	end, err := decodeSubmitted(endDoc)
	if err != nil {
		return nil, submitOutput{}, err
	}
	return endDoc, end, nil
}

// printPiece prints a piece of output from a stream: the bytes for
// people, one output line per line under --json.
func (app *App) printPiece(data json.RawMessage) error {
	var p struct {
		Attempt int    `json:"attempt"`
		Kind    string `json:"kind"`
		Name    string `json:"name"`
		Text    string `json:"text"`
	}
	if err := decodeDoc(data, &p); err != nil {
		return err
	}
	if !app.JSON {
		w, done := app.rawOut()
		if _, err := fmt.Fprint(w, p.Text); err != nil {
			return err
		}
		return done()
	}
	text := strings.TrimSuffix(p.Text, "\n")
	if text == "" && p.Text == "" {
		return nil
	}
	for _, l := range strings.Split(text, "\n") {
		if err := writeJSONLineCompact(app.Stdout, outputLine(p.Attempt, p.Kind, p.Name, l)); err != nil {
			return err
		}
	}
	return nil
}

// remoteResume asks the server to resume a run, then prints it, or waits
// for / follows it.
func (app *App) remoteResume(ctx context.Context, o *resumeOptions) error {
	if o.set != nil && o.set("max-parallel") {
		return catalog.Usage.New("--max-parallel: a team server's workers decide how many runs go at once")
	}
	body := server.ResumeRequest{Task: o.Task}
	if o.set != nil && o.set("max-tokens") {
		body.MaxTokens = &o.MaxTokens
	}
	if o.set != nil && o.set("max-cost") {
		body.MaxCost = &o.MaxCost
	}
	doc, err := app.remote.Post(ctx, runPath(o.ID, "resume"), body)
	if err != nil {
		return err
	}
	out, err := decodeSubmitted(doc)
	if err != nil {
		return err
	}
	if !app.JSON {
		fmt.Fprintf(app.Stderr, "run %s resumed on %s\n", out.ID, app.remote.URL())
	}
	return app.remoteAfter(ctx, doc, out, localRepo("."), o.Wait, o.Follow)
}
