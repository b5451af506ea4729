package web

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"sort"
	"strings"
)

// states are the run states, for the list's filter.
var states = []string{"queued", "preparing", "running", "checking", "exporting", "succeeded", "failed", "cancelled", "interrupted"}

type listRow struct {
	ID, Status, Reason, Created, Project, Agent, Task, Verdict string
	Attempts                                                   int
	Cost                                                       string
}

type listContent struct {
	Rows                     []listRow
	States, Projects         []string
	State, Project, Q, Total string
}

// project is the name of a run's project: its repository is the
// server's projects/NAME.git.
func project(repo string) string {
	return strings.TrimSuffix(path.Base(repo), ".git")
}

// listPage lists runs: the state filter is the API's; the project and
// the text search filter the list document's runs.
func (u *UI) listPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c := listContent{States: states, State: q.Get("state"), Project: q.Get("project"), Q: strings.TrimSpace(q.Get("q")), Projects: u.o.Projects()}
	apiPath := "/v1/runs?limit=500"
	if c.State != "" {
		apiPath += "&status=" + url.QueryEscape(c.State)
	}
	var doc listDoc
	a, ok := u.get(r.Context(), apiPath, &doc)
	if !ok {
		u.failAPI(w, r, a)
		return
	}
	for _, run := range doc.Runs {
		p := project(run.Repo)
		if c.Project != "" && p != c.Project {
			continue
		}
		if c.Q != "" && !strings.Contains(strings.ToLower(run.Task), strings.ToLower(c.Q)) {
			continue
		}
		row := listRow{ID: run.ID, Status: run.Status, Reason: run.Reason, Created: when(run.CreatedAt), Project: p,
			Agent: run.Agent, Task: firstLine(run.Task, 120), Attempts: run.Attempts, Cost: cost(run.Usage)}
		if run.Verdict != nil {
			row.Verdict = run.Verdict.Value
		}
		c.Rows = append(c.Rows, row)
	}
	c.Total = plural(len(c.Rows), "run")
	u.render(w, r, http.StatusOK, "list", "Runs", c)
}

type logEntry struct {
	Attempt    int
	Kind, Name string
	Text       string
}

type runContent struct {
	Run       statusDoc
	Project   string
	Active    bool
	Logs      []logEntry
	Diff      []diffFile
	DiffNote  string
	Egress    *egressDoc
	Hints     []string // why a failed run failed (result's hints)
	Usage     usageDoc
	Cost      string
	StreamURL string
}

// ended reports whether a run's state is final.
func ended(state string) bool {
	switch state {
	case "succeeded", "failed", "cancelled", "interrupted":
		return true
	}
	return false
}

func (u *UI) runPage(w http.ResponseWriter, r *http.Request) {
	id := url.PathEscape(r.PathValue("id"))
	var c runContent
	if a, ok := u.get(r.Context(), "/v1/runs/"+id, &c.Run); !ok {
		u.failAPI(w, r, a)
		return
	}
	// Everything below names the run by its full id (the page's may be a prefix).
	id = url.PathEscape(c.Run.ID)
	c.Project, c.Active = project(c.Run.Repo), !ended(c.Run.Status)
	c.StreamURL = "/ui/runs/" + id + "/stream"
	if c.Run.Usage != nil {
		c.Usage, c.Cost = *c.Run.Usage, cost(c.Run.Usage)
	}
	c.Logs = u.logs(r, id, c.Run)
	if c.Run.Status == "failed" {
		var res resultDoc
		if _, ok := u.get(r.Context(), "/v1/runs/"+id+"/result", &res); ok {
			c.Hints = res.hints()
		}
	}
	var diff diffDoc
	if a, ok := u.get(r.Context(), "/v1/runs/"+id+"/diff", &diff); ok {
		c.Diff, c.DiffNote = renderDiff(diff.Patch)
	} else {
		c.DiffNote = a.problem().What
	}
	var eg egressDoc
	if _, ok := u.get(r.Context(), "/v1/runs/"+id+"/egress", &eg); ok {
		c.Egress = &eg
	}
	u.render(w, r, http.StatusOK, "run", "Run "+c.Run.ID, c)
}

