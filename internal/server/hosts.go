package server

// hosts.go: the agent hosts that join the server (agentrun worker
// --server). A host enrols once with a one-time token and gets an id and
// a random credential, of which the server keeps only the SHA-256 hash.
// Its requests under /v1/hosts carry "Authorization: Bearer ID.SECRET";
// a revoked host's are refused. It also sends the public half of a key
// pair it made (internal/seal): the values a run needs reach the host
// sealed to it (hosts_seal.go).

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/queue"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/supervisor"
)

// HostLeases holds the leases of the runs hosts execute, on the hosts'
// behalf: taken at a claim, renewed by the host's heartbeats only (see
// sqlcoord's HoldFor).
type HostLeases interface {
	HoldFor(ctx context.Context, id, holder string) (token int64, ok bool, err error)
	RenewHolder(ctx context.Context, holder string) (map[string]int64, error)
	DropFor(ctx context.Context, id string, token int64, holder string) error
	HeldBy(ctx context.Context, id string, token int64, holder string) (bool, error)
}

// HostsDB is the database the hosts are kept in (the run store's).
type HostsDB struct {
	Read, Write *sql.DB
}

// Hosts is the registry of agent hosts and the runs they execute.
type Hosts struct {
	DB     HostsDB
	Leases HostLeases
	// Home is the server's runs (Home.Claimed): a lost host's runs are
	// queued again through it.
	Home     supervisor.Home
	Projects *Projects
	// TTL is how long a run's lease outlives the host's last heartbeat.
	TTL time.Duration
	// Queue is the dispatch queue: every queueing of a run inserts its
	// job there, and claims take their runs from it (hosts_queue.go).
	Queue queue.Queue
	// LocalWorker says the server's own worker executes runs (those
	// without labels).
	LocalWorker bool
	// Getenv reads the server's own values of the variables a run uses
	// (its provider keys): they reach a host sealed to its key.
	Getenv func(string) string
	Log    *slog.Logger
	// Cancels wakes the heartbeats that wait for a cancel of their
	// hosts' runs (hosts_cancel.go; nil: heartbeats never wait).
	Cancels *Cancels
	// Metrics count the claims served and the runs lost (nil: none).
	Metrics *Metrics
	// Agents are the agent CLI profiles (hosts_agents.go).
	Agents agent.Catalog

	mu    sync.Mutex
	locks map[string]*runLock
	// seenAt is when this server last recorded each host as seen.
	seenAt sync.Map
}

func (h *Hosts) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}

func (h *Hosts) layout() layout.Layout { return h.Home.Layout }

// holder is the lease holder a host's runs are held under.
func holder(hostID string) string { return "host:" + hostID }

func micros(t time.Time) int64 { return t.UnixMicro() }

func hashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// EnrolToken is a one-time enrolment token, as it is shown once.
type EnrolToken struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// NewEnrolToken makes a one-time enrolment token valid for ttl.
func (h *Hosts) NewEnrolToken(ctx context.Context, ttl time.Duration) (EnrolToken, error) {
	tok := "are_" + randomHex(24)
	exp := time.Now().Add(ttl).UTC().Truncate(time.Second)
	if _, err := h.DB.Write.ExecContext(ctx, `INSERT INTO host_enrol_tokens (hash, expires_at) VALUES ($1, $2)`,
		hashSecret(tok), micros(exp)); err != nil {
		return EnrolToken{}, fmt.Errorf("enrol token: %w", err)
	}
	return EnrolToken{Token: tok, ExpiresAt: exp}, nil
}

// EnrolRequest is the body of POST /v1/hosts/enrol.
type EnrolRequest struct {
	Token    string            `json:"token"`
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels,omitempty"`
	Slots    int               `json:"slots"`
	Backends []string          `json:"backends"`
	// SealKey is the host's public sealing key (internal/seal).
	SealKey []byte `json:"seal_key,omitempty"`
}

// Enrolled is the answer of POST /v1/hosts/enrol: the host's identity.
// The credential is shown this once.
type Enrolled struct {
	HostID     string `json:"host_id"`
	Credential string `json:"credential"`
}

