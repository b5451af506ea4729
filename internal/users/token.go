package users

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
)

// TokenPrefix starts every personal API token.
const TokenPrefix = "agr_"

// tokenLen is a token's length: the prefix, 52 letters of secret (32
// bytes) and 6 of checksum.
const tokenLen = len(TokenPrefix) + 52 + 6

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// checksum is the token's last 6 letters: CRC-32 of the secret.
func checksum(secret string) string {
	c := crc32.ChecksumIEEE([]byte(secret))
	b := []byte{byte(c >> 24), byte(c >> 16), byte(c >> 8), byte(c)}
	return strings.ToLower(b32.EncodeToString(b))[:6]
}

// NewSecret is a new token.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	s := strings.ToLower(b32.EncodeToString(b))
	return TokenPrefix + s + checksum(s)
}

// Hint is the part of a token shown in listings: the prefix and 6
// letters.
func Hint(secret string) string { return secret[:len(TokenPrefix)+6] }

// LooksLikeToken reports whether s has a token's form and checksum.
func LooksLikeToken(s string) bool {
	body, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(s) != tokenLen {
		return false
	}
	return checksum(body[:52]) == body[52:]
}

// Hash is what a store keeps of a token: its SHA-256, in hex.
func Hash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewID is prefix and 16 random base32 letters.
func NewID(prefix string) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return prefix + strings.ToLower(b32.EncodeToString(b))
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
