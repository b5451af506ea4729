package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// rawConn speaks the protocol frame by frame, to send chosen ids.
type rawConn struct {
	t     testing.TB
	c     net.Conn
	br    *bufio.Reader
	hello hello
}

func rawDial(t testing.TB, sock string) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &rawConn{t: t, c: c, br: bufio.NewReader(c)}
	b, err := ReadFrame(r.br)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r.hello); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rawConn) send(id, op string, args any, off ...int64) {
	r.t.Helper()
	raw, _ := json.Marshal(args)
	req := request{ID: id, Op: op, Args: raw}
	if len(off) == 2 {
		req.StdoutOff, req.StderrOff = off[0], off[1]
	}
	b, _ := encodeRequest(&req)
	if err := WriteFrame(r.c, b); err != nil {
		r.t.Fatal(err)
	}
}

// collect reads frames until the final response for id; it returns the
// streamed stdout and the final response.
func (r *rawConn) collect(id string) (string, *response) {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var out strings.Builder
	for {
		b, err := ReadFrame(r.br)
		if err != nil {
			r.t.Fatalf("read: %v", err)
		}
		resp, err := decodeResponse(b)
		if err != nil {
			r.t.Fatal(err)
		}
		if resp.ID != id {
			continue
		}
		if resp.Done {
			return out.String(), resp
		}
		if resp.Stream == streamStdout {
			out.Write(resp.Data)
		}
	}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestSameIDRunsOnce(t *testing.T) {
	root := t.TempDir()
	sock := testServer(t, root, ServerOptions{})
	r := rawDial(t, sock)
	args := ExecRequest{Shell: "echo ran >> count; echo out"}
	r.send("id-1", opExec, args)
	out1, res1 := r.collect("id-1")
	r.send("id-1", opExec, args)
	out2, res2 := r.collect("id-1")
	// Another connection resending the id gets the stored result too.
	r2 := rawDial(t, sock)
	r2.send("id-1", opExec, args)
	out3, res3 := r2.collect("id-1")
	if out1 != "out\n" || out2 != out1 || out3 != out1 {
		t.Fatalf("outputs %q %q %q", out1, out2, out3)
	}
	if !bytes.Equal(res1.Result, res2.Result) || !bytes.Equal(res1.Result, res3.Result) {
		t.Fatalf("results differ: %s / %s / %s", res1.Result, res2.Result, res3.Result)
	}
	if n := lines(t, filepath.Join(root, "count")); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

func TestSameIDInFlightAttaches(t *testing.T) {
	root := t.TempDir()
	sock := testServer(t, root, ServerOptions{})
	args := ExecRequest{Shell: "echo ran >> count; echo first; sleep 0.3; echo second"}
	r1, r2 := rawDial(t, sock), rawDial(t, sock)
	r1.send("id-2", opExec, args)
	time.Sleep(100 * time.Millisecond)
	r2.send("id-2", opExec, args) // in flight: attaches from offset 0
	r3 := rawDial(t, sock)
	r3.send("id-2", opExec, args, int64(len("first\n")), 0) // has the first line already
	var wg sync.WaitGroup
	outs := make([]string, 3)
	for i, r := range []*rawConn{r1, r2, r3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _ = r.collect("id-2")
		}()
	}
	wg.Wait()
	if outs[0] != "first\nsecond\n" || outs[1] != outs[0] || outs[2] != "second\n" {
		t.Fatalf("outputs %q", outs)
	}
	if n := lines(t, filepath.Join(root, "count")); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

func TestSameIDWriteNotRepeated(t *testing.T) {
	root := t.TempDir()
	sock := testServer(t, root, ServerOptions{})
	r := rawDial(t, sock)
	args := WriteFileRequest{Path: "f.txt", Data: []byte("first")}
	r.send("w-1", opWriteFile, args)
	_, res1 := r.collect("w-1")
	os.WriteFile(filepath.Join(root, "f.txt"), []byte("changed since"), 0o644)
	r.send("w-1", opWriteFile, args)
	_, res2 := r.collect("w-1")
	if !bytes.Equal(res1.Result, res2.Result) {
		t.Fatalf("results differ: %s / %s", res1.Result, res2.Result)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "f.txt")); string(b) != "changed since" {
		t.Fatalf("write ran again: %q", b)
	}
}

// cut closes the client's current connection, as a broken stream would.
func cut(c Client) {
	cl := c.(*client)
	cl.mu.Lock()
	if cl.conn != nil {
		cl.conn.Close()
	}
	cl.mu.Unlock()
}

// notifyWriter signals the first write.
type notifyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	first chan struct{}
	once  sync.Once
}

func newNotifyWriter() *notifyWriter { return &notifyWriter{first: make(chan struct{})} }

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.once.Do(func() { close(w.first) })
	return w.buf.Write(p)
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

