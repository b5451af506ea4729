package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/jsonschema"
)

// The schemas of the machine contract, docs/json/*.schema.json.
var (
	schemaOnce sync.Once
	schemaSet  *jsonschema.Set
	schemaErr  error
)

func schemas(t testing.TB) *jsonschema.Set {
	t.Helper()
	schemaOnce.Do(func() { schemaSet, schemaErr = jsonschema.Load("../../docs/json") })
	if schemaErr != nil {
		t.Fatalf("load docs/json: %v", schemaErr)
	}
	return schemaSet
}

// validDoc asserts that out is one JSON document (and nothing else) valid
// against the schema file name.
func validDoc(t testing.TB, name, what, out string) map[string]any {
	t.Helper()
	if err := schemas(t).Validate(name, []byte(out), jsonschema.Options{}); err != nil {
		t.Errorf("%s: %v\n%s", what, err, out)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(out), &m)
	return m
}

// validLines asserts that out is JSON lines, one compact object a line to
// the end, each valid against stream.schema.json, and returns them.
func validLines(t testing.TB, what, out string) []map[string]any {
	t.Helper()
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("%s: the stream does not end with a newline: %q", what, out)
	}
	var lines []map[string]any
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if err := schemas(t).Validate("stream.schema.json", []byte(l), jsonschema.Options{}); err != nil {
			t.Errorf("%s: line %d: %v\n%s", what, i+1, err, l)
			continue
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(l), &m)
		lines = append(lines, m)
	}
	return lines
}

// topKeys is the top-level keys of a JSON object in the order printed.
func topKeys(t testing.TB, doc string) []string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(doc))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", doc)
	}
	var keys []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// filled is v (a pointer to an output type) with every field set to a
// value that is not empty, recursively: marshalled, it shows every field
// the type can print, omitempty or not.
func filled[T any]() []byte {
	var v T
	fill(reflect.ValueOf(&v).Elem(), 0)
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

var (
	rawMessage = reflect.TypeOf(json.RawMessage(nil))
	timeType   = reflect.TypeOf(time.Time{})
)

func fill(v reflect.Value, depth int) {
	if depth > 12 {
		return
	}
	switch {
	case v.Type() == rawMessage:
		v.SetBytes([]byte(`{"k":1}`))
		return
	case v.Type() == timeType:
		return // its zero value prints as a time
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); (f.IsExported() || f.Anonymous) && f.Tag.Get("json") != "-" {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf("x"))
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	}
}
