package run

import (
	"crypto/rand"
	"fmt"
	"strings"
)

// IDAlphabet is the alphabet of run ids: lowercase base32 without
// look-alikes, so ids are safe as path components and branch names.
const IDAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// IDLength is the length of a full run id.
const IDLength = 10

// MinPrefix is the shortest prefix a user may give for an id.
const MinPrefix = 3

// NewID returns a fresh random run id.
func NewID() string {
	var b [IDLength]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	for i := range b {
		b[i] = IDAlphabet[int(b[i])%len(IDAlphabet)]
	}
	return string(b[:])
}

// ValidateID checks a full id.
func ValidateID(id string) error {
	if len(id) != IDLength {
		return fmt.Errorf("%w: %q is not %d characters", ErrBadID, id, IDLength)
	}
	return ValidatePrefix(id)
}

// ValidatePrefix checks a user-given id or id prefix. It never accepts
// anything that could act as a path (no '/', '.', or other characters).
func ValidatePrefix(p string) error {
	if len(p) < MinPrefix || len(p) > IDLength {
		return fmt.Errorf("%w: %q must be %d to %d characters", ErrBadID, p, MinPrefix, IDLength)
	}
	for _, c := range p {
		if !strings.ContainsRune(IDAlphabet, c) {
			return fmt.Errorf("%w: %q has character %q outside [0-9a-z]", ErrBadID, p, c)
		}
	}
	return nil
}

// BranchName is the branch a run's result lands on.
func BranchName(id string) string { return "agentrun/" + id }