const countedLoop = "echo ran >> count; for i in 1 2 3 4 5 6 7 8; do echo line$i; sleep 0.05; done"
const countedLoopOut = "line1\nline2\nline3\nline4\nline5\nline6\nline7\nline8\n"

// wantCountedLoopOnce checks that countedLoop ran once in root and that its
// whole output arrived, streamed to w and in the result's tail.
func wantCountedLoopOnce(t *testing.T, root string, w *notifyWriter, res *ExecResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if w.String() != countedLoopOut || string(res.Stdout) != countedLoopOut {
		t.Fatalf("streamed %q, tail %q", w.String(), res.Stdout)
	}
	if n := lines(t, filepath.Join(root, "count")); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

func TestCutStreamResumes(t *testing.T) {
	root := t.TempDir()
	c := testClient(t, testServer(t, root, ServerOptions{}))
	w := newNotifyWriter()
	go func() {
		<-w.first
		cut(c)
		time.Sleep(120 * time.Millisecond)
		cut(c)
	}()
	res, err := c.Exec(context.Background(), ExecRequest{Shell: countedLoop}, w, nil)
	wantCountedLoopOnce(t, root, w, res, err)
}

// TestCutStreamFinishesWhileAway keeps the client from reconnecting (the
// socket is moved away) until the command has finished: the resent id
// returns the stored result and the output the client missed.
func TestCutStreamFinishesWhileAway(t *testing.T) {
	root := t.TempDir()
	sock := testServer(t, root, ServerOptions{})
	c := testClient(t, sock)
	w := newNotifyWriter()
	go func() {
		<-w.first
		os.Rename(sock, sock+".away")
		cut(c)
		for {
			if _, err := os.Stat(filepath.Join(root, "done")); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		os.Rename(sock+".away", sock)
	}()
	res, err := c.Exec(context.Background(), ExecRequest{Shell: countedLoop + "; echo x > done"}, w, nil)
	wantCountedLoopOnce(t, root, w, res, err)
}

func TestReconnectGivesUp(t *testing.T) {
	root := t.TempDir()
	sock := testServer(t, root, ServerOptions{})
	c, err := Dial(context.Background(), sock, DialOptions{ReconnectTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := newNotifyWriter()
	go func() {
		<-w.first
		os.Rename(sock, sock+".away")
		cut(c)
	}()
	_, err = c.Exec(context.Background(), ExecRequest{Shell: "echo a; sleep 2"}, w, nil)
	if err == nil || IsCode(err, CodeInterrupted) {
		t.Fatalf("got %v, want a connection error", err)
	}
	// Once the runner is reachable again, the client works again.
	os.Rename(sock+".away", sock)
	if _, err := c.Stat(context.Background(), StatRequest{Path: "."}); err != nil {
		t.Fatal(err)
	}
}

func TestCancelKillsAndReturns(t *testing.T) {
	c := testClient(t, testServer(t, t.TempDir(), ServerOptions{}))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := c.Exec(ctx, ExecRequest{Shell: "sleep 30", KillGrace: time.Second}, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || res == nil || !res.Cancelled {
		t.Fatalf("res %+v err %v", res, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestConcurrentRequests(t *testing.T) {
	root := t.TempDir()
	c := testClient(t, testServer(t, root, ServerOptions{}))
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := filepath.Join("d", string(rune('a'+i%26))+strings.Repeat("x", i))
			want := strings.Repeat("y", i*100)
			if _, err := c.WriteFile(ctx, WriteFileRequest{Path: name, Data: []byte(want)}); err != nil {
				errs <- err
				return
			}
			r, err := c.ReadFile(ctx, ReadFileRequest{Path: name})
			if err != nil || string(r.Data) != want {
				errs <- errors.Join(err, errors.New("read back differs"))
				return
			}
			var out bytes.Buffer
			if _, err := c.Exec(ctx, ExecRequest{Argv: []string{"cat", name}}, &out, nil); err != nil || out.String() != want {
				errs <- errors.Join(err, errors.New("cat differs"))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMalformedFramesCloseConnection(t *testing.T) {
	root := t.TempDir()
	sock := testServer(t, root, ServerOptions{})
	bad := [][]byte{
		{0xff, 0xff, 0xff, 0xff},                  // length past the cap
		append([]byte{0, 0, 0, 3}, "{{{"...),      // not JSON
		append([]byte{0, 0, 0, 2}, "{}"...),       // no id, no op
		append([]byte{0, 0, 0, 4}, "null"...),     // null
		append([]byte{0, 0, 0, 10}, "[1,2,3]"...), // short frame, then EOF
	}
	for i, b := range bad {
		r := rawDial(t, sock)
		r.c.Write(b)
		if i == len(bad)-1 {
			r.c.(*net.UnixConn).CloseWrite()
		}
		r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := ReadFrame(r.br); err != io.EOF {
			t.Errorf("frame %d: got %v, want the connection closed", i, err)
		}
	}
	// The server still serves.
	c := testClient(t, sock)
	if _, err := c.Stat(context.Background(), StatRequest{Path: "."}); err != nil {
		t.Fatal(err)
	}
}

// TestClientSurvivesBadServer points the client at a server that answers
// garbage: calls fail, nothing panics or hangs.
func TestClientSurvivesBadServer(t *testing.T) {
	dir, _ := os.MkdirTemp("", "rt")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h, _ := json.Marshal(hello{Proto: ProtocolVersion, Instance: "bad"})
			WriteFrame(c, h)
			br := bufio.NewReader(c)
			ReadFrame(br)
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], 5)
			c.Write(append(hdr[:], "{bad}"...))
			WriteFrame(c, []byte("{\"id\":\"x\",\"done\":true}\n\"not an object\""))
			c.Close()
		}
	}()
	c, err := Dial(context.Background(), sock, DialOptions{ReconnectTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Stat(context.Background(), StatRequest{Path: "."}); err == nil {
		t.Fatal("no error from a garbage server")
	}
}

func TestClosedClient(t *testing.T) {
	c := testClient(t, testServer(t, t.TempDir(), ServerOptions{}))
	c.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(context.Background(), StatRequest{Path: "."}); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v", err)
	}
}

func TestDialWaitsForSocket(t *testing.T) {
	dir, _ := os.MkdirTemp("", "rt")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	root := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		time.Sleep(100 * time.Millisecond)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			return
		}
		Serve(ctx, ln, ServerOptions{Root: root})
	}()
	c, err := Dial(context.Background(), sock, DialOptions{Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := Dial(context.Background(), filepath.Join(dir, "none"), DialOptions{}); err == nil {
		t.Fatal("dial without a socket succeeded")
	}
}

// TestClientCapsUntrustedOutput points the client at a runner that ignores
// the output cap: the client writes no more than the cap.
func TestClientCapsUntrustedOutput(t *testing.T) {
	sock := filepath.Join(testsupport.ShortDir(t), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		h, _ := json.Marshal(hello{Proto: ProtocolVersion, Instance: "flood"})
		WriteFrame(c, h)
		b, err := ReadFrame(bufio.NewReader(c))
		if err != nil {
			return
		}
		req, err := decodeRequest(b)
		if err != nil {
			return
		}
		for i := range 10 {
			r, _ := encodeResponse(&response{ID: req.ID, Stream: streamStdout, Off: int64(i * 1000), Data: bytes.Repeat([]byte("x"), 1000)})
			WriteFrame(c, r)
		}
		r, _ := encodeResponse(&response{ID: req.ID, Done: true, Result: json.RawMessage(`{"exit_code":0}`)})
		WriteFrame(c, r)
		io.Copy(io.Discard, c)
	}()
	c := testClient(t, sock)
	var out bytes.Buffer
	if _, err := c.Exec(context.Background(), ExecRequest{Argv: []string{"x"}, OutputCap: 2500}, &out, nil); err != nil {
		t.Fatal(err)
	}
	// The cap, plus room for the runner's own cut note: never the flood.
	if out.Len() < 2500 || out.Len() > 2500+maxCutNote {
		t.Fatalf("wrote %d bytes for a cap of 2500 (+%d for a cut note)", out.Len(), maxCutNote)
	}
}

// slowCloseListener wakes its Accept late when closed, as a loaded
// machine may: the runner's stop must not depend on that wake-up winning a
// race with its commands' kill.
type slowCloseListener struct{ net.Listener }

func (l slowCloseListener) Close() error {
	time.Sleep(100 * time.Millisecond)
	return l.Listener.Close()
}

// TestStoppedRunnerSendsNoResults: a runner told to stop closes its
// connections before it kills their commands, so a killed command's
// result never reaches the client as if the command had ended by itself.
// The client learns of the stop as a dropped stream (ErrClosed once it is
// closed), however late the accept loop sees its listener closed.
func TestStoppedRunnerSendsNoResults(t *testing.T) {
	for i := range 3 {
		dir, err := os.MkdirTemp("", "rt")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		root := t.TempDir()
		sock := filepath.Join(dir, "s")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Serve(ctx, slowCloseListener{ln}, ServerOptions{Root: root, Env: []string{"PATH=" + os.Getenv("PATH")}})
		}()
		r := rawDial(t, sock)
		r.send("x", opExec, ExecRequest{Shell: "echo started; sleep 100"})
		r.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		for started := false; !started; {
			b, err := ReadFrame(r.br)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := decodeResponse(b)
			if err != nil {
				t.Fatal(err)
			}
			started = resp.Stream == streamStdout
		}
		cancel()
		for {
			b, err := ReadFrame(r.br)
			if err != nil {
				break
			}
			if resp, err := decodeResponse(b); err == nil && resp.Done {
				t.Fatalf("round %d: a stopping runner sent the killed command's result: %+v", i, resp)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
