package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveHTTP starts `agentrun mcp --listen 127.0.0.1:0` and returns its
// URL, read from the line it prints on stderr, and a stop function that
// sends SIGTERM and returns the exit status.
func (w *world) serveHTTP() (url string, stop func() int) {
	w.t.Helper()
	cmd := w.command("mcp", "--listen", "127.0.0.1:0")
	// Stderr through a pipe the test drains itself: the first line is the
	// address, the rest is discarded.
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	first := make(chan string, 1)
	go func() {
		br := bufio.NewReader(pr)
		l, _ := br.ReadString('\n')
		first <- l
		_, _ = io.Copy(io.Discard, br)
	}()
	var line string
	select {
	case line = <-first:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		w.t.Fatal("no address on stderr")
	}
	const prefix = "agentrun mcp: serving streamable HTTP on "
	if !strings.HasPrefix(line, prefix) {
		w.t.Fatalf("stderr: %q", line)
	}
	var once sync.Once
	code := -1
	stop = func() int {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); pw.Close(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			code = cmd.ProcessState.ExitCode()
		})
		return code
	}
	w.t.Cleanup(func() { stop() })
	return strings.TrimSpace(strings.TrimPrefix(line, prefix)), stop
}

// Streamable HTTP on loopback: the SDK's client submits a run and waits
// for it with progress notifications, gets a catalog error as a tool
// error; SIGTERM stops the server with exit 0.
func TestStreamableHTTP(t *testing.T) {
	w := newWorld(t)
	url, stop := w.serveHTTP()
	var mu sync.Mutex
	var msgs []string
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "v0"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			msgs = append(msgs, req.Params.Message)
			mu.Unlock()
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer cs.Close()
	params := &sdk.CallToolParams{Name: "submit", Arguments: map[string]any{
		"task": "Write a file", "agent_cmd": "echo over http > http.txt", "sandbox": "host", "repo": w.repo, "wait": true}}
	params.SetProgressToken(7)
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if d := valid(t, "submit.schema.json", "submit over HTTP", b); res.IsError || d["status"] != "succeeded" {
		t.Fatalf("submit over HTTP: %s %s", b, text(res))
	}
	// (The client hands notifications to the handler on its own time.)
	seen := ""
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		seen = strings.Join(msgs, "\n")
		mu.Unlock()
		if strings.Contains(seen, "state succeeded") {
			break
		}
	}
	if !strings.Contains(seen, "state succeeded") {
		t.Errorf("progress over HTTP: %q", seen)
	}
	res, doc := call(t, cs, "status", map[string]any{"id": "zzzzzzzzzz"})
	catalogErr(t, res, doc, "run_not_found")
	cs.Close()
	if code := stop(); code != 0 {
		t.Errorf("the server ended with exit %d on SIGTERM", code)
	}
}

// A page in the user's browser, or a name that resolves to 127.0.0.1
// (DNS rebinding), cannot drive the loopback server.
func TestStreamableHTTPRefusesOtherOrigins(t *testing.T) {
	w := newWorld(t)
	url, _ := w.serveHTTP()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`
	for _, c := range []struct {
		what   string
		header map[string]string
		want   int
	}{
		{"another Host", map[string]string{"Host": "evil.example"}, http.StatusForbidden},
		{"a cross-site page", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a local client", nil, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range c.header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.what, resp.StatusCode, c.want)
		}
	}
}

// An address off the loopback is refused unless --listen-any, and the
// refusal says why.
func TestListenRefusesNonLoopback(t *testing.T) {
	w := newWorld(t)
	for _, args := range [][]string{
		{"mcp", "--listen", "0.0.0.0:0"},
		{"mcp", "--listen", ":0"},
		{"mcp", "--listen", "example.com:80"},
	} {
		out, err := w.command(args...).CombinedOutput()
		code := -1
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			code = ee.ExitCode()
		}
		if code != 2 || !strings.Contains(string(out), "not a loopback address") || !strings.Contains(string(out), "--listen-any") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
	out, _ := w.command("mcp", "--listen", "0.0.0.0:0", "--json").Output()
	valid(t, "error.schema.json", "mcp --listen --json", out)
}
