package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/mcp"
	"github.com/agentrun/agentrun/internal/users"
)

// SubmitRequest is the "spec" part of POST /v1/runs: submit's input as
// the MCP submit tool takes it (the same fields, the same validation),
// the project the run belongs to, and base, which names the bundle's head
// to start from (default: the bundle's HEAD, or its only head).
type SubmitRequest struct {
	mcp.SubmitInput
	// Project names the server's repository the base is fetched into
	// and the run's branch is written to (default "default").
	Project string `json:"project,omitempty"`
}

// refused says why a field of SubmitRequest is not taken from a client.
func (in SubmitRequest) refused() error {
	for _, f := range []struct {
		name, why string
		set       bool
	}{
		{"repo", "the server keeps the project's repository itself (name it with project)", in.Repo != ""},
		{"ro", "it names paths on the server's host", len(in.ReadOnly) > 0},
		{"max_parallel", "the server's workers decide how many runs go at once", in.MaxParallel != 0},
		{"wait", "follow the run with GET /v1/runs/{id}/logs/stream instead", in.Wait},
		{"include_dirty", "a bundle has no uncommitted changes", in.IncludeDirty},
	} {
		if f.set {
			return catalog.BadRequest.New("the server does not take %q from a client: %s", f.name, f.why)
		}
	}
	return nil
}

// queued tells Submitted that run id was queued.
func (s *Server) queued(ctx context.Context, id string) {
	if s.o.Submitted != nil && id != "" {
		s.o.Submitted(ctx, id)
	}
}

// allowed applies the server's own limits to a spec: what its operator
// did not allow, a client cannot ask for.
func (s *Server) allowed(spec *SubmitRequest) error {
	if spec.Sandbox != "" && s.o.Isolates != nil && !s.o.Isolates(spec.Sandbox) && !s.o.AllowUnisolated {
		return catalog.BadRequest.New("the %s sandbox isolates nothing, and this server does not let clients run agents as its own user", spec.Sandbox).
			WithFix("name an isolating sandbox (native, docker), or start the server with --allow-host-sandbox")
	}
	for _, n := range spec.Env {
		if !slices.Contains(s.o.PassEnv, n) {
			return catalog.BadRequest.New("env %q: the server passes only the variables its operator named (--pass-env) to agents", n).
				WithFix("drop it from env, or start the server with --pass-env %s", n)
		}
	}
	return nil
}

// maxSpec bounds the spec part (the task is at most 1 MiB).
const maxSpec = 2 << 20

// submit takes a multipart/form-data body: the part "spec" (JSON,
// SubmitRequest) first, then the part "bundle" (a git bundle of the base
// commit). It answers 201 with submit's document.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	if err := newQuery(r).err; err != nil {
		writeError(w, err)
		return
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		writeError(w, catalog.BadRequest.New("POST /v1/runs takes multipart/form-data with the parts spec (JSON) and bundle (a git bundle), not %q", r.Header.Get("Content-Type")))
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, catalog.BadRequest.Wrap(err, "the multipart body: %v", err))
		return
	}
	var spec *SubmitRequest
	var repo, base string
	var adm *users.Admission
	var made string
	defer func() { s.settle(r.Context(), adm, made) }()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeError(w, catalog.BadRequest.Wrap(err, "the multipart body: %v", err))
			return
		}
		switch name := part.FormName(); {
		case name == "spec" && spec == nil:
			if spec, err = readSpec(part); err == nil {
				err = s.allowed(spec)
			}
			if err == nil {
				adm, err = s.admitSubmit(r.Context(), spec)
			}
		case name == "bundle" && spec != nil && repo == "":
			repo, base, err = s.o.Projects.Import(r.Context(), spec.Project, part, spec.Base)
		case name == "bundle" && spec == nil:
			err = catalog.BadRequest.New("send the part spec before the part bundle")
		default:
			err = catalog.BadRequest.New("unexpected part %q (the parts are spec, then bundle, once each)", name)
		}
		part.Close()
		if err != nil {
			writeError(w, err)
			return
		}
	}
	switch {
	case spec == nil:
		writeError(w, catalog.BadRequest.New("the part spec is missing"))
		return
	case repo == "" && spec.Base != "" && s.o.Projects.has(spec.Project):
		// No bundle: the base is one the project already holds (a commit
		// an earlier bundle brought, a run's branch), as the web UI's
		// submit form names it; submit resolves it in the repository.
		repo, base = s.o.Projects.Repo(spec.Project), spec.Base
	case repo == "":
		writeError(w, catalog.BadBundle.New("the part bundle is missing: send a git bundle of the base commit"))
		return
	}
	noteSubmit(r, spec)
	in := spec.SubmitInput
	in.Repo, in.Base = repo, base
	o := s.run(r.Context(), in.Argv(), in.Task)
	if o.err == nil {
		var doc struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(o.doc, &doc) == nil && doc.ID != "" {
			made = doc.ID
			w.Header().Set("Location", "/v1/runs/"+doc.ID)
			s.o.Log.Info("run submitted", "run", doc.ID, "project", spec.Project, "base", base)
		}
		s.queued(r.Context(), doc.ID)
	}
	o.write(w, http.StatusCreated)
}

// DefaultProject is the project of a submit that names none.
const DefaultProject = "default"

// readSpec reads and checks the spec part.
func readSpec(part io.Reader) (*SubmitRequest, error) {
	b, err := io.ReadAll(io.LimitReader(part, maxSpec+1))
	if err != nil {
		return nil, catalog.BadRequest.Wrap(err, "the part spec: %v", err)
	}
	if len(b) > maxSpec {
		return nil, catalog.BadRequest.New("the part spec is over %d bytes", maxSpec)
	}
	var spec SubmitRequest
	if err := decodeJSON(b, &spec); err != nil {
		return nil, err
	}
	if err := spec.refused(); err != nil {
		return nil, err
	}
	if spec.Project == "" {
		spec.Project = DefaultProject
	}
	spec.Base = strings.TrimSpace(spec.Base)
	return &spec, nil
}
