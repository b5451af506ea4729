// Package jsonschema validates JSON documents against the small subset of
// JSON Schema (draft 2020-12) that the schemas of agentrun's --json output
// (docs/json/*.schema.json) use. It exists for the tests that hold the CLI
// to its machine contract; agentrun itself never validates its output.
//
// Supported keywords: $schema, $id, $defs, $ref (to "#/$defs/NAME", to
// another file of the set, "FILE", or to one of its definitions,
// "FILE#/$defs/NAME"), $comment, title, description, type (a name or a
// list of names; "integer" is a number without a fraction), properties,
// required, additionalProperties (false, true or a schema), items, enum,
// const, oneOf, anyOf and format "date-time" (RFC 3339). A schema that uses
// any other keyword is refused when the set is loaded, so a schema never
// says more than it checks.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Set is the schemas of one directory, by file name.
type Set struct {
	files map[string]map[string]any
}

// Options changes what Validate checks.
type Options struct {
	// Shape checks only the structure (types, properties, required, items):
	// enum, const and format are not checked. For documents whose values
	// are made up (every field filled in to prove it is declared).
	Shape bool
}

var keywords = map[string]bool{
	"$schema": true, "$id": true, "$defs": true, "$ref": true, "$comment": true,
	"title": true, "description": true, "type": true, "properties": true,
	"required": true, "additionalProperties": true, "items": true, "enum": true,
	"const": true, "oneOf": true, "anyOf": true, "format": true,
}

var typeNames = map[string]bool{
	"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true,
}

// Load reads every *.schema.json in dir and checks that each uses only
// the supported keywords and that every $ref resolves.
func Load(dir string) (*Set, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no *.schema.json in %s", dir)
	}
	s := &Set{files: map[string]map[string]any{}}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		v, err := decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(p), err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: not a schema object", filepath.Base(p))
		}
		s.files[filepath.Base(p)] = m
	}
	for name, m := range s.files {
		if err := s.check(name, m, "#"); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return s, nil
}

// Names lists the schema files of the set.
func (s *Set) Names() []string {
	var out []string
	for n := range s.files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// decode parses JSON keeping numbers exact.
func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

// check walks one schema: only known keywords, well-formed values, refs
// that resolve.
func (s *Set) check(file string, sch map[string]any, at string) error {
	for k := range sch {
		if !keywords[k] {
			return fmt.Errorf("%s: unsupported keyword %q", at, k)
		}
	}
	sub := func(v any, where string) error {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not a schema object", where)
		}
		return s.check(file, m, where)
	}
	if t, ok := sch["type"]; ok {
		names, err := typeList(t)
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		for _, n := range names {
			if !typeNames[n] {
				return fmt.Errorf("%s: unknown type %q", at, n)
			}
		}
	}
	if r, ok := sch["$ref"]; ok {
		ref, ok := r.(string)
		if !ok {
			return fmt.Errorf("%s: $ref is not a string", at)
		}
		if _, _, err := s.resolve(file, ref); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
	}
	for _, k := range []string{"properties", "$defs"} {
		if v, ok := sch[k]; ok {
			m, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("%s/%s: not an object", at, k)
			}
			for name, p := range m {
				if err := sub(p, at+"/"+k+"/"+name); err != nil {
					return err
				}
			}
		}
	}
	if v, ok := sch["required"]; ok {
		l, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s/required: not an array", at)
		}
		props, _ := sch["properties"].(map[string]any)
		for _, n := range l {
			name, ok := n.(string)
			if !ok {
				return fmt.Errorf("%s/required: %v is not a string", at, n)
			}
			if _, ok := props[name]; !ok && sch["additionalProperties"] == false {
				return fmt.Errorf("%s/required: %q is required but not a property", at, name)
			}
		}
	}
	if v, ok := sch["items"]; ok {
		if err := sub(v, at+"/items"); err != nil {
			return err
		}
	}
	if v, ok := sch["additionalProperties"]; ok {
		if _, isBool := v.(bool); !isBool {
			if err := sub(v, at+"/additionalProperties"); err != nil {
				return err
			}
		}
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if v, ok := sch[k]; ok {
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return fmt.Errorf("%s/%s: not a non-empty array", at, k)
			}
			for i, e := range l {
				if err := sub(e, fmt.Sprintf("%s/%s/%d", at, k, i)); err != nil {
					return err
				}
			}
		}
	}
	if v, ok := sch["enum"]; ok {
		if l, ok := v.([]any); !ok || len(l) == 0 {
			return fmt.Errorf("%s/enum: not a non-empty array", at)
		}
	}
	if v, ok := sch["format"]; ok && v != "date-time" {
		return fmt.Errorf("%s/format: only date-time is supported, not %v", at, v)
	}
	return nil
}

