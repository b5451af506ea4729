package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
)

// Send sends one request with body (of content type ctype; nil sends
// none) to path?query and answers its document: what an agent host sends
// (records, log chunks, uploads) is not always JSON.
func (c *Client) Send(ctx context.Context, method, path string, query url.Values, body io.Reader, ctype string) ([]byte, error) {
	return c.doc(ctx, method, path, query, body, ctype)
}

// Fetch writes the body of GET path?query (a file, such as a bundle) to w.
func (c *Client) Fetch(ctx context.Context, path string, query url.Values, w io.Writer) error {
	resp, err := c.send(ctx, "GET", path, query, nil, "", "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, err := c.read(resp)
		return err
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return c.transport(err)
	}
	return nil
}
