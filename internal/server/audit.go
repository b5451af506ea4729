package server

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/internal/audit"
	"github.com/agentrun/agentrun/internal/catalog"
)

// EventActor is the actor of the audit entries of run events: the
// server's run store writes them, for whichever worker sent the event.
const EventActor = "server"

// auditedRoutes are the state-changing routes whose every request is an
// audit entry, and the entry's action. A new state-changing route is
// added here, or calls Server.Audit itself.
var auditedRoutes = map[string]string{
	"POST /v1/runs":              "submit",
	"POST /v1/runs/{id}/cancel":  "cancel",
	"POST /v1/runs/{id}/resume":  "resume",
	"POST /v1/runs/{id}/verdict": "verdict",
	// The changes to users and tokens (a token's secret is in no request
	// body, and only the answer's id and error are read).
	"POST /v1/users":                "user.add",
	"POST /v1/users/{name}/disable": "user.disable",
	"POST /v1/users/{name}/enable":  "user.enable",
	"POST /v1/users/{name}/limits":  "user.limits",
	"POST /v1/tokens":               "token.create",
	"POST /v1/tokens/{id}/revoke":   "token.revoke",
}

// actor is who made the request, for the audit trail.
func (s *Server) actor(r *http.Request) string {
	if s.o.Actor != nil {
		if a := s.o.Actor(r); a != "" {
			return a
		}
	}
	if p, ok := PrincipalFrom(r.Context()); ok {
		return p.Name
	}
	if s.o.Token != "" {
		return "token"
	}
	return "anonymous"
}

// Audit appends the entry action of the request's actor about run runID
// (may be "") with payload (any JSON value; nil for none) to the audit
// trail. Routes of other resources (users, tokens, policy) call it for
// the changes they make. Without a trail it does nothing.
func (s *Server) Audit(r *http.Request, action, runID string, payload any) error {
	if s.o.Audit == nil {
		return nil
	}
	p, err := audit.Canonical(payload)
	if err != nil {
		return err
	}
	_, err = s.o.Audit.Append(context.WithoutCancel(r.Context()), audit.Entry{Actor: s.actor(r), Action: action, Run: runID, Payload: p})
	return err
}

// auditNoteKey carries a request's audit notes in its context.
type auditNoteKey struct{}

// auditNote adds a field to the payload of the request's audit entry (a
// handler's facts that neither the body nor the answer show).
func auditNote(r *http.Request, k string, v any) {
	if m, ok := r.Context().Value(auditNoteKey{}).(map[string]any); ok {
		m[k] = v
	}
}

// noteSubmit notes what a submit asked for. The task is named by its
// hash and size: the run record keeps the text.
func noteSubmit(r *http.Request, spec *SubmitRequest) {
	auditNote(r, "project", spec.Project)
	auditNote(r, "task", digest(spec.Task))
}

func digest(s string) map[string]any {
	sum := sha256.Sum256([]byte(s))
	return map[string]any{"sha256": hex.EncodeToString(sum[:]), "bytes": len(s)}
}

// errReader returns err (nil: io.EOF).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// teeRecorder keeps the start of an answer for the audit entry.
type teeRecorder struct {
	*recorder
	body bytes.Buffer
}

// auditKeep bounds what is kept of an answer.
const auditKeep = 64 << 10

func (t *teeRecorder) Write(b []byte) (int, error) {
	if room := auditKeep - t.body.Len(); room > 0 {
		t.body.Write(b[:min(len(b), room)])
	}
	return t.recorder.Write(b)
}

