package jsonschema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func set(t *testing.T, files map[string]string) (*Set, error) {
	t.Helper()
	dir := t.TempDir()
	for n, s := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Load(dir)
}

const common = `{"$defs": {
  "state": {"type": "string", "enum": ["running", "succeeded"]},
  "time": {"type": "string", "format": "date-time"}
}}`

const doc = `{
  "type": "object",
  "properties": {
    "id": {"type": "string"},
    "n": {"type": "integer"},
    "status": {"$ref": "common.schema.json#/$defs/state"},
    "at": {"$ref": "common.schema.json#/$defs/time"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "env": {"type": "object", "additionalProperties": {"type": "string"}},
    "kind": {"const": "x"},
    "maybe": {"type": ["string", "null"]},
    "any": {"description": "anything"},
    "line": {"oneOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}]}
  },
  "required": ["id", "status"],
  "additionalProperties": false,
  "$defs": {
    "a": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false},
    "b": {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"], "additionalProperties": false}
  }
}`

func TestValidate(t *testing.T) {
	s, err := set(t, map[string]string{"common.schema.json": common, "doc.schema.json": doc})
	if err != nil {
		t.Fatal(err)
	}
	good := `{"id": "r1", "n": 3, "status": "running", "at": "2026-01-02T03:04:05.123Z", "tags": ["a"],
	  "env": {"K": "v"}, "kind": "x", "maybe": null, "any": [1, {"x": 2}], "line": {"b": 1}}`
	if err := s.Validate("doc.schema.json", []byte(good), Options{}); err != nil {
		t.Fatalf("valid document refused: %v", err)
	}
	for _, c := range []struct{ doc, want string }{
		{`{"id": "r1"}`, `required field "status" is missing`},
		{`{"id": "r1", "status": "running", "extra": 1}`, `field "extra" is not declared`},
		{`{"id": 1, "status": "running"}`, `/id: is number, want string`},
		{`{"id": "r1", "status": "done"}`, `"done" is not one of`},
		{`{"id": "r1", "status": "running", "n": 1.5}`, `/n: is number, want integer`},
		{`{"id": "r1", "status": "running", "at": "yesterday"}`, `not an RFC 3339 time`},
		{`{"id": "r1", "status": "running", "tags": [1]}`, `/tags/0: is number`},
		{`{"id": "r1", "status": "running", "env": {"K": 1}}`, `/env/K: is number`},
		{`{"id": "r1", "status": "running", "kind": "y"}`, `"y" is not "x"`},
		{`{"id": "r1", "status": "running", "line": {"c": 1}}`, `matches none of oneOf`},
		{`{"id": "r1", "status": "running", "line": {"a": 1, "b": 1}}`, `matches none of oneOf`},
		{`{"id": "r1", "status": "running"} {}`, `more than one JSON value`},
	} {
		err := s.Validate("doc.schema.json", []byte(c.doc), Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.doc, err, c.want)
		}
	}
	// Shape checks leave the values alone.
	if err := s.Validate("doc.schema.json", []byte(`{"id": "r1", "status": "x", "kind": "y", "at": "z"}`), Options{Shape: true}); err != nil {
		t.Errorf("shape: %v", err)
	}
}

func TestLoadRefusesWhatItCannotCheck(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"type": "object", "patternProperties": {}}`, `unsupported keyword "patternProperties"`},
		{`{"type": "strng"}`, `unknown type "strng"`},
		{`{"$ref": "#/$defs/nope"}`, `has no $defs/nope`},
		{`{"$ref": "other.schema.json"}`, `no schema file other.schema.json`},
		{`{"properties": {"a": {"minimum": 1}}}`, `unsupported keyword "minimum"`},
		{`{"type": "string", "format": "email"}`, `only date-time`},
		{`{"properties": {}, "required": ["a"], "additionalProperties": false}`, `"a" is required but not a property`},
	} {
		_, err := set(t, map[string]string{"x.schema.json": c.schema})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.schema, err, c.want)
		}
	}
}

// The project's own schemas load.
func TestProjectSchemasLoad(t *testing.T) {
	s, err := Load("../../docs/json")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Names()) < 19 {
		t.Errorf("only %v", s.Names())
	}
}
