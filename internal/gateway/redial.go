package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// redialDelays are the waits before each new try of a request whose
// connection to the model server could not be made: a local server that
// restarts, a provider's balancer that refused one connection. Nothing
// of the request has reached the server then, so a try again is safe for
// any method. Past them the agent gets the 502 (with x-should-retry:
// false): a server that stays away is the gateway's to give up on
// (failing.go), not each CLI's to retry for minutes.
var redialDelays = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}

// redialer tries a request again while its connection cannot be made.
type redialer struct {
	next   http.RoundTripper
	delays []time.Duration
}

func (t redialer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	for _, d := range t.delays {
		if !notDialled(err) || req.GetBody == nil && req.Body != nil && req.Body != http.NoBody {
			return resp, err
		}
		timer := time.NewTimer(d)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return resp, err
		case <-timer.C:
		}
		again := req.Clone(req.Context())
		if req.GetBody != nil {
			if again.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		resp, err = t.next.RoundTrip(again)
	}
	return resp, err
}

// notDialled says err is a failure to connect (to the server, or to the
// proxy in front of it): nothing of the request was sent.
func notDialled(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect")
}

// rewindable gives r a GetBody over body, which has been read whole.
func rewindable(r *http.Request, body []byte) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}
