package mcp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one client over in and out (newline-delimited
// JSON-RPC, the stdio transport) until in ends or ctx is done. Both end
// normally: nil.
func (s *Server) ServeStdio(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	err := s.srv.Run(ctx, &sdk.IOTransport{Reader: in, Writer: out})
	if err == nil || ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Handler is the streamable HTTP transport: the SDK's handler (which
// refuses a request that reached a loopback address under another host
// name: DNS rebinding) behind the standard library's cross-origin
// protection, so a web page the user visits cannot drive the server.
func (s *Server) Handler() http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, nil)
	return http.NewCrossOriginProtection().Handler(h)
}

// ServeHTTP serves streamable HTTP on ln until ctx is done, then stops
// taking requests and gives those in flight a moment to end.
func (s *Server) ServeHTTP(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
