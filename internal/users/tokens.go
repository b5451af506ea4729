package users

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"time"
)

// TokenPrefix starts every personal API token.
const TokenPrefix = "agr_"

// tokenLen is a token's length: the prefix, 52 letters of secret (32
// bytes) and 6 of checksum.
const tokenLen = len(TokenPrefix) + 52 + 6

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// Errors of Authenticate.
var (
	ErrBadToken = errors.New("not a token of this server")
	ErrExpired  = errors.New("token expired")
	ErrRevoked  = errors.New("token revoked")
	ErrDisabled = errors.New("user disabled")
)

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

// checksum is the token's last 6 letters: CRC-32 of the secret.
func checksum(secret string) string {
	var b [4]byte
	c := crc32.ChecksumIEEE([]byte(secret))
	b[0], b[1], b[2], b[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return strings.ToLower(b32.EncodeToString(b[:]))[:6]
}

// newSecret is a new token.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	s := strings.ToLower(b32.EncodeToString(b))
	return TokenPrefix + s + checksum(s)
}

// LooksLikeToken reports whether s has a token's form and checksum.
func LooksLikeToken(s string) bool {
	body, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(s) != tokenLen {
		return false
	}
	secret, sum := body[:52], body[52:]
	return checksum(secret) == sum
}

func hashOf(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// CheckScopes refuses unknown or repeated scopes, and none.
func CheckScopes(scopes []string) error {
	if len(scopes) == 0 {
		return fmt.Errorf("%w: a token needs at least one scope (%s)", ErrBadName, strings.Join(AllScopes, ", "))
	}
	for i, sc := range scopes {
		if !slices.Contains(AllScopes, sc) || slices.Contains(scopes[:i], sc) {
			return fmt.Errorf("%w: scope %q: use %s, once each", ErrBadName, sc, strings.Join(AllScopes, ", "))
		}
	}
	return nil
}

// CreateToken makes a token for the user: its secret, shown once, and its
// listing. expires zero: it never expires.
func (s *Store) CreateToken(ctx context.Context, u *User, name string, scopes []string, expires time.Time) (string, *Token, error) {
	if !ValidName(name) {
		return "", nil, fmt.Errorf("token name %q: %w: use lowercase letters, digits, '.', '_' and '-' (at most 64)", name, ErrBadName)
	}
	if err := CheckScopes(scopes); err != nil {
		return "", nil, err
	}
	secret := newSecret()
	t := &Token{ID: newID("tok_"), UserID: u.ID, User: u.Name, Name: name, Hint: secret[:len(TokenPrefix)+6], Scopes: scopes,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	var exp sql.NullInt64
	if !expires.IsZero() {
		e := expires.UTC().Truncate(time.Microsecond)
		t.ExpiresAt, exp = &e, sql.NullInt64{Int64: micros(e), Valid: true}
	}
	_, err := s.db.Write().ExecContext(ctx, `INSERT INTO api_tokens (id, user_id, name, hash, hint, scopes, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, t.ID, t.UserID, t.Name, hashOf(secret), t.Hint, strings.Join(scopes, " "), micros(t.CreatedAt), exp)
	if err != nil {
		return "", nil, fmt.Errorf("create token: %w", err)
	}
	return secret, t, nil
}

const tokenCols = `t.id, t.user_id, u.name, t.name, t.hint, t.scopes, t.created_at, t.expires_at, t.last_used_at, t.revoked_at`

func scanToken(row scanner) (*Token, error) {
	var t Token
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
func (s *Store) Tokens(ctx context.Context, userID string) ([]Token, error) {
	rows, err := s.db.Read().QueryContext(ctx, `SELECT `+tokenCols+` FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE $1 = '' OR t.user_id = $1 ORDER BY t.created_at DESC, t.id`, userID)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []Token{}
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
func (s *Store) Token(ctx context.Context, id string) (*Token, error) {
	t, err := scanToken(s.db.Read().QueryRowContext(ctx, `SELECT `+tokenCols+` FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token %s: %w", id, ErrNotFound)
	}
	return t, err
}

// RevokeToken revokes the token with id (again: no change).
func (s *Store) RevokeToken(ctx context.Context, id string) (*Token, error) {
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
// known, is ErrBadToken; an expired, revoked or disabled one says which
// (with the token and user, for the message).
func (s *Store) Authenticate(ctx context.Context, secret string) (*User, *Token, error) {
	if !LooksLikeToken(secret) {
		return nil, nil, ErrBadToken
	}
	row := s.db.Read().QueryRowContext(ctx, `SELECT `+tokenCols+` FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1`, hashOf(secret))
	t, err := scanToken(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, ErrBadToken
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
		return u, t, ErrRevoked
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return u, t, ErrExpired
	case u.Disabled:
		return u, t, ErrDisabled
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