var hostName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (in EnrolRequest) check() error {
	switch {
	case !hostName.MatchString(in.Name):
		return catalog.BadRequest.New("name %q: letters, digits, '.', '-' and '_', at most 64", in.Name)
	case in.Slots < 1 || in.Slots > 1024:
		return catalog.BadRequest.New("slots %d: between 1 and 1024", in.Slots)
	case len(in.Labels) > 64 || len(in.Backends) > 16:
		return catalog.BadRequest.New("at most 64 labels and 16 backends")
	}
	for k, v := range in.Labels {
		if !hostName.MatchString(k) || len(v) > 256 {
			return catalog.BadRequest.New("label %q: a key like a name, a value of at most 256 bytes", k)
		}
	}
	return checkSealKey(in.SealKey, true)
}

// Enrol exchanges a one-time token for a host identity. The token is
// marked used in the same statement that finds it unused and unexpired,
// so two enrolments with one token never both succeed.
func (h *Hosts) Enrol(ctx context.Context, in EnrolRequest) (Enrolled, error) {
	if err := in.check(); err != nil {
		return Enrolled{}, err
	}
	id := "h" + randomHex(6)
	now := micros(time.Now())
	res, err := h.DB.Write.ExecContext(ctx, `UPDATE host_enrol_tokens SET used_at = $1, host_id = $2
		WHERE hash = $3 AND used_at IS NULL AND expires_at > $1`, now, id, hashSecret(in.Token))
	if err != nil {
		return Enrolled{}, fmt.Errorf("enrol: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return Enrolled{}, catalog.EnrolRefused.New("the enrolment token was refused (unknown, already used, or expired)")
	}
	secret := randomHex(32)
	labels, _ := json.Marshal(nonNil(in.Labels))
	backends, _ := json.Marshal(append([]string{}, in.Backends...))
	if _, err := h.DB.Write.ExecContext(ctx, `INSERT INTO hosts (id, name, labels, backends, slots, secret_hash, enrolled_at, seal_key)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, id, in.Name, string(labels), string(backends), in.Slots, hashSecret(secret), now,
		sealKeyColumn(in.SealKey)); err != nil {
		return Enrolled{}, fmt.Errorf("enrol: %w", err)
	}
	h.log().Info("host enrolled", "host", id, "name", in.Name, "slots", in.Slots)
	return Enrolled{HostID: id, Credential: id + "." + secret}, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Host is one enrolled host as listed.
type Host struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	Labels        map[string]string `json:"labels"`
	Backends      []string          `json:"backends"`
	Slots         int               `json:"slots"`
	EnrolledAt    time.Time         `json:"enrolled_at"`
	LastHeartbeat *time.Time        `json:"last_heartbeat,omitempty"`
	Revoked       bool              `json:"revoked"`
	// Runs are the runs it executes now.
	Runs []string `json:"runs"`
	// SealKey is the fingerprint of its sealing key ("": it has none yet).
	SealKey string `json:"seal_key,omitempty"`
	// Agents are the agent profiles whose CLI its last claim said is on
	// its PATH (null: it has not said).
	Agents []string `json:"agents"`

	sealKey []byte // the key itself
}

const hostColumns = `id, name, labels, backends, slots, enrolled_at, last_seen, revoked_at, seal_key, agents`

func scanHost(sc interface{ Scan(...any) error }) (*Host, error) {
	var h Host
	var labels, backends string
	var enrolled int64
	var seen, revoked sql.NullInt64
	var key, agents sql.NullString
	if err := sc.Scan(&h.ID, &h.Name, &labels, &backends, &h.Slots, &enrolled, &seen, &revoked, &key, &agents); err != nil {
		return nil, err
	}
	h.setSealKey(key)
	h.setAgents(agents)
	_ = json.Unmarshal([]byte(labels), &h.Labels)
	_ = json.Unmarshal([]byte(backends), &h.Backends)
	h.EnrolledAt = time.UnixMicro(enrolled).UTC()
	if seen.Valid {
		t := time.UnixMicro(seen.Int64).UTC()
		h.LastHeartbeat = &t
	}
	h.Revoked = revoked.Valid
	h.Runs = []string{}
	return &h, nil
}

// List lists the enrolled hosts, with the runs each executes now.
func (h *Hosts) List(ctx context.Context) ([]*Host, error) {
	rows, err := h.DB.Read.QueryContext(ctx, `SELECT `+hostColumns+` FROM hosts ORDER BY enrolled_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	defer rows.Close()
	out := []*Host{}
	byID := map[string]*Host{}
	for rows.Next() {
		hs, err := scanHost(rows)
		if err != nil {
			return nil, fmt.Errorf("list hosts: %w", err)
		}
		out = append(out, hs)
		byID[hs.ID] = hs
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	claims, err := h.openClaims(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, c := range claims {
		if hs := byID[c.Host]; hs != nil {
			hs.Runs = append(hs.Runs, c.Run)
		}
	}
	return out, nil
}

// authenticate finds the host whose credential the request carries.
func (h *Hosts) authenticate(r *http.Request) (*Host, error) {
	cred, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	id, secret, ok2 := strings.Cut(cred, ".")
	if !ok || !ok2 || id == "" || secret == "" {
		return nil, catalog.HostRefused.New("%s %s carries no host credential", r.Method, r.URL.Path)
	}
	row := h.DB.Read.QueryRowContext(r.Context(), `SELECT `+hostColumns+`, secret_hash FROM hosts WHERE id = $1`, id)
	var hs Host
	var labels, backends, hash string
	var enrolled int64
	var seen, revoked sql.NullInt64
	var key, agents sql.NullString
	err := row.Scan(&hs.ID, &hs.Name, &labels, &backends, &hs.Slots, &enrolled, &seen, &revoked, &key, &agents, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, catalog.HostRefused.New("no host %s is enrolled", id)
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(hash), []byte(hashSecret(secret))) != 1 {
		return nil, catalog.HostRefused.New("the credential of host %s is not the one it was given", id)
	}
	if revoked.Valid {
		return nil, catalog.HostRefused.New("host %s (%s) was revoked", id, hs.Name)
	}
	_ = json.Unmarshal([]byte(labels), &hs.Labels)
	_ = json.Unmarshal([]byte(backends), &hs.Backends)
	hs.setSealKey(key)
	hs.setAgents(agents)
	return &hs, nil
}

// Revoke revokes host id: its next request is refused, and the runs it
// executes lose their leases and are queued again.
func (h *Hosts) Revoke(ctx context.Context, id string) (*Host, error) {
	res, err := h.DB.Write.ExecContext(ctx, `UPDATE hosts SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, micros(time.Now()), id)
	if err != nil {
		return nil, fmt.Errorf("revoke: %w", err)
	}
	n, _ := res.RowsAffected()
	hs, err := scanHost(h.DB.Read.QueryRowContext(ctx, `SELECT `+hostColumns+` FROM hosts WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, catalog.HostNotFound.New("no host %s is enrolled", id)
	}
	if err != nil {
		return nil, fmt.Errorf("revoke: %w", err)
	}
	if n == 0 && !hs.Revoked {
		return nil, fmt.Errorf("revoke %s: nothing changed", id)
	}
	claims, err := h.openClaims(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, c := range claims {
		hs.Runs = append(hs.Runs, c.Run)
		h.lose(ctx, c, "its host "+hs.Name+" ("+id+") was revoked")
	}
	h.log().Info("host revoked", "host", id, "runs", len(claims))
	return hs, nil
}

// run reads run id for a host: the record without the server's paths.
func (h *Hosts) run(ctx context.Context, id string) (*run.Run, error) {
	r, err := h.Home.Store.Get(ctx, id)
	if errors.Is(err, run.ErrNotFound) {
		return nil, catalog.RunNotFound.New("no run %s", id)
	}
	return r, err
}
