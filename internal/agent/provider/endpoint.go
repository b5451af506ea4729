package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
)

// Endpoint is the HTTP side an HTTP provider is built on: where its API
// lives, the headers that carry the key, the client and the retry policy.
// The wire format is the provider's (Wire); Endpoint never looks inside a
// body and never puts Headers in an error.
type Endpoint struct {
	Base    string            // URL the API paths are appended to
	Headers map[string]string // carry the key; read, never changed
	Client  *http.Client      // nil: http.DefaultClient
	Retry   Retry             // of a chat turn; listings and probes try once
}

// Wire is what one provider's API adds to an Endpoint for a chat turn.
type Wire struct {
	Path   string // below Base, where a turn is posted
	What   string // names the request body in an encode error
	Encode func(Request) ([]byte, error)
	Decode func([]byte) (*Response, error)
	// Models lists what the server offers, named when a model is missing.
	Models func(context.Context) ([]ModelInfo, error)
	// AuthHint is added to the cause of catalog.ModelAuth.
	AuthHint string
	// NotFoundIsModel makes every 404 answer a missing model, not only
	// those LooksLikeModelMissing recognises.
	NotFoundIsModel bool
}

// Chat performs one turn: encode, post with retries, decode. A failed post
// is catalog.ModelAuth (401, 403), catalog.ModelNotLoaded (the model is not
// there), catalog.ModelProtocol (any other non-2xx answer) or what Send
// returned.
func (e *Endpoint) Chat(ctx context.Context, req Request, w Wire) (*Response, error) {
	body, err := w.Encode(req)
	if err != nil {
		return nil, catalog.Internal.Wrap(err, "encode %s", w.What)
	}
	data, err := Send(ctx, e.Client, e.Retry, http.MethodPost, e.Base+w.Path, e.Headers, body)
	if err != nil {
		return nil, e.classify(ctx, req.Model, w, err)
	}
	return w.Decode(data)
}

// Once sends one request to url (absolute) without retries: for listings
// and probes, where a failure is an answer.
func (e *Endpoint) Once(ctx context.Context, method, url string, body []byte) ([]byte, error) {
	return Send(ctx, e.Client, Retry{Attempts: 1}, method, url, e.Headers, body)
}

// gatewayMark starts the message of an answer the run's model gateway
// gives itself (gateway.refuse).
const gatewayMark = "agentrun gateway: "

// gatewayMessage is the message of the model gateway's answer body (in
// any protocol's error format: error.message), without its mark.
func gatewayMessage(body string) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := body
	if json.Unmarshal([]byte(body), &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	if _, after, ok := strings.Cut(msg, gatewayMark); ok {
		return after
	}
	return msg
}

func (e *Endpoint) classify(ctx context.Context, model string, w Wire, err error) error {
	var he *HTTPError
	if !errors.As(err, &he) {
		return err
	}
	switch {
	case he.Status == http.StatusBadGateway && strings.Contains(he.Body, gatewayMark):
		// The run's model gateway could not reach the model server.
		return catalog.ModelUnreachable.New("%s", Clip(gatewayMessage(he.Body), 400))
	case he.Status == http.StatusUnauthorized || he.Status == http.StatusForbidden:
		return catalog.ModelAuth.Wrap(err, "the server answered %s%s", http.StatusText(he.Status), w.AuthHint)
	case w.NotFoundIsModel && he.Status == http.StatusNotFound, LooksLikeModelMissing(he.Status, he.Body):
		var have []ModelInfo
		if w.Models != nil {
			have, _ = w.Models(ctx)
		}
		return NotLoaded(model, have)
	}
	return catalog.ModelProtocol.Wrap(err, "%s", Clip(he.Error(), 400))
}
