package sqlusers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/users"
)

// CreateToken makes a token for the user: its secret, shown once, and its
// listing. expires zero: it never expires.
func (s *Store) CreateToken(ctx context.Context, u *users.User, name string, scopes []string, expires time.Time) (string, *users.Token, error) {
	if !users.ValidName(name) {
		return "", nil, fmt.Errorf("token name %q: %w: use lowercase letters, digits, '.', '_' and '-' (at most 64)", name, users.ErrBadName)
	}
	if err := users.CheckScopes(scopes); err != nil {
		return "", nil, err
	}
	secret := users.NewSecret()
	t := &users.Token{ID: users.NewID("tok_"), UserID: u.ID, User: u.Name, Name: name, Hint: users.Hint(secret), Scopes: scopes,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	var exp sql.NullInt64
	if !expires.IsZero() {
		e := expires.UTC().Truncate(time.Microsecond)
		t.ExpiresAt, exp = &e, sql.NullInt64{Int64: micros(e), Valid: true}
	}
	_, err := s.db.Write().ExecContext(ctx, `INSERT INTO api_tokens (id, user_id, name, hash, hint, scopes, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, t.ID, t.UserID, t.Name, users.Hash(secret), t.Hint, strings.Join(scopes, " "), micros(t.CreatedAt), exp)
	if err != nil {
		return "", nil, fmt.Errorf("create token: %w", err)
	}
	return secret, t, nil
}

const tokenCols = `t.id, t.user_id, u.name, t.name, t.hint, t.scopes, t.created_at, t.expires_at, t.last_used_at, t.revoked_at`

func scanToken(row scanner) (*users.Token, error) {
	var t users.Token
	var scopes string
	var created int64
	var exp, used, rev sql.NullInt64
	if err := row.Scan(&t.ID, &t.UserID, &t.User, &t.Name, &t.Hint, &scopes, &created, &exp, &used, &rev); err != nil {
		return nil, err
	}
	t.Scopes = strings.Fields(scopes)
	t.CreatedAt, t.ExpiresAt, t.LastUsedAt, t.RevokedAt = fromMicros(created), fromNull(exp), fromNull(used), fromNull(rev)
	return &t, nil
}

// Tokens lists the tokens of the user with id userID ("": everyone's),
// newest first.
func (s *Store) Tokens(ctx context.Context, userID string) ([]users.Token, error) {
	rows, err := s.db.Read().QueryContext(ctx, `SELECT `+tokenCols+` FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE $1 = '' OR t.user_id = $1 ORDER BY t.created_at DESC, t.id`, userID)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []users.Token{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *t)
	}
	return out, rows.Err()
}

// Token returns the token with id.
func (s *Store) Token(ctx context.Context, id string) (*users.Token, error) {
	t, err := scanToken(s.db.Read().QueryRowContext(ctx, `SELECT `+tokenCols+` FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token %s: %w", id, users.ErrNotFound)
	}
	return t, err
}

// RevokeToken revokes the token with id (again: no change).
func (s *Store) RevokeToken(ctx context.Context, id string) (*users.Token, error) {
	if _, err := s.db.Write().ExecContext(ctx, `UPDATE api_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`,
		id, micros(time.Now())); err != nil {
		return nil, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return s.Token(ctx, id)
}

// SetExpiry sets when the token expires (tests and admins that cut a
// token short).
func (s *Store) SetExpiry(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.Write().ExecContext(ctx, `UPDATE api_tokens SET expires_at = $2 WHERE id = $1`, id, micros(at))
	return err
}

// touchEvery is how stale last_used_at may get: a token used all the
// time costs one write a minute, not one a request.
const touchEvery = time.Minute

// Authenticate finds the token's user. A token of another form, or not
// known, is users.ErrBadToken; an expired, revoked or disabled one says which
// (with the token and user, for the message).
func (s *Store) Authenticate(ctx context.Context, secret string) (*users.User, *users.Token, error) {
	if !users.LooksLikeToken(secret) {
		return nil, nil, users.ErrBadToken
	}
	row := s.db.Read().QueryRowContext(ctx, `SELECT `+tokenCols+` FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1`, users.Hash(secret))
	t, err := scanToken(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, users.ErrBadToken
	}
	if err != nil {
		return nil, nil, fmt.Errorf("authenticate: %w", err)
	}
	u, err := s.User(ctx, t.UserID)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	switch {
	case t.RevokedAt != nil:
		return u, t, users.ErrRevoked
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return u, t, users.ErrExpired
	case u.Disabled:
		return u, t, users.ErrDisabled
	}
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= touchEvery {
		// Best effort: a request is not refused because its token's
		// last use could not be written down.
		_, _ = s.db.Write().ExecContext(ctx, `UPDATE api_tokens SET last_used_at = $2 WHERE id = $1`, t.ID, micros(now))
		n := now.UTC().Truncate(time.Microsecond)
		t.LastUsedAt = &n
	}
	return u, t, nil
}
