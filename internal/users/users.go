package users

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/sqldb"
)

// Role is what a user may do: admins everything, members submit and act
// on their own runs, viewers read every run and change nothing.
type Role string

const (
	Admin  Role = "admin"
	Member Role = "member"
	Viewer Role = "viewer"
)

// Roles are the roles in order of power.
var Roles = []Role{Admin, Member, Viewer}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == Admin || r == Member || r == Viewer }

// Scopes of a token: what requests it may make, within its user's role.
const (
	ScopeRunsRead  = "runs:read"
	ScopeRunsWrite = "runs:write"
	ScopeAdmin     = "admin"
)

// AllScopes are the scopes, in the order they are shown.
var AllScopes = []string{ScopeRunsRead, ScopeRunsWrite, ScopeAdmin}

// RoleScopes are the scopes a role grants; a token's scopes narrow them.
func RoleScopes(r Role) []string {
	switch r {
	case Admin:
		return AllScopes
	case Member:
		return []string{ScopeRunsRead, ScopeRunsWrite}
	case Viewer:
		return []string{ScopeRunsRead}
	}
	return nil
}

// Built-in users: the holder of the server's --token-file token, and
// whoever calls a server that has no token on loopback.
const (
	BootstrapID   = "u_bootstrap"
	BootstrapName = "bootstrap"
	LocalID       = "u_local"
	LocalName     = "local"
)

// Errors the store returns; the server turns them into catalog errors.
var (
	ErrExists   = errors.New("already exists")
	ErrNotFound = errors.New("not found")
	ErrBadName  = errors.New("bad name")
)

// User is one user.
type User struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	Disabled  bool      `json:"disabled"`
	CreatedAt time.Time `json:"created_at"`
	// Limits are the admin's overrides of the server's default quotas.
	Limits Limits `json:"limits"`
}

// Store is the users, tokens and quota ledger on one database, whose
// schema is up to date.
type Store struct {
	db *sqldb.DB
}

// New returns the store on db.
func New(db *sqldb.DB) *Store { return &Store{db: db} }

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidName reports whether name can name a user or a token: lowercase
// letters, digits, '.', '_' and '-', at most 64, starting with a letter
// or digit.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// newID is prefix and 16 random base32 letters.
func newID(prefix string) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(n int64) time.Time { return time.UnixMicro(n).UTC() }

func fromNull(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromMicros(n.Int64)
	return &t
}

// AddUser makes a user. A name taken is ErrExists.
func (s *Store) AddUser(ctx context.Context, name string, role Role) (*User, error) {
	return s.addUser(ctx, newID("u_"), name, role, false)
}

// EnsureBuiltin makes a built-in user (BootstrapID, LocalID) if it is not
// there yet; it is an admin.
func (s *Store) EnsureBuiltin(ctx context.Context, id string) error {
	name := map[string]string{BootstrapID: BootstrapName, LocalID: LocalName}[id]
	if name == "" {
		return fmt.Errorf("user %s: not a built-in user", id)
	}
	_, err := s.addUser(ctx, id, name, Admin, true)
	if errors.Is(err, ErrExists) {
		return nil
	}
	return err
}

func (s *Store) addUser(ctx context.Context, id, name string, role Role, quiet bool) (*User, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("user %q: %w: use lowercase letters, digits, '.', '_' and '-' (at most 64)", name, ErrBadName)
	}
	if !role.Valid() {
		return nil, fmt.Errorf("role %q: %w: use admin, member or viewer", role, ErrBadName)
	}
	u := &User{ID: id, Name: name, Role: role, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	res, err := s.db.Write().ExecContext(ctx, `INSERT INTO users (id, name, role, disabled, created_at, limits)
		VALUES ($1, $2, $3, $4, $5, '{}') ON CONFLICT DO NOTHING`, u.ID, u.Name, string(u.Role), false, micros(u.CreatedAt))
	if err != nil {
		return nil, fmt.Errorf("add user %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if !quiet {
			return nil, fmt.Errorf("user %s: %w", name, ErrExists)
		}
		return nil, ErrExists
	}
	return u, nil
}

const userCols = `id, name, role, disabled, created_at, limits`

type scanner interface{ Scan(...any) error }

func scanUser(row scanner) (*User, error) {
	var u User
	var role, limits string
	var created int64
	if err := row.Scan(&u.ID, &u.Name, &role, &u.Disabled, &created, &limits); err != nil {
		return nil, err
	}
	u.Role, u.CreatedAt = Role(role), fromMicros(created)
	if err := json.Unmarshal([]byte(limits), &u.Limits); err != nil {
		return nil, fmt.Errorf("user %s: limits: %w", u.Name, err)
	}
	return &u, nil
}

// User returns the user called name (or with that id).
func (s *Store) User(ctx context.Context, name string) (*User, error) {
	u, err := scanUser(s.db.Read().QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE name = $1 OR id = $1`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %s: %w", name, ErrNotFound)
	}
	return u, err
}

// Users lists the users by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	rows, err := s.db.Read().QueryContext(ctx, `SELECT `+userCols+` FROM users ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	out := []User{}
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	return out, rows.Err()
}

// SetDisabled disables (or enables again) the user called name; a
// disabled user's tokens are refused.
func (s *Store) SetDisabled(ctx context.Context, name string, disabled bool) (*User, error) {
	return s.update(ctx, name, `disabled = $2`, disabled)
}

// SetLimits replaces the user's quota overrides.
func (s *Store) SetLimits(ctx context.Context, name string, l Limits) (*User, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	return s.update(ctx, name, `limits = $2`, string(b))
}

func (s *Store) update(ctx context.Context, name, set string, v any) (*User, error) {
	res, err := s.db.Write().ExecContext(ctx, `UPDATE users SET `+set+` WHERE name = $1 OR id = $1`, name, v)
	if err != nil {
		return nil, fmt.Errorf("update user %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, fmt.Errorf("user %s: %w", name, ErrNotFound)
	}
	return s.User(ctx, name)
}
