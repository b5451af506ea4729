package server_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// instance is one `agentrun server` process on 127.0.0.1:0.
type instance struct {
	t     *testing.T
	cmd   *exec.Cmd
	url   string
	token string
	// client makes the requests (default http.DefaultClient).
	client *http.Client
	log    *lockedBuf
	done   chan struct{}
}

// config is what two instances of one server share: the data directory
// and the database.
type config struct {
	data, db string
	token    string // a token file's content ("": none)
	noHost   bool   // leave out --allow-host-sandbox
	extra    []string
	env      []string // more of the server's variables
	toml     string   // the server's config.toml ("": none)
	leaseTTL string   // --lease-ttl ("": 2s, so that a killed server's runs come back soon)
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs the built binary as a server and waits for its address.
func start(t *testing.T, c config) *instance {
	t.Helper()
	args := []string{"server", "--listen", "127.0.0.1:0", "--data", c.data, "--database-url", c.db,
		"--local-worker", "2", "--lease-ttl", cmp.Or(c.leaseTTL, "2s"), "--allow-host-sandbox"}
	if c.noHost {
		args = args[:len(args)-1]
	}
	if c.token != "" {
		f := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(f, []byte(c.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--token-file", f)
	}
	cmd := exec.Command(testsupport.Agentrun(t), append(args, c.extra...)...)
	home := t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "AGENTRUN_HOME=" + filepath.Join(home, "agentrun"), "LANG=C"}
	cmd.Env = append(cmd.Env, c.env...)
	if c.toml != "" {
		if err := os.MkdirAll(filepath.Join(home, ".config", "agentrun"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".config", "agentrun", "config.toml"), []byte(c.toml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{t: t, cmd: cmd, token: c.token, log: &lockedBuf{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(in.log, line)
			if rest, ok := strings.CutPrefix(line, "agentrun server: serving "); ok {
				a, _, _ := strings.Cut(rest, " ")
				addr <- strings.TrimSuffix(a, "/")
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(in.done) }()
	t.Cleanup(func() {
		in.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("server log:\n%s", in.log.String())
		}
	})
	select {
	case a := <-addr:
		in.url = a
	case <-in.done:
		t.Fatalf("the server exited: %s", in.log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not say where it listens: %s", in.log.String())
	}
	return in
}

// stop sends sig and waits for the process to end (killing it after 40s).
func (in *instance) stop(sig syscall.Signal) {
	select {
	case <-in.done:
		return
	default:
	}
	_ = in.cmd.Process.Signal(sig)
	select {
	case <-in.done:
	case <-time.After(40 * time.Second):
		_ = in.cmd.Process.Kill()
		<-in.done
	}
}

func (in *instance) do(req *http.Request) (*http.Response, error) {
	if in.client != nil {
		return in.client.Do(req)
	}
	return http.DefaultClient.Do(req)
}

// answer is one HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) doc(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, a.body)
	}
	return m
}

// code is the catalog code of an error answer.
func (a answer) code(t *testing.T) string {
	t.Helper()
	e, _ := a.doc(t)["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// call makes one request to route pattern (its {id} filled with id) and
// checks the answer against the API document: the status is one the
// operation lists and a JSON body validates against its schema.
func (in *instance) call(t *testing.T, method, pattern, id, contentType string, body io.Reader, hdr ...string) answer {
	t.Helper()
	path := strings.ReplaceAll(strings.ReplaceAll(pattern, "{id}", id), "{name}", id)
	req, err := http.NewRequest(method, in.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if in.token != "" {
		req.Header.Set("Authorization", "Bearer "+in.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := in.do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: b}
	conforms(t, method, strings.SplitN(pattern, "?", 2)[0], a)
	return a
}

func (in *instance) get(t *testing.T, pattern, id string) answer {
	t.Helper()
	return in.call(t, "GET", pattern, id, "", nil)
}

func (in *instance) post(t *testing.T, pattern, id string, body any) answer {
	t.Helper()
	b, _ := json.Marshal(body)
	return in.call(t, "POST", pattern, id, "application/json", bytes.NewReader(b))
}

// submit posts spec (a JSON value or raw text) and bundle (nil: no part).
func (in *instance) submit(t *testing.T, spec any, bundle []byte) answer {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if spec != nil {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="spec"`)
		h.Set("Content-Type", "application/json")
		pw, _ := mw.CreatePart(h)
		if s, ok := spec.(string); ok {
			io.WriteString(pw, s)
		} else {
			_ = json.NewEncoder(pw).Encode(spec)
		}
	}
	if bundle != nil {
		fw, _ := mw.CreateFormFile("bundle", "base.bundle")
		fw.Write(bundle)
	}
	mw.Close()
	return in.call(t, "POST", "/v1/runs", "", mw.FormDataContentType(), &buf)
}

// runID submits and returns the new run's id, failing on an error.
func (in *instance) runID(t *testing.T, spec any, bundle []byte) string {
	t.Helper()
	a := in.submit(t, spec, bundle)
	if a.status != http.StatusCreated {
		t.Fatalf("submit: %d %s", a.status, a.body)
	}
	id, _ := a.doc(t)["id"].(string)
	if loc := a.header.Get("Location"); loc != "/v1/runs/"+id {
		t.Errorf("Location %q, want /v1/runs/%s", loc, id)
	}
	return id
}

// waitState polls the run until its status is one of states.
func (in *instance) waitState(t *testing.T, id string, states ...string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		a := in.get(t, "/v1/runs/{id}", id)
		if a.status != http.StatusOK {
			t.Fatalf("status %s: %d %s", id, a.status, a.body)
		}
		d := a.doc(t)
		for _, s := range states {
			if d["status"] == s {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %v, never %v: %s", id, d["status"], states, a.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bundleOf is a bundle of repo's HEAD.
func bundleOf(t *testing.T, repo string) []byte {
	t.Helper()
	cmd := testsupport.GitCmd(t, repo, "bundle", "create", "-q", "-", "HEAD")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git bundle create: %v", err)
	}
	return out
}

// sse is one Server-Sent Event.
type sse struct{ id, event, data string }

// readSSE reads events until the stream ends or stop says so.
func readSSE(t *testing.T, r io.Reader, stop func(sse) bool) []sse {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var evs []sse
	var cur sse
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" || cur.data != "" {
				evs = append(evs, cur)
				if stop != nil && stop(cur) {
					return evs
				}
			}
			cur = sse{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data += line[6:]
		}
	}
	return evs
}

// stream follows run id's logs from lastID ("" from the start) until
// the stream ends or stop says so; every event's data validates.
func (in *instance) stream(t *testing.T, id, lastID string, stop func(sse) bool) []sse {
	t.Helper()
	req, _ := http.NewRequest("GET", in.url+"/v1/runs/"+id+"/logs/stream", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if in.token != "" {
		req.Header.Set("Authorization", "Bearer "+in.token)
	}
	resp, err := in.do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	evs := readSSE(t, resp.Body, stop)
	for _, e := range evs {
		if err := schemas(t).Validate("server-stream.schema.json", []byte(e.data), jsonschema.Options{}); err != nil {
			t.Errorf("stream event %s: %v\n%s", e.event, err, e.data)
		}
	}
	return evs
}
