package seal

import (
	"crypto/hpke"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The suite. ML-KEM-768 with X25519 keeps the values secret if either
// holds, and a recording of today's traffic stays closed to a future
// quantum computer; Go's crypto/hpke implements both halves in pure Go,
// so it needs no cgo. AES-256-GCM rather than ChaCha20-Poly1305: the hosts
// are servers with AES instructions (amd64, arm64), and it is the AEAD a
// FIPS 140 build of Go still allows.
var (
	kem  = hpke.MLKEM768X25519()
	kdf  = hpke.HKDFSHA256()
	aead = hpke.AES256GCM()
)

// ErrOpen is why a blob did not open: another key, another Info, or
// changed bytes (the three are told apart by nobody, on purpose).
var ErrOpen = errors.New("the sealed values do not open with this host's key for this run and lease")

// Key is a host's private key.
type Key struct{ k hpke.PrivateKey }

// NewKey makes a new key pair.
func NewKey() (*Key, error) {
	k, err := kem.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("sealing key: %w", err)
	}
	return &Key{k: k}, nil
}

// ParseKey reads a private key kept as Bytes gave it.
func ParseKey(b []byte) (*Key, error) {
	k, err := kem.NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("sealing key: %w", err)
	}
	return &Key{k: k}, nil
}

// Bytes is the private key to keep (the host's data directory, 0600).
func (k *Key) Bytes() ([]byte, error) {
	b, err := k.k.Bytes()
	if err != nil {
		return nil, fmt.Errorf("sealing key: %w", err)
	}
	return b, nil
}

// Public is the public key the server seals to.
func (k *Key) Public() []byte { return k.k.PublicKey().Bytes() }

// CheckPublic reports whether b is a public key of the suite.
func CheckPublic(b []byte) error {
	if _, err := kem.NewPublicKey(b); err != nil {
		return fmt.Errorf("not a sealing key (ML-KEM-768+X25519, %d bytes): %w", len(b), err)
	}
	return nil
}

// Fingerprint names public key pub in lists: the first 8 bytes of its
// SHA-256, in hex.
func Fingerprint(pub []byte) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Info is what a sealed blob is bound to: the run, the host, the claim's
// fencing token.
type Info struct {
	Run, Host string
	Token     int64
}

// bytes is HPKE's info: each part length-prefixed, so that no two Infos
// encode alike.
func (in Info) bytes() []byte {
	b := []byte("agentrun handoff v1")
	for _, p := range []string{in.Run, in.Host, strconv.FormatInt(in.Token, 10)} {
		b = strconv.AppendInt(append(b, '\x00'), int64(len(p)), 10)
		b = append(append(b, ':'), p...)
	}
	return b
}

// Seal seals values to public key pub for in.
func Seal(pub []byte, in Info, values map[string]string) ([]byte, error) {
	pk, err := kem.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	pt, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return hpke.Seal(pk, kdf, aead, in.bytes(), pt)
}

// Open opens a blob Seal made for k's public key and in.
func (k *Key) Open(in Info, blob []byte) (map[string]string, error) {
	pt, err := hpke.Open(k.k, kdf, aead, in.bytes(), blob)
	if err != nil {
		return nil, ErrOpen
	}
	var values map[string]string
	if err := json.Unmarshal(pt, &values); err != nil {
		// (Not the decoder's error: it may quote the plaintext.)
		return nil, errors.New("the sealed values are not a JSON object of strings")
	}
	return values, nil
}
