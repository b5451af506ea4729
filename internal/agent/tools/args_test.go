package tools_test

import (
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/tools"
)

var testParams = []tools.Param{
	{Name: "path", Type: tools.TString, Required: true},
	{Name: "n", Type: tools.TInteger},
	{Name: "b", Type: tools.TBoolean},
	{Name: "edits", Type: tools.TArray, Items: []tools.Param{{Name: "old", Type: tools.TString, Required: true}}},
}

func TestParse(t *testing.T) {
	cases := []struct {
		raw     string
		kind    tools.Kind
		want    map[string]any
		message string
	}{
		{raw: `{"path":"a"}`, want: map[string]any{"path": "a"}},
		{raw: `{"path":"a","n":"42","b":"true","junk":1}`, want: map[string]any{"path": "a", "n": int64(42), "b": true}},
		{raw: `{"path":"a","n":42.0}`, want: map[string]any{"path": "a", "n": int64(42)}},
		{raw: `"{\"path\":\"a\"}"`, want: map[string]any{"path": "a"}},
		{raw: `{"path":7}`, want: map[string]any{"path": "7"}},
		{raw: ``, kind: tools.KindBadArguments, message: "path is missing"},
		{raw: `{"n":1}`, kind: tools.KindBadArguments, message: "path is missing (string)"},
		{raw: `{"path":"a","n":"x"}`, kind: tools.KindBadArguments, message: "n must be an integer, got a string"},
		{raw: `{"path":"a","n":1.5}`, kind: tools.KindBadArguments, message: "n must be an integer"},
		{raw: `{"path":"a","b":"maybe"}`, kind: tools.KindBadArguments, message: "b must be a boolean"},
		{raw: `{"path":"a","edits":[{"new":"x"}]}`, kind: tools.KindBadArguments, message: "edits[0].old is missing"},
		{raw: `{"path":"a","edits":[1]}`, kind: tools.KindBadArguments, message: "edits[0] must be an object"},
		{raw: `{"path": "a"`, kind: tools.KindMalformedArguments, message: "not a JSON object"},
		{raw: `[1,2]`, kind: tools.KindMalformedArguments},
		{raw: `{"path":"a"} {"path":"b"}`, kind: tools.KindMalformedArguments, message: "extra text"},
	}
	for _, c := range cases {
		a, bad := tools.Parse(testParams, c.raw)
		if c.kind == tools.KindOK {
			if bad != nil {
				t.Errorf("%s: %s", c.raw, bad.Output)
				continue
			}
			for k, v := range c.want {
				if a[k] != v {
					t.Errorf("%s: %s = %#v, want %#v", c.raw, k, a[k], v)
				}
			}
			if _, ok := a["junk"]; ok {
				t.Errorf("%s: unknown key kept", c.raw)
			}
			continue
		}
		if bad == nil || bad.Kind != c.kind || !strings.Contains(bad.Output, c.message) {
			t.Errorf("%s: got %+v, want %s containing %q", c.raw, bad, c.kind, c.message)
		}
	}
}

// FuzzParse: tool arguments come from the model; parsing never panics and
// always gives either arguments or a result the model can act on.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"path":"a","n":"1"}`, `{"edits":[{"old":"x"}]}`, `"{\"path\":1}"`, `{`, `null`, `{"edits":"[{}]"}`, `{"n":1e400}`, `""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, tool := range tools.All() {
			a, bad := tools.Parse(tool.Params, raw)
			if (a == nil) == (bad == nil) {
				t.Fatalf("%s: exactly one of args and result expected", tool.Name)
			}
			if bad != nil && (bad.Kind == tools.KindOK || bad.Output == "") {
				t.Fatalf("%s: empty failure result", tool.Name)
			}
		}
		tools.Parse(testParams, raw)
	})
}
