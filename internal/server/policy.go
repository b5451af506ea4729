package server

import (
	"net/http"

	"github.com/agentrun/agentrun/internal/policy"
)

// PolicyDoc is the answer of GET /v1/policy: the organization policy the
// server read when it started, shaped as agentrun policy show --json
// (docs/json/policy.schema.json; all empty and a null policy when none
// is in force).
type PolicyDoc struct {
	Path   string      `json:"path"`
	Source string      `json:"source"`
	Digest string      `json:"digest"`
	Policy *policy.Org `json:"policy"`
}

// NewPolicyDoc describes o (nil: no policy), named by source.
func NewPolicyDoc(o *policy.Org, source string) PolicyDoc {
	if o == nil {
		return PolicyDoc{}
	}
	return PolicyDoc{Path: o.Path, Source: source, Digest: o.Digest(), Policy: o}
}

// policyShow answers with the policy in force: every signed-in user may
// read the rules their runs are held to.
func (s *Server) policyShow(w http.ResponseWriter, r *http.Request) {
	if err := newQuery(r).err; err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, s.o.Policy)
}
