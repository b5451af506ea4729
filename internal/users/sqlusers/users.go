package sqlusers

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/users"
)

// Store is users.Store on one database, whose schema is up to date.
type Store struct {
	db *sqldb.DB
}

var _ users.Store = (*Store)(nil)

// New returns the store on db.
func New(db *sqldb.DB) *Store { return &Store{db: db} }

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(n int64) time.Time { return time.UnixMicro(n).UTC() }

func fromNull(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromMicros(n.Int64)
	return &t
}

// AddUser makes a user. A name taken is users.ErrExists.
func (s *Store) AddUser(ctx context.Context, name string, role users.Role) (*users.User, error) {
	return s.addUser(ctx, users.NewID("u_"), name, role, false)
}

// EnsureBuiltin makes a built-in user (users.BootstrapID, users.LocalID) if it is not
// there yet; it is an admin.
func (s *Store) EnsureBuiltin(ctx context.Context, id string) error {
	name := map[string]string{users.BootstrapID: users.BootstrapName, users.LocalID: users.LocalName}[id]
	if name == "" {
		return fmt.Errorf("user %s: not a built-in user", id)
	}
	_, err := s.addUser(ctx, id, name, users.Admin, true)
	if errors.Is(err, users.ErrExists) {
		return nil
	}
	return err
}

func (s *Store) addUser(ctx context.Context, id, name string, role users.Role, quiet bool) (*users.User, error) {
	if !users.ValidName(name) {
		return nil, fmt.Errorf("user %q: %w: use lowercase letters, digits, '.', '_' and '-' (at most 64)", name, users.ErrBadName)
	}
	if !role.Valid() {
		return nil, fmt.Errorf("role %q: %w: use admin, member or viewer", role, users.ErrBadName)
	}
	u := &users.User{ID: id, Name: name, Role: role, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	res, err := s.db.Write().ExecContext(ctx, `INSERT INTO users (id, name, role, disabled, created_at, limits)
		VALUES ($1, $2, $3, $4, $5, '{}') ON CONFLICT DO NOTHING`, u.ID, u.Name, string(u.Role), false, micros(u.CreatedAt))
	if err != nil {
		return nil, fmt.Errorf("add user %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if !quiet {
			return nil, fmt.Errorf("user %s: %w", name, users.ErrExists)
		}
		return nil, users.ErrExists
	}
	return u, nil
}

const userCols = `id, name, role, disabled, created_at, limits`

type scanner interface{ Scan(...any) error }

func scanUser(row scanner) (*users.User, error) {
	var u users.User
	var role, limits string
	var created int64
	if err := row.Scan(&u.ID, &u.Name, &role, &u.Disabled, &created, &limits); err != nil {
		return nil, err
	}
	u.Role, u.CreatedAt = users.Role(role), fromMicros(created)
	if err := json.Unmarshal([]byte(limits), &u.Limits); err != nil {
		return nil, fmt.Errorf("user %s: limits: %w", u.Name, err)
	}
	return &u, nil
}

// User returns the user called name (or with that id).
func (s *Store) User(ctx context.Context, name string) (*users.User, error) {
	u, err := scanUser(s.db.Read().QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE name = $1 OR id = $1`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %s: %w", name, users.ErrNotFound)
	}
	return u, err
}

// Users lists the users by name.
func (s *Store) Users(ctx context.Context) ([]users.User, error) {
	rows, err := s.db.Read().QueryContext(ctx, `SELECT `+userCols+` FROM users ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	out := []users.User{}
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
func (s *Store) SetDisabled(ctx context.Context, name string, disabled bool) (*users.User, error) {
	return s.update(ctx, name, `disabled = $2`, disabled)
}

// SetLimits replaces the user's quota overrides.
func (s *Store) SetLimits(ctx context.Context, name string, l users.Limits) (*users.User, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	return s.update(ctx, name, `limits = $2`, string(b))
}

func (s *Store) update(ctx context.Context, name, set string, v any) (*users.User, error) {
	res, err := s.db.Write().ExecContext(ctx, `UPDATE users SET `+set+` WHERE name = $1 OR id = $1`, name, v)
	if err != nil {
		return nil, fmt.Errorf("update user %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, fmt.Errorf("user %s: %w", name, users.ErrNotFound)
	}
	return s.User(ctx, name)
}
