package submit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/run"
)

// profileModelCheck starts checkServerModel for a profile's route to the
// user's model server, in the background, and returns what waits for its
// answer (at once when there is nothing to ask: the route is a
// provider's API). A key the
// server refuses, or a model it lacks, is then caught at submit, as for
// the built-in agent, not as failed attempts. It runs beside the
// repository's inspection, which takes longer than a local server's
// answer: it adds nothing to a submit's time.
func (s *Service) profileModelCheck(ctx context.Context, req Request, model string, rs run.RouteSpec) func() error {
	if rs.Server == "" || req.OnHosts {
		return func() error { return nil }
	}
	var list lister
	if kind, ok := s.Providers.Lookup(rs.Name); ok && kind.Route == rs.Name {
		list = kindLister(kind, rs)
	} else if rs.Name == gateway.RouteGemini {
		list = geminiLister(rs)
	}
	memo, entry := modelCheckMemo(rs, model, s.preflightCacheDir(req.Getenv))
	if list == nil || fresh(memo, entry, modelCheckTTL) {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		err := checkServerModel(ctx, model, rs, req.Getenv, list)
		if err == nil && memo != "" {
			remember(memo, entry)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// A model check that passed is remembered for modelCheckTTL in the user's
// cache directory, keyed by the server, the route, the model and where
// the key comes from (never the key), as the preflight is: submits in a
// row ask once. A key changed within the window, or a model unloaded, is
// then met by the run: the gateway gives up on a refused key after two
// requests, and result names it.
const modelCheckTTL = 5 * time.Minute

// modelCheckMemo is the memo file of a check of model on rs in the cache
// directory dir, and the entry a fresh one holds ("" without a dir).
func modelCheckMemo(rs run.RouteSpec, model, dir string) (path, entry string) {
	if dir == "" {
		return "", ""
	}
	var keys []string
	for _, k := range rs.Keys {
		keys = append(keys, k.Describe())
	}
	entry = fmt.Sprintf("agentrun model check 1\nroute %s\nurl %s\nmodel %q\nkeys %q\nuid %d\n", rs.Name, rs.URL, model, keys, os.Getuid())
	sum := sha256.Sum256([]byte(entry))
	return filepath.Join(dir, "agentrun", "model-"+hex.EncodeToString(sum[:8])), entry
}

// geminiLister lists a server's models as the Gemini API does
// (GET /v1beta/models, the key in x-goog-api-key), one page of up to the
// API's 1,000.
func geminiLister(rs run.RouteSpec) lister {
	return func(ctx context.Context, key string, client *http.Client) ([]provider.ModelInfo, error) {
		hdr := map[string]string{}
		if key != "" {
			hdr["x-goog-api-key"] = key
		}
		b, err := provider.Send(ctx, client, provider.Retry{Attempts: 1}, http.MethodGet, rs.URL+"/v1beta/models?pageSize=1000", hdr, nil)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Models []struct {
				Name string `json:"name"`
			} `json:"models"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, err
		}
		out := make([]provider.ModelInfo, 0, len(doc.Models))
		for _, m := range doc.Models {
			out = append(out, provider.ModelInfo{ID: strings.TrimPrefix(m.Name, "models/")})
		}
		return out, nil
	}
}
