package cli

// remote.go: the CLI as a client of a team server. With --server URL (or
// AGENTRUN_SERVER) the run commands call the server's /v1 API instead of
// the runs on this machine, with the same flags: --json prints the
// server's document, which is the --json document of the command of the
// same name there; human output is rendered from that document by the
// same printers as locally. The server's errors are catalog errors and
// are shown, and exit, as local ones.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/run"
)

// remoteCommands are the commands that go to a team server when one is
// named. The others (clean, gc, doctor, ...) act on this machine; given
// --server explicitly, they refuse it.
var remoteCommands = map[string]bool{"submit": true, "list": true, "status": true, "logs": true, "diff": true,
	"result": true, "cancel": true, "resume": true, "verdict": true, "egress": true}

// alwaysLocal are commands that take no notice of a server at all.
var alwaysLocal = map[string]bool{"version": true, "help": true, "completion": true, "man": true, "server": true, "__complete": true, "worker": true}

// addRemoteFlags adds the global flags that name a team server.
func (app *App) addRemoteFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&app.serverURL, "server", "", "send the command to this team server `URL` (default: AGENTRUN_SERVER)")
	f.StringVar(&app.serverToken, "token-file", "", "the team server's bearer token is in this `FILE` (default: AGENTRUN_SERVER_TOKEN_FILE)")
}

// connect chooses, before a command runs, whether it goes to a server.
// Commands run in process by a server or an MCP server (app.local) never
// do.
func (app *App) connect(c *cobra.Command) error {
	name := c.Name()
	if app.local || alwaysLocal[name] {
		return nil
	}
	if top := topCommand(c); accountCommands[top] {
		return app.connectAccount(c, top)
	}
	flagged := c.Flags().Changed("server") || c.Flags().Changed("token-file")
	if (!remoteCommands[name] || c.Parent() != c.Root()) && !isAuditCmd(c) {
		if flagged {
			return catalog.Usage.New("agentrun %s acts on this machine; it does not take --server or --token-file", c.CommandPath()[len("agentrun "):]).
				WithFix("drop --server (the run commands submit, list, status, logs, diff, result, cancel, resume, verdict and egress take it)")
		}
		return nil
	}
	u := app.serverURL
	if u == "" {
		u = app.Getenv("AGENTRUN_SERVER")
	}
	if u == "" {
		if flagged {
			return catalog.Usage.New("--token-file without a server").WithFix("name the server with --server URL (or AGENTRUN_SERVER)")
		}
		return nil
	}
	tf := app.serverToken
	if tf == "" {
		tf = app.Getenv("AGENTRUN_SERVER_TOKEN_FILE")
	}
	token, err := readToken(tf)
	if err != nil {
		return err
	}
	if l, ok := storedLogin(app.Getenv, u); ok && tf == "" {
		token = l.Token // (agentrun login)
	}
	cl, err := client.New(u, token)
	if err != nil {
		return err
	}
	cl.Warn = func(msg string) { app.warn("%s", msg) }
	app.remote = cl
	return nil
}

// runPath is the API path of run id's resource sub ("" for the run).
func runPath(id, sub string) string {
	p := "/v1/runs/" + url.PathEscape(id)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

// printDoc prints a server's document as the local command prints its own.
func (app *App) printDoc(doc []byte) error {
	return writeJSON(app.Stdout, json.RawMessage(doc))
}

// decodeDoc reads a server's document into v.
func decodeDoc(doc []byte, v any) error {
	if err := json.Unmarshal(doc, v); err != nil {
		return catalog.ServerProtocol.Wrap(err, "the server's document: %v", err)
	}
	return nil
}

// decodeSubmitted decodes a server's run document as submit --json
// prints it; warnings are never null (a server of an earlier release
// leaves them out).
func decodeSubmitted(doc []byte) (submitOutput, error) {
	var out submitOutput
	if err := decodeDoc(doc, &out); err != nil {
		return submitOutput{}, err
	}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	return out, nil
}

// answer prints a server's answer to a command: as it came with --json,
// else decoded into v (a zero value of the command's output) and rendered.
func answer[T any](app *App, doc []byte, err error, v *T, render func(*T) error) error {
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printDoc(doc)
	}
	if err := decodeDoc(doc, v); err != nil {
		return err
	}
	return render(v)
}

// remoteRun is the run as the server's status document shows it.
func (app *App) remoteRun(ctx context.Context, id string) (*run.Run, []byte, error) {
	doc, err := app.remote.Get(ctx, runPath(id, ""), nil)
	if err != nil {
		return nil, nil, err
	}
	var st statusOutput
	st.Run = &run.Run{}
	if err := decodeDoc(doc, &st); err != nil {
		return nil, nil, err
	}
	return st.Run, doc, nil
}

