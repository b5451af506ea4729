package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/mcp"
)

// maxBody bounds a JSON request body.
const maxBody = 2 << 20

// decodeBody reads a JSON body into v: unknown fields are refused; an
// empty body leaves v as it is.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return catalog.BadRequest.Wrap(err, "reading the body: %v", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return decodeJSON(b, v)
}

func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return catalog.BadRequest.Wrap(err, "the JSON body: %v", err)
	}
	if dec.More() {
		return catalog.BadRequest.New("the JSON body holds more than one value")
	}
	return nil
}

// query reads the query parameters a route takes; any other is refused.
type query struct {
	v   url.Values
	err error
}

func newQuery(r *http.Request, allowed ...string) *query {
	q := &query{v: r.URL.Query()}
	for k := range q.v {
		if !slices.Contains(allowed, k) {
			q.err = catalog.BadRequest.New("unknown query parameter %q (this route takes: %s)", k, strings.Join(allowed, ", "))
		}
	}
	return q
}

func (q *query) str(k string) string { return q.v.Get(k) }

func (q *query) strs(k string) []string {
	var out []string
	for _, v := range q.v[k] {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func (q *query) num(k string) int64 {
	s := q.v.Get(k)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		q.err = catalog.BadRequest.New("query parameter %s=%q: want a whole number", k, s)
	}
	return n
}

func (q *query) on(k string) bool {
	s := q.v.Get(k)
	if s == "" {
		return false
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		q.err = catalog.BadRequest.New("query parameter %s=%q: want true or false", k, s)
	}
	return b
}

// command answers with one command line's document.
func (s *Server) command(w http.ResponseWriter, r *http.Request, args []string) {
	s.run(r.Context(), args, "").write(w, http.StatusOK)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "status", "agent", "verdict", "since", "limit")
	in := mcp.ListInput{Status: q.strs("status"), Agent: q.str("agent"), Verdict: q.str("verdict"), Since: q.str("since"), Limit: q.num("limit")}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	s.command(w, r, in.Argv())
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if err := newQuery(r).err; err != nil {
		writeError(w, err)
		return
	}
	s.command(w, r, []string{"status", "--json", "--", r.PathValue("id")})
}

func (s *Server) result(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "patch")
	in := mcp.ResultInput{ID: r.PathValue("id"), Patch: q.on("patch")}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	s.command(w, r, in.Argv())
}

func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	if err := newQuery(r).err; err != nil {
		writeError(w, err)
		return
	}
	s.command(w, r, []string{"diff", "--json", "--", r.PathValue("id")})
}

func (s *Server) egress(w http.ResponseWriter, r *http.Request) {
	if err := newQuery(r).err; err != nil {
		writeError(w, err)
		return
	}
	s.command(w, r, []string{"egress", "--json", "--", r.PathValue("id")})
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "attempt", "check", "events")
	in := mcp.LogsInput{ID: r.PathValue("id"), Attempt: q.num("attempt"), Check: q.str("check"), Events: q.on("events")}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	s.command(w, r, in.Argv())
}

// CancelRequest is the body of POST /v1/runs/{id}/cancel (optional).
type CancelRequest struct {
	// NoWait answers once the cancel is requested; by default the answer
	// comes when the run has ended.
	NoWait bool `json:"no_wait,omitempty"`
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	var body CancelRequest
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	s.command(w, r, mcp.CancelInput{ID: r.PathValue("id"), NoWait: body.NoWait}.Argv())
}

// ResumeRequest is the body of POST /v1/runs/{id}/resume (optional).
type ResumeRequest struct {
	Task      string   `json:"task,omitempty"`
	MaxTokens *int64   `json:"max_tokens,omitempty"`
	MaxCost   *float64 `json:"max_cost,omitempty"`
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	var body ResumeRequest
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	adm, full, err := s.admitResume(r.Context(), r.PathValue("id"), &body)
	if err != nil {
		writeError(w, err)
		return
	}
	in := mcp.ResumeInput{ID: r.PathValue("id"), Task: body.Task, MaxTokens: body.MaxTokens, MaxCost: body.MaxCost}
	o := s.run(r.Context(), in.Argv(), "")
	if o.err == nil {
		// The path may name the run by a prefix: the document has its id.
		var doc struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(o.doc, &doc)
		s.queued(r.Context(), doc.ID)
	} else {
		full = ""
	}
	s.settle(r.Context(), adm, full)
	o.write(w, http.StatusOK)
}

// VerdictRequest is the body of POST /v1/runs/{id}/verdict.
type VerdictRequest struct {
	Verdict string `json:"verdict"`
	Note    string `json:"note,omitempty"`
}

func (s *Server) verdict(w http.ResponseWriter, r *http.Request) {
	var body VerdictRequest
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	if body.Verdict == "" {
		writeError(w, catalog.BadRequest.New(`the body needs "verdict": accept or reject`))
		return
	}
	s.command(w, r, mcp.VerdictInput{ID: r.PathValue("id"), Verdict: body.Verdict, Note: body.Note}.Argv())
}

// bundle answers with a git bundle of the run's branch, without the
// base's history (the client has it). The run is looked up as status
// looks it up (prefixes, reconcile, its errors).
func (s *Server) bundle(w http.ResponseWriter, r *http.Request) {
	if err := newQuery(r).err; err != nil {
		writeError(w, err)
		return
	}
	o := s.run(r.Context(), []string{"status", "--json", "--", r.PathValue("id")}, "")
	if o.err != nil {
		o.write(w, http.StatusOK)
		return
	}
	var rec struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Repo   string `json:"repo"`
		Base   string `json:"base_commit"`
		Branch string `json:"branch"`
		Commit string `json:"commit"`
	}
	if err := json.Unmarshal(o.doc, &rec); err != nil {
		writeError(w, err)
		return
	}
	if rec.Commit == "" || rec.Branch == "" {
		writeError(w, catalog.NoPatch.New("run %s is %s and exported nothing: no branch to bundle", rec.ID, rec.Status).
			WithFix("only runs that exported changes have a branch; see GET /v1/runs/%s", rec.ID))
		return
	}
	// The bundle is made in a file first: an error is still a catalog
	// error, and a large bundle is not held in memory.
	f, err := os.CreateTemp("", "agentrun-bundle-")
	if err != nil {
		writeError(w, err)
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := s.o.Projects.Bundle(r.Context(), f, rec.Repo, rec.Branch, rec.Base); err != nil {
		writeError(w, err)
		return
	}
	n, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-bundle")
	w.Header().Set("Content-Disposition", `attachment; filename="`+rec.ID+`.bundle"`)
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	_, _ = io.Copy(w, f)
}