// audited runs h and appends the request's entry: its route and outcome
// (status, error code), its JSON body (a task as its hash), the handler's
// notes, and the run the answer names. The entry is written after the
// answer: a request that changed nothing is recorded too, with the error
// it got. A failure to append is logged; the change it records is done.
func (s *Server) audited(action string, rt route, rec *recorder, r *http.Request) {
	notes := map[string]any{}
	r = r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, notes))
	payload := map[string]any{"method": r.Method, "route": rt.path, "path": r.URL.Path, "remote": r.RemoteAddr}
	if ct := r.Header.Get("Content-Type"); ct == "" || strings.HasPrefix(ct, "application/json") {
		b, err := io.ReadAll(http.MaxBytesReader(rec, r.Body, maxBody))
		// The handler reads the body as it came, its error too.
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
		var body map[string]any
		if err == nil && json.Unmarshal(b, &body) == nil {
			if t, ok := body["task"].(string); ok {
				body["task"] = digest(t)
			}
			payload["request"] = body
		}
	}
	tee := &teeRecorder{recorder: rec}
	rt.h(tee, r)
	var doc struct {
		ID    string         `json:"id"`
		Error *catalog.Error `json:"error"`
	}
	_ = json.Unmarshal(tee.body.Bytes(), &doc)
	payload["status"] = rec.status
	if doc.Error != nil {
		payload["error"] = doc.Error.Code
	}
	for k, v := range notes {
		payload[k] = v
	}
	id := doc.ID
	if id == "" && strings.HasPrefix(rt.path, "/v1/runs") {
		// (A token route's id is the token's, not a run's.)
		id = r.PathValue("id")
	}
	if err := s.Audit(r, action, id, payload); err != nil {
		s.o.Log.Error("audit: the request's entry was not written", "action", action, "run", id, "error", err.Error())
	}
}

// needAudit answers for a server without a trail.
func (s *Server) needAudit(w http.ResponseWriter) bool {
	if s.o.Audit == nil {
		writeError(w, catalog.Internal.New("this server keeps no audit trail"))
		return false
	}
	return true
}

// AuditList is the document of GET /v1/audit (agentrun audit list --json).
type AuditList struct {
	Entries []audit.Entry `json:"entries"`
}

func (s *Server) auditList(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "after", "run", "limit")
	aq := audit.Query{After: q.num("after"), Run: q.str("run"), Limit: int(q.num("limit"))}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	if !s.needAudit(w) {
		return
	}
	es, err := s.o.Audit.Entries(r.Context(), aq)
	if err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, AuditList{Entries: es})
}

// AuditCheckpoints is the document of GET /v1/audit/checkpoints.
type AuditCheckpoints struct {
	Checkpoints []audit.Checkpoint `json:"checkpoints"`
}

func (s *Server) auditCheckpoints(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "after", "limit")
	after, n := q.num("after"), q.num("limit")
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	if !s.needAudit(w) {
		return
	}
	cps, err := s.o.Audit.Checkpoints(r.Context(), after, int(n))
	if err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, AuditCheckpoints{Checkpoints: cps})
}

// AuditKey is the document of GET /v1/audit/key (agentrun server
// audit-key --json): the key that signs the checkpoints.
type AuditKey struct {
	Algorithm   string `json:"algorithm"`
	PublicKey   string `json:"public_key"`
	Fingerprint string `json:"fingerprint"`
}

// NewAuditKey describes pub.
func NewAuditKey(pub ed25519.PublicKey) AuditKey {
	return AuditKey{Algorithm: "ed25519", PublicKey: hex.EncodeToString(pub), Fingerprint: audit.Fingerprint(pub)}
}

func (s *Server) auditKey(w http.ResponseWriter, r *http.Request) {
	if err := newQuery(r).err; err != nil {
		writeError(w, err)
		return
	}
	if len(s.o.AuditKey) != ed25519.PublicKeySize {
		writeError(w, catalog.Internal.New("this server has no audit key"))
		return
	}
	writeDoc(w, http.StatusOK, NewAuditKey(s.o.AuditKey))
}

// auditExport streams the whole trail as JSON lines (audit.Export). An
// error after the first line ends the stream short; the verifier then
// finds the entries missing.
func (s *Server) auditExport(w http.ResponseWriter, r *http.Request) {
	if err := newQuery(r).err; err != nil {
		writeError(w, err)
		return
	}
	if !s.needAudit(w) {
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if err := audit.Export(r.Context(), s.o.Audit, w); err != nil {
		s.o.Log.Error("audit export", "error", err.Error())
		panic(http.ErrAbortHandler)
	}
}