func (app *App) remoteStatus(ctx context.Context, id string) error {
	doc, err := app.remote.Get(ctx, runPath(id, ""), nil)
	return answer(app, doc, err, &statusOutput{Run: &run.Run{}}, func(st *statusOutput) error {
		var evs []run.Event
		evDoc, err := app.remote.Get(ctx, runPath(st.ID, "logs"), url.Values{"events": {"true"}})
		read := err == nil && json.Unmarshal(evDoc, &struct {
			Events *[]run.Event `json:"events"`
		}{&evs}) == nil
		var h hints
		if read {
			h.model = modelHintOf(st.Run, evs)
		}
		return app.printStatus(st.Run, st.Disk, st.Waiting, evs, read, h, time.Now())
	})
}

func (app *App) remoteList(ctx context.Context, o *listOptions) error {
	if o.Repo != "" {
		return catalog.Usage.New("--repo names a directory of this machine; a server's runs are listed by --status, --agent, --verdict, --since and --limit")
	}
	q := url.Values{}
	for _, s := range o.Statuses {
		q.Add("status", s)
	}
	for k, v := range map[string]string{"agent": o.Agent, "verdict": o.Verdict, "since": o.Since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Limit > 0 {
		q.Set("limit", fmt.Sprint(o.Limit))
	}
	doc, err := app.remote.Get(ctx, "/v1/runs", q)
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printDoc(doc)
	}
	var out listOutput
	if err := decodeDoc(doc, &out); err != nil {
		return err
	}
	if o.Quiet {
		for _, it := range out.Runs {
			fmt.Fprintln(app.Stdout, it.ID)
		}
		return nil
	}
	for _, b := range out.Broken {
		app.warn("run %s is damaged and not listed: %s", b.ID, oneLine(b.Err, 0))
	}
	if len(out.Runs) == 0 {
		fmt.Fprintf(app.Stdout, "no runs match on %s\n", app.remote.URL())
		return nil
	}
	col := app.colour()
	t := table{header: []string{"ID", "STATUS", "AGE", "DISK", "REPO", "BRANCH", "TASK"}, colour: col}
	for _, it := range out.Runs {
		status := string(it.Status)
		if it.Status.Terminal() && it.Reason != "" && it.Reason != run.ReasonCompleted {
			status += " (" + string(it.Reason) + ")"
		}
		branch := "-"
		if it.Commit != "" {
			branch = it.Branch
		}
		t.add(it.ID, paint(col, stateColour(it.Status), status), ago(o.Now, it.CreatedAt), diskCell(it.Disk),
			oneLine(app.tildePath(it.Repo), 40), branch, oneLine(it.Task, 50))
	}
	return t.write(app.Stdout)
}

func (app *App) remoteDiff(ctx context.Context, id string) error {
	doc, err := app.remote.Get(ctx, runPath(id, "diff"), nil)
	return answer(app, doc, err, &patchDoc{}, func(d *patchDoc) error {
		w, done := app.rawOut()
		if _, err := fmt.Fprint(w, d.Patch); err != nil {
			return err
		}
		return done()
	})
}

// patchDoc is what the server's diff answer holds for the human output.
type patchDoc struct {
	Patch string `json:"patch"`
}

// idDoc is the run id of a server's answer.
type idDoc struct {
	ID string `json:"id"`
}

func (app *App) remoteCancel(ctx context.Context, o *cancelOptions) error {
	doc, err := app.remote.Post(ctx, runPath(o.ID, "cancel"), map[string]bool{"no_wait": o.NoWait})
	return answer(app, doc, err, &cancelOutput{}, func(out *cancelOutput) error {
		app.printCancel(*out)
		return nil
	})
}

func (app *App) remoteVerdict(ctx context.Context, o *verdictOptions) error {
	doc, err := app.remote.Post(ctx, runPath(o.ID, "verdict"), map[string]string{"verdict": o.Value, "note": o.Note})
	return answer(app, doc, err, &idDoc{}, func(out *idDoc) error {
		app.printVerdict(out.ID, o.Value, o.Note)
		return nil
	})
}

func (app *App) remoteEgress(ctx context.Context, id string) error {
	doc, err := app.remote.Get(ctx, runPath(id, "egress"), nil)
	return answer(app, doc, err, &egressOutput{}, func(out *egressOutput) error {
		r, _, err := app.remoteRun(ctx, out.ID)
		if err != nil {
			return err
		}
		return app.printEgress(r, out)
	})
}

