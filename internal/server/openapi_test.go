package server_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/docs"
	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/server"
)

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

// openapiDoc is as much of docs/openapi.json as the checks read.
type openapiDoc struct {
	OpenAPI string                          `json:"openapi"`
	Paths   map[string]map[string]operation `json:"paths"`
}

type operation struct {
	OperationID string              `json:"operationId"`
	Responses   map[string]response `json:"responses"`
}

type response struct {
	Content map[string]struct {
		Schema map[string]any `json:"schema"`
	} `json:"content"`
}

func openapi(t testing.TB) openapiDoc {
	t.Helper()
	var d openapiDoc
	if err := json.Unmarshal(docs.OpenAPI, &d); err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	return d
}

// schemaFiles are the docs/json files a response schema names: a $ref,
// or each $ref of a oneOf.
func schemaFiles(s map[string]any) []string {
	if r, ok := s["$ref"].(string); ok {
		if f, ok := strings.CutPrefix(r, "json/"); ok {
			return []string{f}
		}
	}
	var out []string
	if alts, ok := s["oneOf"].([]any); ok {
		for _, a := range alts {
			if m, ok := a.(map[string]any); ok {
				out = append(out, schemaFiles(m)...)
			}
		}
	}
	return out
}

// conforms checks an answer against the document: the operation lists its
// status, and a JSON body validates against one of the schemas given.
func conforms(t *testing.T, method, pattern string, a answer) {
	t.Helper()
	op, ok := openapi(t).Paths[pattern][strings.ToLower(method)]
	if !ok {
		// Unknown routes answer no_route, as the catch-all does.
		if a.status != http.StatusNotFound && a.status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s is not in docs/openapi.json (answered %d)", method, pattern, a.status)
		}
		return
	}
	resp, ok := op.Responses[strconv.Itoa(a.status)]
	if !ok {
		t.Errorf("%s %s answered %d, which docs/openapi.json does not list: %s", method, pattern, a.status, a.body)
		return
	}
	ct, _, _ := strings.Cut(a.header.Get("Content-Type"), ";")
	c, ok := resp.Content[ct]
	if !ok {
		t.Errorf("%s %s %d: content type %q is not in docs/openapi.json", method, pattern, a.status, ct)
		return
	}
	files := schemaFiles(c.Schema)
	if ct != "application/json" || len(files) == 0 {
		return
	}
	var errs []string
	for _, f := range files {
		err := schemas(t).Validate(f, a.body, jsonschema.Options{})
		if err == nil {
			return
		}
		errs = append(errs, f+": "+err.Error())
	}
	t.Errorf("%s %s %d: the body validates against none of its schemas:\n%s\n%s", method, pattern, a.status, strings.Join(errs, "\n"), a.body)
}

// TestOpenAPIDescribesEveryRoute: the routes the server registers and the
// paths of docs/openapi.json are the same, and every schema the document
// names is a schema of docs/json.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	d := openapi(t)
	if d.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", d.OpenAPI)
	}
	var documented []string
	for p, ops := range d.Paths {
		for m, op := range ops {
			documented = append(documented, strings.ToUpper(m)+" "+p)
			for status, r := range op.Responses {
				for ct, c := range r.Content {
					for _, f := range schemaFiles(c.Schema) {
						if !slices.Contains(schemas(t).Names(), f) {
							t.Errorf("%s %s %s %s names %s, not in docs/json", m, p, status, ct, f)
						}
					}
				}
			}
		}
	}
	routes := server.New(server.Options{Hosts: &server.Hosts{}}).Routes()
	sort.Strings(documented)
	sort.Strings(routes)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in docs/openapi.json", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(routes, r) {
			t.Errorf("docs/openapi.json describes %s, which the server does not register", r)
		}
	}
}

// TestOpenAPIServed: /v1/openapi.json serves the document kept in the
// repository.
func TestOpenAPIServed(t *testing.T) {
	want, err := os.ReadFile("../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/openapi.json", nil)
	req.Host = "127.0.0.1:8080"
	server.New(server.Options{Log: slog.New(slog.DiscardHandler)}).Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Body.String() != string(want) {
		t.Fatalf("GET /v1/openapi.json: %d, %d bytes; want docs/openapi.json (%d bytes)", rec.Code, rec.Body.Len(), len(want))
	}
}

// TestOpenAPISubmitSpecNamesEveryField: the document's SubmitSpec has a
// property for each field of server.SubmitRequest the server takes from
// a client, and none besides.
func TestOpenAPISubmitSpecNamesEveryField(t *testing.T) {
	var d struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(docs.OpenAPI, &d); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for name := range d.Components.Schemas["SubmitSpec"].Properties {
		documented = append(documented, name)
	}
	// What the server refuses from a client (SubmitRequest.refused).
	refused := []string{"repo", "ro", "max_parallel", "wait", "include_dirty"}
	var taken []string
	var walk func(rt reflect.Type)
	walk = func(rt reflect.Type) {
		for f := range rt.Fields() {
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" && !slices.Contains(refused, name) {
				taken = append(taken, name)
			}
		}
	}
	walk(reflect.TypeFor[server.SubmitRequest]())
	slices.Sort(documented)
	slices.Sort(taken)
	if !slices.Equal(documented, taken) {
		t.Errorf("SubmitSpec's properties %v; the fields the server takes %v", documented, taken)
	}
}
