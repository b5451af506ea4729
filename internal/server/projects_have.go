package server

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
)

// maxHaveAsked bounds the commits one GET /v1/projects/{name}/commits
// asks about: a client sends its base and a few of its ancestors, spaced
// further apart the older they are.
const maxHaveAsked = 64

// Commits is the answer of GET /v1/projects/{name}/commits: which of
// the commits asked about the project's repository holds, so that a
// submit sends a bundle of only what the server lacks (or none, when it
// holds the base).
type Commits struct {
	Project string   `json:"project"`
	Have    []string `json:"have"`
}

// projectCommits answers which of the commits named by the query's have
// parameters the project holds. A project the server does not keep holds
// none: the answer is the same as for a project that holds none of them.
func (s *Server) projectCommits(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("name")
	asked := r.URL.Query()["have"]
	switch {
	case !projectName.MatchString(project):
		writeError(w, catalog.BadRequest.New("project %q: a project's name is letters, digits, _ and -, at most 64", project))
		return
	case len(asked) == 0:
		writeError(w, catalog.BadRequest.New("name the commits to look for with have=<commit id> (up to %d)", maxHaveAsked))
		return
	case len(asked) > maxHaveAsked:
		writeError(w, catalog.BadRequest.New("%d commits asked about; at most %d at once", len(asked), maxHaveAsked))
		return
	}
	for _, c := range asked {
		if !objectID.MatchString(c) {
			writeError(w, catalog.BadRequest.New("have=%q is not a full commit id (40 or 64 hex digits)", c))
			return
		}
	}
	out := Commits{Project: project, Have: []string{}}
	if s.o.Projects.has(project) {
		have, err := s.o.Projects.commits(r, project, asked)
		if err != nil {
			writeError(w, err)
			return
		}
		out.Have = have
	}
	writeDoc(w, http.StatusOK, out)
}

// commits are those of ids that the project's repository holds as commits
// (one git cat-file for all of them).
func (p *Projects) commits(r *http.Request, project string, ids []string) ([]string, error) {
	args := []string{"cat-file", "--batch-check=%(objectname) %(objecttype)"}
	cmd := gitCommand(r.Context(), p.Repo(project), args...)
	cmd.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, &gitError{args: args, stderr: stderr.String(), err: err}
	}
	have := []string{}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if id, typ, ok := strings.Cut(l, " "); ok && typ == "commit" {
			have = append(have, id)
		}
	}
	return have, nil
}