// localRepo is the top level of the repository dir is in ("" when it is
// in none).
func localRepo(dir string) string {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return ""
	}
	top := repoTop(dir)
	if _, err := os.Lstat(filepath.Join(top, ".git")); err != nil {
		return ""
	}
	return top
}

func (app *App) remoteResult(ctx context.Context, o *resultOptions) error {
	q := url.Values{}
	if o.Patch && app.JSON {
		q.Set("patch", "true")
	}
	doc, err := app.remote.Get(ctx, runPath(o.ID, "result"), q)
	if err != nil {
		return err
	}
	var out resultOutput
	if err := decodeDoc(doc, &out); err != nil {
		return err
	}
	r, _, err := app.remoteRun(ctx, out.ID)
	if err != nil {
		return err
	}
	repo := localRepo(".")
	if r.State == run.StateSucceeded && resultCommit(r) != "" {
		if repo == "" {
			app.warn("not inside a git repository: branch %s stays on the server; run 'agentrun result %s' inside the repository to bring it here", r.Branch, r.ID)
		} else if err := app.importResult(ctx, repo, r); err != nil {
			return err
		}
	}
	if app.JSON {
		return app.printDoc(doc)
	}
	if repo != "" {
		r.Repo = repo
	}
	if out.Patch != "" {
		// The server's path means nothing here; the command that shows it does.
		out.Patch = "agentrun diff " + r.ID
	}
	// (The server's branch_state is of its project's repository; the
	// branch here is the one the import just placed.)
	out.BranchState = ""
	if err := app.printResult(r, &out, ""); err != nil {
		return err
	}
	if o.Patch && out.Commit != "" {
		fmt.Fprintln(app.Stdout)
		return app.remoteDiff(ctx, r.ID)
	}
	return nil
}

func (app *App) remoteLogs(ctx context.Context, o *logsOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	q := url.Values{}
	if o.Attempt > 0 {
		q.Set("attempt", fmt.Sprint(o.Attempt))
	}
	if o.Check != "" {
		q.Set("check", o.Check)
	}
	if o.Events {
		q.Set("events", "true")
	}
	if o.Follow {
		return app.remoteFollowLogs(ctx, o, q)
	}
	doc, err := app.remote.Get(ctx, runPath(o.ID, "logs"), q)
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printDoc(doc)
	}
	var out struct {
		ID     string      `json:"id"`
		Events []run.Event `json:"events"`
		Logs   []logPiece  `json:"logs"`
	}
	if err := decodeDoc(doc, &out); err != nil {
		return err
	}
	if o.Events {
		var t table
		for _, e := range out.Events {
			t.add(eventCells(app.colour(), e)...)
		}
		return t.write(app.Stdout)
	}
	w, done := app.rawOut()
	for i, p := range out.Logs {
		if len(out.Logs) > 1 {
			if i > 0 {
				fmt.Fprintln(app.Stdout)
			}
			src := logSource{attempt: p.Attempt, kind: p.Kind, name: p.Name}
			fmt.Fprintln(app.Stdout, paint(app.colour(), sgrDim, src.header()))
		}
		if _, err := fmt.Fprint(w, p.Text); err != nil {
			return err
		}
	}
	return done()
}

// remoteFollowLogs is logs -f: the stream, printed as logs -f prints a
// local run (events only with --events), then how the run ended.
func (app *App) remoteFollowLogs(ctx context.Context, o *logsOptions, q url.Values) error {
	var endDoc []byte
	err := app.remote.Stream(ctx, o.ID, q, func(ev client.Event) error {
		switch ev.Name {
		case "event":
			var e run.Event
			if err := decodeDoc(ev.Data, &e); err != nil {
				return err
			}
			if o.Events {
				if app.JSON {
					return writeJSONLineCompact(app.Stdout, e)
				}
				var t table
				t.add(eventCells(app.colour(), e)...)
				return t.write(app.Stdout)
			}
		case "output":
			return app.printPiece(ev.Data)
		case "end":
			endDoc = ev.Data
		}
		return nil
	})
	if err != nil {
		return err
	}
	end, err := decodeSubmitted(endDoc)
	if err != nil {
		return err
	}
	if app.JSON {
		return writeJSONLineCompact(app.Stdout, endLine{Type: lineEnd, submitOutput: end})
	}
	app.endNote(&run.Run{ID: end.ID, State: end.Status, Reason: end.Reason})
	return nil
}
