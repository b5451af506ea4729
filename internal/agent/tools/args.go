package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Type of a parameter.
type Type string

const (
	TString  Type = "string"
	TInteger Type = "integer"
	TBoolean Type = "boolean"
	TArray   Type = "array" // of objects described by Items
)

// Param is one argument of a tool.
type Param struct {
	Name        string
	Type        Type
	Description string
	Required    bool
	Items       []Param // TArray: the fields of each object
}

// Args are validated arguments.
type Args map[string]any

func (a Args) Str(k string) string {
	s, _ := a[k].(string)
	return s
}

func (a Args) Int(k string, def int64) int64 {
	if v, ok := a[k].(int64); ok {
		return v
	}
	return def
}

func (a Args) Bool(k string) bool {
	b, _ := a[k].(bool)
	return b
}

func (a Args) List(k string) []Args {
	l, _ := a[k].([]Args)
	return l
}

// Schema is the JSON schema of the tool's parameters (deterministic).
func (t *Tool) Schema() json.RawMessage {
	b, err := json.Marshal(objectSchema(t.Params))
	if err != nil {
		panic(err)
	}
	return b
}

func objectSchema(ps []Param) map[string]any {
	props := map[string]any{}
	req := []string{}
	for _, p := range ps {
		s := map[string]any{"type": string(p.Type), "description": p.Description}
		if p.Type == TArray {
			s["items"] = objectSchema(p.Items)
		}
		props[p.Name] = s
		if p.Required {
			req = append(req, p.Name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
}

// Parse validates raw JSON arguments against ps. On failure it returns a
// Result (malformed_arguments or bad_arguments) saying what to fix.
func Parse(ps []Param, raw string) (Args, *Result) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		raw = "{}"
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		// Some models double-encode: a JSON string holding the object.
		var s string
		if json.Unmarshal([]byte(raw), &s) == nil {
			return Parse(ps, s)
		}
		return nil, &Result{Kind: KindMalformedArguments, Output: "error: the arguments are not a JSON object (" + shortErr(err) + "); send the arguments as one JSON object, e.g. " + example(ps)}
	}
	if dec.More() {
		return nil, &Result{Kind: KindMalformedArguments, Output: "error: the arguments have extra text after the JSON object; send exactly one JSON object, e.g. " + example(ps)}
	}
	a, problems := validate(ps, m, "")
	if len(problems) > 0 {
		return nil, &Result{Kind: KindBadArguments, Output: "error: bad arguments: " + strings.Join(problems, "; ") + ". Expected: " + example(ps)}
	}
	return a, nil
}

func validate(ps []Param, m map[string]any, prefix string) (Args, []string) {
	a := Args{}
	var problems []string
	for _, p := range ps {
		v, ok := m[p.Name]
		if !ok || v == nil {
			if p.Required {
				problems = append(problems, fmt.Sprintf("%s%s is missing (%s)", prefix, p.Name, p.Type))
			}
			continue
		}
		cv, err := coerce(p, v, prefix)
		if err != "" {
			problems = append(problems, err)
			continue
		}
		a[p.Name] = cv
	}
	return a, problems
}

func coerce(p Param, v any, prefix string) (any, string) {
	name := prefix + p.Name
	bad := func() (any, string) {
		return nil, fmt.Sprintf("%s must be %s %s, got %s", name, article(p.Type), p.Type, describe(v))
	}
	switch p.Type {
	case TString:
		switch x := v.(type) {
		case string:
			return x, ""
		case json.Number:
			return x.String(), ""
		case bool:
			return strconv.FormatBool(x), ""
		}
		return bad()
	case TInteger:
		var s string
		switch x := v.(type) {
		case json.Number:
			s = x.String()
		case string:
			s = strings.TrimSpace(x)
		default:
			return bad()
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, ""
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f), ""
		}
		return bad()
	case TBoolean:
		switch x := v.(type) {
		case bool:
			return x, ""
		case string:
			if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
				return b, ""
			}
		case json.Number:
			if x.String() == "0" || x.String() == "1" {
				return x.String() == "1", ""
			}
		}
		return bad()
	case TArray:
		l, ok := v.([]any)
		if !ok {
			// A JSON array sent as a string.
			if s, isStr := v.(string); isStr {
				dec := json.NewDecoder(strings.NewReader(s))
				dec.UseNumber()
				if dec.Decode(&l) != nil {
					return bad()
				}
			} else {
				return bad()
			}
		}
		out := make([]Args, 0, len(l))
		var problems []string
		for i, e := range l {
			m, ok := e.(map[string]any)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s[%d] must be an object, got %s", name, i, describe(e)))
				continue
			}
			a, ps := validate(p.Items, m, fmt.Sprintf("%s[%d].", name, i))
			problems = append(problems, ps...)
			out = append(out, a)
		}
		if len(problems) > 0 {
			return nil, strings.Join(problems, "; ")
		}
		return out, ""
	}
	return bad()
}

func article(t Type) string {
	if t == TInteger || t == TArray {
		return "an"
	}
	return "a"
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "the number " + x.String()
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func shortErr(err error) string {
	if err == nil {
		return "null"
	}
	s := err.Error()
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// example renders a call skeleton for error messages.
func example(ps []Param) string {
	var parts []string
	for _, p := range ps {
		if !p.Required {
			continue
		}
		parts = append(parts, fmt.Sprintf("%q: %s", p.Name, exampleValue(p)))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}

func exampleValue(p Param) string {
	switch p.Type {
	case TInteger:
		return "1"
	case TBoolean:
		return "true"
	case TArray:
		return "[" + example(p.Items) + "]"
	}
	return `"..."`
}
