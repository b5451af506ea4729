package server

// hosts_seal.go: the values a run needs (its provider keys) on their way
// to the agent host that claimed it. They are the server's own, read from
// its environment as its local worker reads them (Hosts.Getenv), sealed in
// the claim to the host's public key (internal/seal) and bound to the run,
// the host and the lease's fencing token. They are never logged, never
// written to the database or the run's directory: the claim's answer is
// the only place they leave in, sealed.
//
// A host's key comes with its enrolment. A host enrolled before sealing
// keys registers one with its credential, once: a key stored is never
// replaced that way (a stolen credential must not swap in a thief's key;
// a host that lost its key enrols again). Until a host has a key it is
// not given a run that needs values (fits): the run waits for one that
// has, and its status says so (Waiting).

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/seal"
	"github.com/agentrun/agentrun/internal/submit"
)

// checkSealKey refuses a sealing key that is not one (none: only where
// optional, an enrolment by a host from before sealing keys).
func checkSealKey(key []byte, optional bool) error {
	if len(key) == 0 && optional {
		return nil
	}
	if err := seal.CheckPublic(key); err != nil {
		return catalog.BadRequest.New("seal_key: %v", err)
	}
	return nil
}

// sealKeyColumn is key as the column seal_key keeps it (none: NULL).
func sealKeyColumn(key []byte) sql.NullString {
	if len(key) == 0 {
		return sql.NullString{}
	}
	return sql.NullString{String: base64.StdEncoding.EncodeToString(key), Valid: true}
}

// setSealKey sets the host's key from its column.
func (h *Host) setSealKey(col sql.NullString) {
	h.sealKey, h.SealKey = nil, ""
	if !col.Valid {
		return
	}
	if b, err := base64.StdEncoding.DecodeString(col.String); err == nil && len(b) > 0 {
		h.sealKey, h.SealKey = b, seal.Fingerprint(b)
	}
}

// SealKeyRequest is the body of POST /v1/hosts/seal-key.
type SealKeyRequest struct {
	SealKey []byte `json:"seal_key"`
}

// SealKeyAnswer is its answer: the fingerprint of the host's key.
type SealKeyAnswer struct {
	SealKey string `json:"seal_key"`
}

// registerSealKey stores host's sealing key if it has none; the key it
// has already is accepted again (a host that restarts, or whose answer
// was lost), another is refused.
func (h *Hosts) registerSealKey(ctx context.Context, host *Host, key []byte) (SealKeyAnswer, error) {
	if err := checkSealKey(key, false); err != nil {
		return SealKeyAnswer{}, err
	}
	col := sealKeyColumn(key)
	if _, err := h.DB.Write.ExecContext(ctx, `UPDATE hosts SET seal_key = $1 WHERE id = $2 AND seal_key IS NULL`, col, host.ID); err != nil {
		return SealKeyAnswer{}, fmt.Errorf("seal key: %w", err)
	}
	var stored sql.NullString
	if err := h.DB.Write.QueryRowContext(ctx, `SELECT seal_key FROM hosts WHERE id = $1`, host.ID).Scan(&stored); err != nil {
		return SealKeyAnswer{}, fmt.Errorf("seal key: %w", err)
	}
	if stored != col {
		return SealKeyAnswer{}, catalog.SealKeyRefused.New("host %s (%s) has the sealing key %s already, not %s",
			host.ID, host.Name, fingerprintOf(stored), seal.Fingerprint(key))
	}
	if host.sealKey == nil {
		h.log().Info("host sealing key registered", "host", host.ID, "name", host.Name, "seal_key", seal.Fingerprint(key))
	}
	return SealKeyAnswer{SealKey: seal.Fingerprint(key)}, nil
}

func fingerprintOf(col sql.NullString) string {
	var h Host
	h.setSealKey(col)
	return h.SealKey
}

// handoffValues are the server's values of the variables run r uses,
// but for those that say how to reach a model server (a proxy,
// certificates): they are the agent host's own, from where it runs.
func (h *Hosts) handoffValues(r *run.Run) map[string]string {
	m := submit.HandoffValues(r, h.Getenv)
	for _, n := range gateway.NetEnv {
		delete(m, n)
	}
	return m
}

// needsSeal reports whether run r needs values a host gets sealed.
func (h *Hosts) needsSeal(r *run.Run) bool { return len(h.handoffValues(r)) > 0 }

// errNoSealKey is why a host without a sealing key is not given a run
// that needs values.
var errNoSealKey = errors.New("the host has no sealing key")

// sealFor seals run r's values to host for the claim with token (nil:
// the run needs none).
func (h *Hosts) sealFor(host *Host, r *run.Run, token int64) ([]byte, error) {
	values := h.handoffValues(r)
	if len(values) == 0 {
		return nil, nil
	}
	if host.sealKey == nil {
		return nil, errNoSealKey
	}
	b, err := seal.Seal(host.sealKey, seal.Info{Run: r.ID, Host: host.ID, Token: token}, values)
	if err != nil {
		return nil, fmt.Errorf("seal the values of run %s for host %s: %w", r.ID, host.ID, err)
	}
	return b, nil
}

func (s *Server) hostSealKey(w http.ResponseWriter, r *http.Request, host *Host) {
	var in SealKeyRequest
	if err := decodeBody(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	out, err := s.o.Hosts.registerSealKey(r.Context(), host, in.SealKey)
	if err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, out)
}

// noSealKey is why a run that needs values waits when the hosts that could
// execute it have no sealing key.
const noSealKey = "no enrolled agent host that can execute it has a sealing key for the values it needs " +
	"(a host enrolled before sealing keys registers one when it starts again with this version)"
