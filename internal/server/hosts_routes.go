package server

// hosts_routes.go: the routes agent hosts call, under /v1/hosts. They are
// authenticated by the host's credential, not the users' token; every
// route of a run carries the claim's fencing token and is refused with
// lease_lost unless it is the run's current one (Hosts.fence).

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

// hostRoutes are the routes of the agent hosts (none without Hosts).
func (s *Server) hostRoutes() []route {
	h := s.o.Hosts
	if h == nil {
		return nil
	}
	return []route{
		{method: "POST", path: "/v1/hosts/enrol", open: true, h: s.enrol},
		{method: "POST", path: "/v1/hosts/claim", open: true, h: s.asHost(s.hostClaim)},
		{method: "POST", path: "/v1/hosts/heartbeat", open: true, h: s.asHost(s.hostHeartbeat)},
		{method: "POST", path: "/v1/hosts/seal-key", open: true, h: s.asHost(s.hostSealKey)},
		{method: "GET", path: "/v1/hosts/runs/{id}", open: true, h: s.asHost(s.hostGet)},
		{method: "PUT", path: "/v1/hosts/runs/{id}", open: true, h: s.asHost(s.hostPut)},
		{method: "GET", path: "/v1/hosts/runs/{id}/events", open: true, h: s.asHost(s.hostEvents)},
		{method: "POST", path: "/v1/hosts/runs/{id}/events", open: true, h: s.asHost(s.hostAppend)},
		{method: "POST", path: "/v1/hosts/runs/{id}/files", open: true, h: s.asHost(s.hostFile)},
		{method: "GET", path: "/v1/hosts/runs/{id}/base", open: true, h: s.asHost(s.hostBase)},
		{method: "POST", path: "/v1/hosts/runs/{id}/result", open: true, h: s.asHost(s.hostResult)},
		{method: "POST", path: "/v1/hosts/runs/{id}/release", open: true, h: s.asHost(s.hostRelease)},
	}
}

type hostHandler func(w http.ResponseWriter, r *http.Request, host *Host)

// asHost authenticates the host that calls h.
func (s *Server) asHost(h hostHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		host, err := s.o.Hosts.authenticate(r)
		if err != nil {
			writeError(w, err)
			return
		}
		h(w, r, host)
	}
}

func (s *Server) enrol(w http.ResponseWriter, r *http.Request) {
	var in EnrolRequest
	if err := decodeBody(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	out, err := s.o.Hosts.Enrol(r.Context(), in)
	if err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusCreated, out)
}

