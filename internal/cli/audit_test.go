package cli

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/audit"
	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/server"
)

// The audit documents declare every field their types print.
func TestAuditSchemasDeclareEveryField(t *testing.T) {
	for _, c := range []struct {
		schema string
		doc    []byte
	}{
		{"audit-verify.schema.json", filled[auditVerifyOutput]()},
		{"audit-list.schema.json", filled[server.AuditList]()},
		{"audit-checkpoints.schema.json", filled[server.AuditCheckpoints]()},
		{"audit-key.schema.json", filled[server.AuditKey]()},
		{"audit-export.schema.json", []byte(`{"entry":` + string(filled[audit.Entry]()) + `}`)},
		{"audit-export.schema.json", []byte(`{"checkpoint":` + string(filled[audit.Checkpoint]()) + `}`)},
	} {
		if err := schemas(t).Validate(c.schema, c.doc, jsonschema.Options{Shape: true}); err != nil {
			t.Errorf("%s: %v\nfilled in: %s", c.schema, err, c.doc)
		}
	}
}

// exportFile writes an export of n entries sealed at the end, and returns
// its path and the signing key's hex.
func exportFile(t *testing.T, n int, tamper func(es []audit.Entry)) (string, string) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	k := audit.NewKey(priv)
	var es []audit.Entry
	seq, hash := int64(0), audit.ZeroHash
	for i := range n {
		e, err := audit.Chain(audit.Entry{Actor: "token", Action: "submit", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}, seq, hash, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
		seq, hash = e.Seq, e.Hash
	}
	cp := k.Sign(audit.Checkpoint{Seq: seq, Hash: hash, Time: audit.FormatTime(time.Now())})
	tamper(es)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range es {
		enc.Encode(audit.Line{Entry: &es[i]})
	}
	enc.Encode(audit.Line{Checkpoint: &cp})
	f := filepath.Join(t.TempDir(), "trail.jsonl")
	if err := os.WriteFile(f, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return f, fmt.Sprintf("%x", k.Public())
}

// TestAuditVerifyFile: verify --file checks an export without a server,
// with the key pinned by flag, file or variable; a tampered export exits
// 4 naming the entry; no key pinned, or no server for list, is a usage
// error.
func TestAuditVerifyFile(t *testing.T) {
	h := newTestHome(t)
	good, key := exportFile(t, 5, func([]audit.Entry) {})
	if code, out, errb := h.exec("audit", "verify", "--file", good, "--key-hex", key); code != 0 || !strings.Contains(out, "5 entries") {
		t.Fatalf("exit %d: %s %s", code, out, errb)
	}
	keyFile := filepath.Join(t.TempDir(), "audit.pub")
	os.WriteFile(keyFile, []byte(key+"  ed25519 sha256:...\n"), 0o600)
	if code, out, errb := h.exec("audit", "verify", "--file", good, "--key", keyFile, "--json"); code != 0 {
		t.Fatalf("--key: exit %d: %s %s", code, out, errb)
	} else {
		validDoc(t, "audit-verify.schema.json", "audit verify --json", out)
	}
	h.env["AGENTRUN_AUDIT_KEY"] = key
	if code, _, errb := h.exec("audit", "verify", "--file", good); code != 0 {
		t.Fatalf("AGENTRUN_AUDIT_KEY: exit %d: %s", code, errb)
	}
	delete(h.env, "AGENTRUN_AUDIT_KEY")

	bad, key2 := exportFile(t, 5, func(es []audit.Entry) { es[2].Actor = "someone" })
	code, out, _ := h.exec("audit", "verify", "--file", bad, "--key-hex", key2, "--json")
	d := validDoc(t, "audit-verify.schema.json", "audit verify --json", out)
	if p, _ := d["problem"].(map[string]any); code != 4 || p["kind"] != "edited" || p["seq"] != float64(3) || d["error"].(map[string]any)["code"] != "audit_tampered" {
		t.Fatalf("tampered: exit %d: %s", code, out)
	}
	if code, _, errb := h.exec("audit", "verify", "--file", bad, "--key-hex", key2); code != 4 || !strings.Contains(errb, "entry 3 edited") {
		t.Fatalf("tampered, human: exit %d: %s", code, errb)
	}
	if code, out, _ := h.exec("audit", "verify", "--file", good, "--json"); code != 2 || !strings.Contains(out, `"audit_key"`) {
		t.Fatalf("no key: exit %d: %s", code, out)
	}
	if code, out, _ := h.exec("audit", "verify", "--file", filepath.Join(t.TempDir(), "none"), "--key-hex", key, "--json"); code != 2 || !strings.Contains(out, `"audit_file"`) {
		t.Fatalf("no file: exit %d: %s", code, out)
	}
	if code, out, _ := h.exec("audit", "list", "--json"); code != 2 || !strings.Contains(out, "no server is named") {
		t.Fatalf("list without a server: exit %d: %s", code, out)
	}
}
