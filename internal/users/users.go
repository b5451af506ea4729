package users

import (
	"context"
	"errors"
	"time"

	"github.com/agentrun/agentrun/internal/lazyre"
)

// Role is what a user may do: admins everything, members submit and act
// on their own runs, viewers read every run and change nothing.
type Role string

const (
	Admin  Role = "admin"
	Member Role = "member"
	Viewer Role = "viewer"
)

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

// Errors a Store returns; the server turns them into catalog errors.
var (
	ErrExists   = errors.New("already exists")
	ErrNotFound = errors.New("not found")
	ErrBadName  = errors.New("bad name")
	ErrBadToken = errors.New("not a token of this server")
	ErrExpired  = errors.New("token expired")
	ErrRevoked  = errors.New("token revoked")
	ErrDisabled = errors.New("user disabled")
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

// Token is one personal API token as listed: never its secret.
type Token struct {
	ID     string `json:"id"`
	UserID string `json:"user_id"`
	User   string `json:"user"`
	Name   string `json:"name"`
	// Hint is the token's first letters, to tell tokens apart.
	Hint       string     `json:"hint"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Store keeps the users, their tokens and the quota ledger.
type Store interface {
	// AddUser makes a user; a name taken is ErrExists.
	AddUser(ctx context.Context, name string, role Role) (*User, error)
	// EnsureBuiltin makes a built-in admin (BootstrapID, LocalID) unless
	// it is there.
	EnsureBuiltin(ctx context.Context, id string) error
	// User is the user with that name or id.
	User(ctx context.Context, nameOrID string) (*User, error)
	// Users lists the users by name.
	Users(ctx context.Context) ([]User, error)
	SetDisabled(ctx context.Context, name string, disabled bool) (*User, error)
	// SetLimits replaces the user's quota overrides.
	SetLimits(ctx context.Context, name string, l Limits) (*User, error)

	// CreateToken makes a token: its secret (shown once) and its
	// listing. expires zero: never.
	CreateToken(ctx context.Context, u *User, name string, scopes []string, expires time.Time) (string, *Token, error)
	// Tokens lists the tokens of userID ("": everyone's), newest first.
	Tokens(ctx context.Context, userID string) ([]Token, error)
	Token(ctx context.Context, id string) (*Token, error)
	RevokeToken(ctx context.Context, id string) (*Token, error)
	// Authenticate finds a token's user: ErrBadToken for a token not
	// known, ErrExpired, ErrRevoked or ErrDisabled (with the user and
	// token, for the message).
	Authenticate(ctx context.Context, secret string) (*User, *Token, error)

	// Usage is what counts against the user's quotas at now.
	Usage(ctx context.Context, userID string, now time.Time) (Usage, error)
	// Admit decides on a run under limits (Decide) and records the
	// admission, in one serialised step; a refusal is an *Exceeded.
	Admit(ctx context.Context, req Request, l Limits) (*Admission, error)
	// Bind ties an admission to the run it made (or queued again).
	Bind(ctx context.Context, admission, runID string) error
	// Release forgets an admission whose run was not made.
	Release(ctx context.Context, admission string) error
}

var nameRE = lazyre.New(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidName reports whether name can name a user or a token: lowercase
// letters, digits, '.', '_' and '-', at most 64, starting with a letter
// or digit.
func ValidName(name string) bool { return nameRE.MatchString(name) }