func typeList(t any) ([]string, error) {
	switch t := t.(type) {
	case string:
		return []string{t}, nil
	case []any:
		var out []string
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("type %v is not a name", e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("type %v is neither a name nor a list of names", t)
}

// resolve finds the schema a $ref names, and the file it is in.
func (s *Set) resolve(file, ref string) (string, map[string]any, error) {
	target, frag, _ := strings.Cut(ref, "#")
	if target != "" {
		file = target
	}
	root, ok := s.files[file]
	if !ok {
		return "", nil, fmt.Errorf("$ref %q: no schema file %s", ref, file)
	}
	if frag == "" {
		return file, root, nil
	}
	name, ok := strings.CutPrefix(frag, "/$defs/")
	if !ok || strings.Contains(name, "/") {
		return "", nil, fmt.Errorf("$ref %q: only #/$defs/NAME is supported", ref)
	}
	defs, _ := root["$defs"].(map[string]any)
	d, ok := defs[name].(map[string]any)
	if !ok {
		return "", nil, fmt.Errorf("$ref %q: %s has no $defs/%s", ref, file, name)
	}
	return file, d, nil
}

// Validate checks doc (one JSON value) against the schema file name. The
// error lists every violation, each with its JSON pointer.
func (s *Set) Validate(name string, doc []byte, o Options) error {
	v, err := decode(doc)
	if err != nil {
		return fmt.Errorf("not one JSON value: %w", err)
	}
	return s.ValidateValue(name, v, o)
}

// ValidateValue is Validate of a decoded value (numbers as json.Number or
// float64).
func (s *Set) ValidateValue(name string, v any, o Options) error {
	sch, ok := s.files[name]
	if !ok {
		return fmt.Errorf("no schema %s", name)
	}
	var errs []string
	s.validate(name, sch, v, "", o, &errs)
	if len(errs) > 0 {
		return fmt.Errorf("%s:\n  %s", name, strings.Join(errs, "\n  "))
	}
	return nil
}

// failf records one violation at the place being validated.
type failf func(format string, args ...any)

// validate checks v against sch (of file), appending each violation,
// with at (its JSON pointer), to errs.
func (s *Set) validate(file string, sch map[string]any, v any, at string, o Options, errs *[]string) {
	fail := func(format string, args ...any) {
		where := at
		if where == "" {
			where = "/"
		}
		*errs = append(*errs, where+": "+fmt.Sprintf(format, args...))
	}
	if r, ok := sch["$ref"].(string); ok {
		f, d, err := s.resolve(file, r)
		if err != nil {
			fail("%v", err)
			return
		}
		s.validate(f, d, v, at, o, errs)
	}
	if !typeMatches(sch, v, fail) {
		return
	}
	if !o.Shape {
		checkValue(sch, v, fail)
	}
	s.validateAlternatives(file, sch, v, at, o, fail)
	if obj, ok := v.(map[string]any); ok {
		s.validateObject(file, sch, obj, at, o, errs, fail)
	}
	if arr, ok := v.([]any); ok {
		if it, ok := sch["items"].(map[string]any); ok {
			for i, e := range arr {
				s.validate(file, it, e, fmt.Sprintf("%s/%d", at, i), o, errs)
			}
		}
	}
}

// typeMatches checks the type keyword; the rest of a schema says nothing
// useful about a value of the wrong type.
func typeMatches(sch map[string]any, v any, fail failf) bool {
	t, ok := sch["type"]
	if !ok {
		return true
	}
	names, _ := typeList(t)
	for _, n := range names {
		if hasType(v, n) {
			return true
		}
	}
	fail("is %s, want %s", typeOf(v), strings.Join(names, " or "))
	return false
}

// checkValue checks the keywords about the value itself: enum, const and
// format.
func checkValue(sch map[string]any, v any, fail failf) {
	if e, ok := sch["enum"].([]any); ok {
		found := false
		for _, c := range e {
			if equal(c, v) {
				found = true
			}
		}
		if !found {
			fail("%s is not one of %s", show(v), show(e))
		}
	}
	if c, ok := sch["const"]; ok && !equal(c, v) {
		fail("%s is not %s", show(v), show(c))
	}
	if sch["format"] == "date-time" {
		if str, ok := v.(string); ok {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				fail("%q is not an RFC 3339 time", str)
			}
		}
	}
}

// validateAlternatives checks oneOf (exactly one matches) and anyOf (at
// least one does); a miss names the violations of the closest
// alternative.
func (s *Set) validateAlternatives(file string, sch map[string]any, v any, at string, o Options, fail failf) {
	for _, k := range []string{"oneOf", "anyOf"} {
		l, ok := sch[k].([]any)
		if !ok {
			continue
		}
		var matched int
		var first []string
		for i, e := range l {
			var sub []string
			s.validate(file, e.(map[string]any), v, at, o, &sub)
			if len(sub) == 0 {
				matched++
			} else if i == 0 || len(sub) < len(first) {
				first = sub
			}
		}
		switch {
		case matched == 0:
			fail("matches none of %s; the closest: %s", k, strings.Join(first, "; "))
		case k == "oneOf" && matched > 1:
			fail("matches %d of oneOf, want exactly one", matched)
		}
	}
}

// validateObject checks required, then each field (in name order)
// against its property or additionalProperties.
func (s *Set) validateObject(file string, sch map[string]any, obj map[string]any, at string, o Options, errs *[]string, fail failf) {
	props, _ := sch["properties"].(map[string]any)
	if req, ok := sch["required"].([]any); ok {
		for _, r := range req {
			if _, ok := obj[r.(string)]; !ok {
				fail("required field %q is missing", r)
			}
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		where := at + "/" + k
		if p, ok := props[k].(map[string]any); ok {
			s.validate(file, p, obj[k], where, o, errs)
			continue
		}
		switch ap := sch["additionalProperties"].(type) {
		case bool:
			if !ap {
				fail("field %q is not declared", k)
			}
		case map[string]any:
			s.validate(file, ap, obj[k], where, o, errs)
		}
	}
}

func hasType(v any, name string) bool {
	switch name {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		switch v.(type) {
		case json.Number, float64:
			return true
		}
	case "integer":
		switch n := v.(type) {
		case json.Number:
			if _, err := n.Int64(); err == nil {
				return true
			}
			f, err := n.Float64()
			return err == nil && f == float64(int64(f))
		case float64:
			return n == float64(int64(n))
		}
	}
	return false
}

func typeOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	case json.Number, float64:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// equal compares two decoded JSON values, numbers by value.
func equal(a, b any) bool {
	na, aok := num(a)
	nb, bok := num(b)
	if aok || bok {
		return aok && bok && na == nb
	}
	return reflect.DeepEqual(a, b)
}

func num(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 120 {
		return string(b[:117]) + "..."
	}
	return string(b)
}
