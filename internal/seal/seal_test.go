package seal_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/agentrun/agentrun/internal/seal"
)

func newKey(t *testing.T) *seal.Key {
	t.Helper()
	k, err := seal.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSealOpensOnlyForItsHostRunAndLease: a blob opens with the key it
// was sealed to and the same Info only; another host's key, another run,
// host or token, and a changed byte all fail alike.
func TestSealOpensOnlyForItsHostRunAndLease(t *testing.T) {
	a, b := newKey(t), newKey(t)
	in := seal.Info{Run: "r1", Host: "ha", Token: 7}
	values := map[string]string{"OPENAI_API_KEY": "sk-secret", "EMPTY": ""}
	blob, err := seal.Seal(a.Public(), in, values)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(blob, []byte("sk-secret")) {
		t.Fatal("the blob holds the value in clear")
	}
	got, err := a.Open(in, blob)
	if err != nil || len(got) != 2 || got["OPENAI_API_KEY"] != "sk-secret" {
		t.Fatalf("open: %v %v", got, err)
	}
	tampered := bytes.Clone(blob)
	tampered[len(tampered)-1] ^= 1
	for name, c := range map[string]struct {
		k    *seal.Key
		in   seal.Info
		blob []byte
	}{
		"host B's key":    {b, in, blob},
		"another run":     {a, seal.Info{Run: "r2", Host: "ha", Token: 7}, blob},
		"another host id": {a, seal.Info{Run: "r1", Host: "hb", Token: 7}, blob},
		"another token":   {a, seal.Info{Run: "r1", Host: "ha", Token: 8}, blob},
		"parts shifted":   {a, seal.Info{Run: "r1h", Host: "a", Token: 7}, blob},
		"a changed byte":  {a, in, tampered},
		"cut short":       {a, in, blob[:len(blob)/2]},
	} {
		if v, err := c.k.Open(c.in, c.blob); !errors.Is(err, seal.ErrOpen) || v != nil {
			t.Errorf("%s: opened %v, %v", name, v, err)
		}
	}
}

// TestKeyKeptAndRead: a private key kept as Bytes reads back to the same
// key pair; a public key checks, anything else does not.
func TestKeyKeptAndRead(t *testing.T) {
	k := newKey(t)
	b, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	k2, err := seal.ParseKey(b)
	if err != nil || !bytes.Equal(k2.Public(), k.Public()) {
		t.Fatalf("parse: %v", err)
	}
	blob, err := seal.Seal(k.Public(), seal.Info{Run: "r", Host: "h", Token: 1}, map[string]string{"K": "v"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := k2.Open(seal.Info{Run: "r", Host: "h", Token: 1}, blob); err != nil || v["K"] != "v" {
		t.Fatalf("open with the key read back: %v %v", v, err)
	}
	if err := seal.CheckPublic(k.Public()); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]byte{nil, []byte("short"), k.Public()[:100]} {
		if seal.CheckPublic(bad) == nil {
			t.Errorf("%d bytes checked as a public key", len(bad))
		}
		if _, err := seal.Seal(bad, seal.Info{}, nil); err == nil {
			t.Errorf("sealed to %d bytes", len(bad))
		}
	}
	if _, err := seal.ParseKey([]byte("short")); err == nil {
		t.Error("a short private key parsed")
	}
	if f := seal.Fingerprint(k.Public()); len(f) != 16 || f == seal.Fingerprint(k2.Public()[1:]) {
		t.Errorf("fingerprint %q", f)
	}
}
