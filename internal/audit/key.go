package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeyFile is the name of the server's signing key in its data directory.
const KeyFile = "audit.key"

// Signer signs checkpoints.
type Signer interface {
	// Public is the key that verifies the signatures.
	Public() ed25519.PublicKey
	// Sign signs the checkpoint: it sets Key and Signature.
	Sign(c Checkpoint) Checkpoint
}

// Key is an ed25519 private key that signs checkpoints.
type Key struct{ priv ed25519.PrivateKey }

// NewKey makes a key from a private key.
func NewKey(priv ed25519.PrivateKey) *Key { return &Key{priv: priv} }

// Public is the key's public half.
func (k *Key) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Sign sets c's Key and Signature.
func (k *Key) Sign(c Checkpoint) Checkpoint {
	c.Key = hex.EncodeToString(k.Public())
	c.Signature = hex.EncodeToString(ed25519.Sign(k.priv, c.SignedBytes()))
	return c
}

// Fingerprint is "sha256:" and the hex SHA-256 of a public key: a short
// name for comparing keys by eye.
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// LoadOrCreateKey reads the key in dir/audit.key (PKCS #8, PEM), making
// it, readable by its owner only, if there is none. Two servers starting
// on one directory at once end up with the one key the first wrote.
func LoadOrCreateKey(dir string) (*Key, error) {
	path := filepath.Join(dir, KeyFile)
	if k, err := readKey(path); !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	// Written under a temporary name and linked into place: a reader
	// never sees half a key, and a key another server wrote first wins.
	tmp, err := os.CreateTemp(dir, ".audit-key-")
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		err = pem.Encode(tmp, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	return readKey(path)
}

func readKey(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("audit key %s: not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("audit key %s: not an ed25519 key", path)
	}
	return &Key{priv: priv}, nil
}

// ParsePublicKey reads a pinned public key: 64 hex digits (as
// 'agentrun server audit-key' prints it, alone or first on a line), or a
// PEM PUBLIC KEY.
func ParsePublicKey(text string) (ed25519.PublicKey, error) {
	text = strings.TrimSpace(text)
	if blk, _ := pem.Decode([]byte(text)); blk != nil {
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("public key: not an ed25519 key")
		}
		return pub, nil
	}
	if f := strings.Fields(text); len(f) > 0 {
		text = f[0]
	}
	b, err := hex.DecodeString(text)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key %q: want %d hex digits (an ed25519 key) or a PEM public key", trimForMsg(text), 2*ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

func trimForMsg(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