// logs are the agent's output and each check's, attempt by attempt.
func (u *UI) logs(r *http.Request, id string, run statusDoc) []logEntry {
	paths := []string{"/v1/runs/" + id + "/logs"}
	for _, ch := range run.Checks {
		paths = append(paths, "/v1/runs/"+id+"/logs?check="+url.QueryEscape(ch.Name))
	}
	var out []logEntry
	for _, p := range paths {
		var doc logsDoc
		if _, ok := u.get(r.Context(), p, &doc); ok {
			for _, l := range doc.Logs {
				out = append(out, logEntry{Attempt: l.Attempt, Kind: l.Kind, Name: l.Name, Text: l.Text})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Attempt < out[j].Attempt })
	return out
}

// stream passes the API's log stream (output and journal events) on to
// the run page's script.
func (u *UI) stream(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/v1/runs/"+url.PathEscape(r.PathValue("id"))+"/logs/stream", nil)
	if err != nil {
		u.fail(w, r, http.StatusBadRequest, "bad run id", err.Error(), "")
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	u.o.API.ServeHTTP(w, req)
}

// afterPost shows an API error, or goes back to the run page.
func (u *UI) afterPost(w http.ResponseWriter, r *http.Request, a answer) {
	if a.status/100 != 2 {
		u.failAPI(w, r, a)
		return
	}
	http.Redirect(w, r, "/ui/runs/"+url.PathEscape(r.PathValue("id")), http.StatusSeeOther)
}

func (u *UI) verdict(w http.ResponseWriter, r *http.Request) {
	body := map[string]string{"verdict": r.PostFormValue("verdict"), "note": strings.TrimSpace(r.PostFormValue("note"))}
	u.afterPost(w, r, u.postJSON(r.Context(), "/v1/runs/"+url.PathEscape(r.PathValue("id"))+"/verdict", body))
}

func (u *UI) cancel(w http.ResponseWriter, r *http.Request) {
	u.afterPost(w, r, u.postJSON(r.Context(), "/v1/runs/"+url.PathEscape(r.PathValue("id"))+"/cancel", map[string]bool{"no_wait": true}))
}

// submitForm is the submit form's fields, kept to show the form again
// with an error.
type submitForm struct {
	Project, Base, Subdir, Task, Agent, AgentCmd, Sandbox, Checks, Attempts, Timeout string
	Projects, Sandboxes                                                              []string
	Problem                                                                          *problem
}

var sandboxes = []string{"native", "docker", "host"}

func (u *UI) submitPage(w http.ResponseWriter, r *http.Request) {
	f := submitForm{Projects: u.o.Projects(), Sandboxes: sandboxes, Sandbox: "native", Project: "default"}
	q := r.URL.Query()
	if b := q.Get("base"); b != "" {
		f.Base = b
	}
	if p := q.Get("project"); p != "" {
		f.Project = p
	}
	f.Subdir = q.Get("subdir")
	u.render(w, r, http.StatusOK, "submit", "Submit a run", f)
}

// submit posts the form as POST /v1/runs without a bundle: the base is
// one the project already holds.
func (u *UI) submit(w http.ResponseWriter, r *http.Request) {
	v := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	f := submitForm{Project: v("project"), Base: v("base"), Subdir: v("subdir"), Task: r.PostFormValue("task"), Agent: v("agent"), AgentCmd: v("agent_cmd"),
		Sandbox: v("sandbox"), Checks: r.PostFormValue("checks"), Attempts: v("attempts"), Timeout: v("timeout"),
		Projects: u.o.Projects(), Sandboxes: sandboxes}
	spec, err := f.spec()
	if err == nil {
		var a answer
		if a, err = u.postSpec(r, spec); err == nil {
			var doc submittedDoc
			if a.decode(&doc) && doc.ID != "" {
				http.Redirect(w, r, "/ui/runs/"+url.PathEscape(doc.ID), http.StatusSeeOther)
				return
			}
			p := a.problem()
			f.Problem = &p
		}
	}
	if err != nil {
		f.Problem = &problem{What: err.Error()}
	}
	status := http.StatusBadRequest
	if f.Problem.Status != 0 {
		status = f.Problem.Status
	}
	u.render(w, r, status, "submit", "Submit a run", f)
}

type formError string

func (e formError) Error() string { return string(e) }

// spec is the form as the API's submit spec.
func (f submitForm) spec() (map[string]any, error) {
	if f.Base == "" {
		return nil, formError("name the base: a commit the project holds, or a run's branch")
	}
	s := map[string]any{"project": f.Project, "base": f.Base, "task": f.Task}
	for k, val := range map[string]string{"subdir": f.Subdir, "agent": f.Agent, "agent_cmd": f.AgentCmd, "sandbox": f.Sandbox, "timeout": f.Timeout} {
		if val != "" {
			s[k] = val
		}
	}
	if f.Attempts != "" {
		var n int64
		if err := json.Unmarshal([]byte(f.Attempts), &n); err != nil || n < 1 {
			return nil, formError("attempts: a whole number of at least 1")
		}
		s["attempts"] = n
	}
	var checks []map[string]string
	for _, l := range strings.Split(f.Checks, "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		name, cmd, ok := strings.Cut(l, "=")
		if !ok {
			return nil, formError("checks: one NAME=COMMAND a line")
		}
		checks = append(checks, map[string]string{"name": strings.TrimSpace(name), "command": strings.TrimSpace(cmd)})
	}
	if len(checks) > 0 {
		s["checks"] = checks
	}
	return s, nil
}

// postSpec posts spec as the multipart body POST /v1/runs takes.
func (u *UI) postSpec(r *http.Request, spec map[string]any) (answer, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="spec"`)
	h.Set("Content-Type", "application/json")
	pw, err := mw.CreatePart(h)
	if err == nil {
		err = json.NewEncoder(pw).Encode(spec)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return answer{}, err
	}
	return u.call(r.Context(), http.MethodPost, "/v1/runs", mw.FormDataContentType(), &buf), nil
}
