package mcp

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The resource URIs: a run's patch, and one attempt's transcript.
const (
	patchTemplate      = "agentrun://runs/{id}/patch"
	transcriptTemplate = "agentrun://runs/{id}/attempts/{n}/transcript"
)

var (
	patchURI      = lazyre.New(`^agentrun://runs/([^/]+)/patch$`)
	transcriptURI = lazyre.New(`^agentrun://runs/([^/]+)/attempts/([1-9][0-9]{0,5})/transcript$`)
)

func (s *Server) addResources() {
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{Name: "patch", Title: "A run's patch", URITemplate: patchTemplate,
		MIMEType:    "text/x-diff",
		Description: "The patch a run exported (result.patch), ready for git apply; as the diff tool returns it."}, s.readPatch)
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{Name: "transcript", Title: "An attempt's transcript", URITemplate: transcriptTemplate,
		MIMEType: "application/json",
		Description: "Attempt n of a run: the built-in agent's transcript records as a JSON array (application/json); " +
			"for an external agent CLI, which keeps no transcript, what it printed (text/plain)."}, s.readTranscript)
}

// runID is the run id part of a resource URI, unescaped (the CLI judges
// whether it is one).
func runID(uri string, re *lazyre.Regexp) ([]string, bool) {
	m := re.FindStringSubmatch(uri)
	if m == nil {
		return nil, false
	}
	id, err := url.PathUnescape(m[1])
	if err != nil {
		return nil, false
	}
	m[1] = id
	return m, true
}

func (s *Server) readPatch(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	m, ok := runID(uri, patchURI)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	o := s.run(ctx, command("diff").args(m[1]), "")
	if o.err != nil {
		return nil, resourceErr(uri, o.err)
	}
	var doc struct {
		Patch string `json:"patch"`
	}
	if err := json.Unmarshal(o.doc, &doc); err != nil {
		return nil, err
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/x-diff", Text: doc.Patch}}}, nil
}

func (s *Server) readTranscript(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	m, ok := runID(uri, transcriptURI)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	o := s.run(ctx, command("logs").str("attempt", m[2]).args(m[1]), "")
	if o.err != nil {
		return nil, resourceErr(uri, o.err)
	}
	var doc struct {
		Logs []struct {
			Text       string            `json:"text"`
			Transcript []json.RawMessage `json:"transcript"`
		} `json:"logs"`
	}
	if err := json.Unmarshal(o.doc, &doc); err != nil {
		return nil, err
	}
	if len(doc.Logs) == 0 {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	l := doc.Logs[0]
	if l.Transcript == nil {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: l.Text}}}, nil
	}
	b, err := json.Marshal(l.Transcript)
	if err != nil {
		return nil, err
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

// resourceErr is a catalog error as the JSON-RPC error of a resource
// read: what the reader asked for wrongly or what does not exist (no such
// run, a bad id, no patch, no such log) is invalid params, as the MCP
// specification has "resource not found"; the rest is internal. The
// catalog error rides along as the error's data.
func resourceErr(uri string, e *CatalogError) error {
	data, _ := json.Marshal(map[string]any{"uri": uri, "error": e})
	code := int64(jsonrpc.CodeInternalError)
	if e.Exit == 2 || e.Exit == 3 {
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: e.text(), Data: data}
}