func (s *Server) hostClaim(w http.ResponseWriter, r *http.Request, host *Host) {
	var in ClaimRequest
	if err := decodeBody(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := s.whileServing(r.Context())
	defer cancel()
	c, err := s.o.Hosts.claimWait(ctx, host, in)
	if err != nil && ctx.Err() != nil {
		c, err = Claim{LeaseTTLMS: s.o.Hosts.TTL.Milliseconds()}, nil
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, c)
}

func (s *Server) hostHeartbeat(w http.ResponseWriter, r *http.Request, host *Host) {
	var in HeartbeatRequest
	if err := decodeBody(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	hold, cancel := s.whileServing(r.Context())
	defer cancel()
	out, err := s.o.Hosts.heartbeatWait(r.Context(), hold, host, in)
	if err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, out)
}

// fenced runs fn for run id of host under the run's lock, if the token
// given (query parameter or body) is the run's current one.
func (s *Server) fenced(w http.ResponseWriter, r *http.Request, host *Host, token int64, fn func(ctx context.Context, id string) (any, error)) {
	id := r.PathValue("id")
	if err := run.ValidateID(id); err != nil {
		writeError(w, catalog.BadRequest.New("%q is not a run id", id))
		return
	}
	h := s.o.Hosts
	unlock := h.lockRun(id)
	defer unlock()
	if err := h.fence(r.Context(), host, id, token); err != nil {
		writeError(w, err)
		return
	}
	out, err := fn(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if out != nil {
		writeDoc(w, http.StatusOK, out)
	}
}

// tokenParam is the token query parameter.
func tokenParam(r *http.Request) int64 {
	n, _ := strconv.ParseInt(r.URL.Query().Get("token"), 10, 64)
	return n
}

func (s *Server) hostGet(w http.ResponseWriter, r *http.Request, host *Host) {
	s.fenced(w, r, host, tokenParam(r), func(ctx context.Context, id string) (any, error) {
		rec, err := s.o.Hosts.run(ctx, id)
		if err != nil {
			return nil, err
		}
		return forHost(rec), nil
	})
}

// RecordWrite is the body of PUT /v1/hosts/runs/{id} (and the part
// "write" of the result upload): the record as the host's supervisor
// changed it from version Version, and the state change that rides on it
// (none: an update).
type RecordWrite struct {
	Token      int64       `json:"token"`
	Version    int64       `json:"version"`
	Record     *run.Run    `json:"record"`
	Transition *Transition `json:"transition,omitempty"`
	// Events are journaled, in order, with the record (in its
	// transaction), before its state event. In the result upload, the export's event lands with the result or
	// not at all, so a host that loses the run while uploading leaves
	// none. In a PUT they are the journal's events the host had not sent
	// yet: they are journaled once the fence passed, whatever the write's
	// answer (a record_stale answer too), so the host never sends them
	// again.
	Events []run.Event `json:"events,omitempty"`
}

// Transition is a compare-and-set of the state (see run.Store).
type Transition struct {
	From    []run.State `json:"from"`
	To      run.State   `json:"to"`
	Reason  run.Reason  `json:"reason,omitempty"`
	Message string      `json:"message,omitempty"`
}

var errStale = errors.New("stale")

// write stores in's record over the run's, if the run is still at the
// version the host read: the server's own fields (the id, the order, the
// repository, the paths, the cancel request, the verdict, where its
// PATH has the agent's CLI) stay its own.
// in.Events are journaled with the record, in the same transaction where
// the store can (else just before); always: also when the record is not
// written (a PUT's events are journaled whatever its answer), else they
// land with the record or not at all (the result upload's).
func (s *Server) write(ctx context.Context, id string, in RecordWrite, always bool) (*run.Run, error) {
	st := s.o.Hosts.Home.Store
	js, together := st.(run.JournaledStore)
	events := in.Events
	if !together || in.Record == nil {
		if always || in.Record != nil {
			if err := s.journal(ctx, id, events); err != nil {
				return nil, err
			}
		}
		events = nil
	}
	out, err := s.writeRecord(ctx, id, in, js, events)
	if err != nil && always && len(events) > 0 {
		// Not written with the record, so on their own: the host does
		// not send them again.
		if jerr := s.journal(context.WithoutCancel(ctx), id, events); jerr != nil {
			s.o.Log.Error("journal a host's events", "run", id, "error", jerr.Error())
		}
	}
	return out, err
}

// writeRecord is write's write of the record, with events in its
// transaction (js; none: events is empty).
func (s *Server) writeRecord(ctx context.Context, id string, in RecordWrite, js run.JournaledStore, events []run.Event) (*run.Run, error) {
	if in.Record == nil {
		return nil, catalog.BadRequest.New(`the body needs "record"`)
	}
	l := s.o.Hosts.layout()
	merge := func(r *run.Run) error {
		if r.Version != in.Version {
			return errStale
		}
		keep := *r
		*r = *in.Record
		r.ID, r.Seq, r.Version, r.Repo, r.CreatedAt, r.UpdatedAt = keep.ID, keep.Seq, keep.Version, keep.Repo, keep.CreatedAt, keep.UpdatedAt
		r.CancelRequested, r.Verdict, r.Patch = keep.CancelRequested, keep.Verdict, keep.Patch
		// Where the host found the agent's CLI is the host's view.
		r.Agent.Binary, r.Agent.Launcher, r.Agent.Helpers, r.Sandbox.ReadOnlyPaths = keep.Agent.Binary, keep.Agent.Launcher, keep.Agent.Helpers, keep.Sandbox.ReadOnlyPaths
		if in.Transition == nil {
			r.State, r.Reason, r.Message, r.StartedAt, r.FinishedAt = keep.State, keep.Reason, keep.Message, keep.StartedAt, keep.FinishedAt
		}
		if in.Record.Patch != "" {
			r.Patch = l.Patch(id)
		}
		if r.Result != nil && r.Result.Patch != "" {
			res := *r.Result
			res.Patch = l.Patch(id)
			r.Result = &res
		}
		return nil
	}
	st := s.o.Hosts.Home.Store
	var out *run.Run
	var err error
	switch t := in.Transition; {
	case t != nil && js != nil:
		out, err = js.TransitionJournaled(ctx, id, events, t.From, t.To, t.Reason, t.Message, merge)
	case t != nil:
		out, err = st.TransitionWith(ctx, id, t.From, t.To, t.Reason, t.Message, merge)
	case js != nil:
		out, err = js.UpdateJournaled(ctx, id, events, merge)
	default:
		out, err = st.Update(ctx, id, merge)
	}
	if errors.Is(err, errStale) || errors.Is(err, run.ErrConflict) {
		return nil, catalog.RecordStale.New("run %s is no longer at version %d", id, in.Version)
	}
	if err != nil {
		return nil, err
	}
	if in.Transition != nil && in.Transition.To.Terminal() {
		s.o.Log.Info("run ended", "run", id, "state", string(out.State), "reason", string(out.Reason))
	}
	return forHost(out), nil
}

func (s *Server) hostPut(w http.ResponseWriter, r *http.Request, host *Host) {
	var in RecordWrite
	if err := decodeBody(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	s.fenced(w, r, host, in.Token, func(ctx context.Context, id string) (any, error) {
		return s.write(ctx, id, in, true)
	})
}

// journal appends the events a host's write carries to run id's journal,
// in order (the server numbers them), in a transaction of each's own.
func (s *Server) journal(ctx context.Context, id string, events []run.Event) error {
	for _, ev := range events {
		ev.Seq = 0
		if _, err := s.o.Hosts.Home.Store.AppendEvent(ctx, id, ev); err != nil {
			return err
		}
	}
	return nil
}

// EventsAnswer is the answer of GET /v1/hosts/runs/{id}/events.
type EventsAnswer struct {
	Events []run.Event `json:"events"`
}

func (s *Server) hostEvents(w http.ResponseWriter, r *http.Request, host *Host) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	s.fenced(w, r, host, tokenParam(r), func(ctx context.Context, id string) (any, error) {
		evs, err := s.o.Hosts.Home.Store.Events(ctx, id, after)
		return EventsAnswer{Events: append([]run.Event{}, evs...)}, err
	})
}

// AppendRequest is the body of POST /v1/hosts/runs/{id}/events.
type AppendRequest struct {
	Token int64     `json:"token"`
	Event run.Event `json:"event"`
}

func (s *Server) hostAppend(w http.ResponseWriter, r *http.Request, host *Host) {
	var in AppendRequest
	if err := decodeBody(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	s.fenced(w, r, host, in.Token, func(ctx context.Context, id string) (any, error) {
		in.Event.Seq = 0
		return s.o.Hosts.Home.Store.AppendEvent(ctx, id, in.Event)
	})
}

// FileAnswer is the answer of POST /v1/hosts/runs/{id}/files: how many
// bytes of the file the server has.
type FileAnswer struct {
	Size int64 `json:"size"`
}

// hostLogFile is where an uploaded log of run id goes, or an error for a
// path that is not one of a run's logs.
func hostLogFile(dir, rel string) (string, error) {
	ok := filepath.IsLocal(rel) && !strings.ContainsAny(rel, "\\\x00") && rel == filepath.Clean(rel) &&
		(strings.HasPrefix(rel, "attempts/") || rel == "setup.log")
	if !ok {
		return "", catalog.BadRequest.New("path %q is not one of a run's logs", rel)
	}
	return filepath.Join(dir, rel), nil
}

// maxFileChunk bounds one upload of a log's next bytes.
const maxFileChunk = 8 << 20

// hostFile appends the next bytes of one of the run's logs (the agent's,
// a check's, the setup's) at offset: the bytes the server has already are
// skipped, so a chunk sent twice is written once.
func (s *Server) hostFile(w http.ResponseWriter, r *http.Request, host *Host) {
	q := r.URL.Query()
	offset, err := strconv.ParseInt(q.Get("offset"), 10, 64)
	if err != nil || offset < 0 {
		writeError(w, catalog.BadRequest.New("offset %q: want a whole number", q.Get("offset")))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFileChunk))
	if err != nil {
		writeError(w, catalog.BadRequest.Wrap(err, "the body: %v", err))
		return
	}
	s.fenced(w, r, host, tokenParam(r), func(ctx context.Context, id string) (any, error) {
		path, err := hostLogFile(s.o.Hosts.layout().RunDir(id), q.Get("path"))
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		size := fi.Size()
		if offset > size {
			return FileAnswer{Size: size}, nil // a chunk is missing: the host sends from size
		}
		if skip := size - offset; skip < int64(len(body)) {
			n, err := f.WriteAt(body[skip:], size)
			size += int64(n)
			if err != nil {
				return nil, err
			}
		}
		return FileAnswer{Size: size}, nil
	})
}

// hostBase answers with a bundle of the run's base commit.
func (s *Server) hostBase(w http.ResponseWriter, r *http.Request, host *Host) {
	s.fenced(w, r, host, tokenParam(r), func(ctx context.Context, id string) (any, error) {
		rec, err := s.o.Hosts.run(ctx, id)
		if err != nil {
			return nil, err
		}
		f, err := os.CreateTemp("", "agentrun-base-")
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		if err := s.o.Projects.BaseBundle(ctx, f, rec.Repo, rec.Base); err != nil {
			return nil, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		w.Header().Set("Content-Type", "application/x-git-bundle")
		_, _ = io.Copy(w, f)
		return nil, nil
	})
}

// ReleaseRequest is the body of POST /v1/hosts/runs/{id}/release.
type ReleaseRequest struct {
	Token int64 `json:"token"`
}

func (s *Server) hostRelease(w http.ResponseWriter, r *http.Request, host *Host) {
	var in ReleaseRequest
	if err := decodeBody(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	if err := run.ValidateID(id); err != nil {
		writeError(w, catalog.BadRequest.New("%q is not a run id", id))
		return
	}
	if err := s.o.Hosts.release(r.Context(), host, id, in.Token); err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, map[string]string{"id": id})
}

// hostResult takes the multipart upload of a run's result: the part
// "write" (RecordWrite, with the transition that records the export),
// then "patch" (the run's patch) and "bundle" (its branch, without the
// base's history). The bundle is checked against the base and the patch
// before the branch moves in the project; the record is written after,
// and if it cannot be, the branch goes back.
func (s *Server) hostResult(w http.ResponseWriter, r *http.Request, host *Host) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		writeError(w, catalog.BadRequest.New("the result upload takes multipart/form-data with the parts write, patch and bundle"))
		return
	}
	q, err := s.o.Projects.quarantine()
	if err != nil {
		writeError(w, err)
		return
	}
	defer os.RemoveAll(q)
	in, err := s.receiveResult(r, q)
	if err != nil {
		writeError(w, err)
		return
	}
	s.fenced(w, r, host, in.Token, func(ctx context.Context, id string) (any, error) {
		rec, err := s.o.Hosts.run(ctx, id)
		if err != nil {
			return nil, err
		}
		res := in.Record.Result
		if res == nil || in.Transition == nil || rec.Version != in.Version {
			return nil, catalog.RecordStale.New("run %s is no longer at version %d", id, in.Version)
		}
		patch, bundle := filepath.Join(q, "patch"), filepath.Join(q, "bundle")
		undo, err := s.o.Projects.ImportResult(ctx, rec.Repo, bundle, patch, rec.Branch, res.Commit, rec.Base)
		if err != nil {
			return nil, err
		}
		out, err := s.saveResult(ctx, id, patch, in)
		if err != nil {
			undo()
			return nil, err
		}
		return out, nil
	})
}

// saveResult puts the patch where the server's diff reads it and writes
// the record.
func (s *Server) saveResult(ctx context.Context, id, patch string, in RecordWrite) (*run.Run, error) {
	b, err := os.ReadFile(patch)
	if err != nil {
		return nil, err
	}
	dst := s.o.Hosts.layout().Patch(id)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, err
	}
	tmp := dst + ".upload"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return nil, err
	}
	return s.write(ctx, id, in, false)
}

// receiveResult reads the parts of a result upload into dir.
func (s *Server) receiveResult(r *http.Request, dir string) (RecordWrite, error) {
	var in RecordWrite
	mr, err := r.MultipartReader()
	if err != nil {
		return in, catalog.BadRequest.Wrap(err, "the multipart body: %v", err)
	}
	seen := map[string]bool{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return in, catalog.BadRequest.Wrap(err, "the multipart body: %v", err)
		}
		name := part.FormName()
		switch {
		case seen[name]:
			err = catalog.BadRequest.New("the part %q comes twice", name)
		case name == "write":
			var b []byte
			if b, err = io.ReadAll(io.LimitReader(part, maxSpec+1)); err == nil {
				err = decodeJSON(b, &in)
			}
		case name == "patch" || name == "bundle":
			err = s.o.Projects.receive(part, filepath.Join(dir, name))
		default:
			err = catalog.BadRequest.New("unexpected part %q (the parts are write, patch and bundle)", name)
		}
		part.Close()
		if err != nil {
			return in, err
		}
		seen[name] = true
	}
	if !seen["write"] || !seen["patch"] || !seen["bundle"] || in.Record == nil {
		return in, catalog.BadRequest.New("the result upload needs the parts write, patch and bundle")
	}
	return in, nil
}
