package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/run"
)

func TestMCPListenValidate(t *testing.T) {
	for _, c := range []struct {
		o    mcpOptions
		want string // "" = accepted
	}{
		{mcpOptions{}, ""},
		{mcpOptions{Listen: "127.0.0.1:0"}, ""},
		{mcpOptions{Listen: "127.9.9.9:8765"}, ""},
		{mcpOptions{Listen: "[::1]:8765"}, ""},
		{mcpOptions{Listen: "localhost:8765"}, ""},
		{mcpOptions{Listen: "0.0.0.0:8765"}, "not a loopback address"},
		{mcpOptions{Listen: ":8765"}, "not a loopback address"},
		{mcpOptions{Listen: "192.168.1.2:8765"}, "not a loopback address"},
		{mcpOptions{Listen: "[::]:8765"}, "not a loopback address"},
		{mcpOptions{Listen: "example.com:8765"}, "not a loopback address"},
		{mcpOptions{Listen: "0.0.0.0:8765", ListenAny: true}, ""},
		{mcpOptions{Listen: "8765"}, "want HOST:PORT"},
		{mcpOptions{ListenAny: true}, "needs --listen"},
	} {
		err := c.o.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.o, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// The MCP server's Exec runs the tools' commands, and nothing else.
func TestMCPExecRunsOnlyTheTools(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	app, _, _ := h.app()
	ctx := context.Background()
	out, _, code := app.mcpExec(ctx, []string{"status", "--json", "--", r.ID}, nil)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	validDoc(t, "status.schema.json", "status through mcpExec", string(out))
	for _, args := range [][]string{{"clean", "--finished", "--json"}, {"mcp", "--json"}, {"mcp"}, {}, {"config", "--json"}} {
		out, _, code := app.mcpExec(ctx, args, nil)
		if e := jsonErr(t, string(out)); code != 70 || !strings.Contains(fmt.Sprint(e["error"]), "internal") {
			t.Errorf("%v: exit %d: %s", args, code, out)
		}
	}
	if _, err := os.Stat(h.st.L.RunDir(r.ID)); err != nil {
		t.Errorf("the run is gone: %v", err)
	}
}

// mcpHarness writes a run's journal and agent log as its supervisor would.
type mcpHarness struct {
	t  *testing.T
	h  *testHome
	id string
}

func (m mcpHarness) event(e run.Event) {
	m.t.Helper()
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if _, err := m.h.st.AppendEvent(context.Background(), m.id, e); err != nil {
		m.t.Fatal(err)
	}
}

func (m mcpHarness) log(attempt int, s string) {
	m.t.Helper()
	p := m.h.st.L.AgentLog(m.id, attempt)
	if err := os.MkdirAll(m.h.st.L.AttemptDir(m.id, attempt), 0o700); err != nil {
		m.t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		m.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		m.t.Fatal(err)
	}
}

// tail runs `mcp tail` from cursor c and decodes its answer, held to the
// schema.
func (m mcpHarness) tail(c tailCursor, extra ...string) tailOutput {
	m.t.Helper()
	args := append([]string{"mcp", "tail", m.id, "--json", fmt.Sprintf("--seq=%d", c.Seq),
		fmt.Sprintf("--attempt=%d", c.Attempt), fmt.Sprintf("--offset=%d", c.Offset)}, extra...)
	code, out, errb := m.h.exec(args...)
	if code != 0 {
		m.t.Fatalf("%v: exit %d\n%s%s", args, code, out, errb)
	}
	validDoc(m.t, "mcp-tail.schema.json", "mcp tail", out)
	var d tailOutput
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		m.t.Fatal(err)
	}
	return d
}

func texts(ps []tailPiece) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "[%d@%d]%s", p.Attempt, p.Offset, p.Text)
	}
	return b.String()
}

// Following from a cursor: each event and each byte once; a line still
// being written waits for its end, or for its attempt's end; the cursor
// moves on to the next attempt; done once the run has ended and all was
// read.
func TestMCPTailCursor(t *testing.T) {
	h := newTestHome(t)
	r := activeRun(t, h)
	m := mcpHarness{t: t, h: h, id: r.ID}
	m.event(run.Event{Type: run.EventState, State: run.StateRunning})
	m.event(run.Event{Type: run.EventAttempt, Attempt: 1})
	m.log(1, "one\ntw")

	d := m.tail(tailCursor{})
	if len(d.Events) != 2 || d.Events[0].Seq != 1 || d.Cursor.Seq != 2 || d.Done || d.Run.Status != run.StateRunning {
		t.Fatalf("first answer: %+v", d)
	}
	if got := texts(d.Output); got != "[1@0]one\n" || d.Cursor != (tailCursor{Seq: 2, Attempt: 1, Offset: 4}) {
		t.Fatalf("output %q, cursor %+v", got, d.Cursor)
	}
	// Nothing new: an empty answer with the same cursor.
	if d2 := m.tail(d.Cursor); len(d2.Events)+len(d2.Output) != 0 || d2.Cursor != d.Cursor || d2.Done {
		t.Fatalf("nothing new: %+v", d2)
	}
	m.log(1, "o\nthree")
	m.event(run.Event{Type: run.EventAttempt, Attempt: 2})
	m.log(2, "second attempt\n")
	d = m.tail(d.Cursor)
	// Attempt 2 exists: attempt 1's unfinished last line is complete.
	if got := texts(d.Output); got != "[1@4]two\nthree[2@0]second attempt\n" || len(d.Events) != 1 || d.Events[0].Seq != 3 {
		t.Fatalf("across attempts: %q %+v", got, d.Events)
	}
	if d.Cursor != (tailCursor{Seq: 3, Attempt: 2, Offset: 15}) || d.Done {
		t.Fatalf("cursor %+v done %v", d.Cursor, d.Done)
	}
	m.log(2, "last, unfinished")
	finish(t, h, r.ID)
	d = m.tail(d.Cursor)
	if got := texts(d.Output); got != "[2@15]last, unfinished" || !d.Done || d.Run.Status != run.StateSucceeded {
		t.Fatalf("the end: %q done %v %+v", got, d.Done, d.Run)
	}
	// Only the journal; only a check's output.
	if d := m.tail(tailCursor{}, "--events-only"); len(d.Output) != 0 || len(d.Events) != 4 || !d.Done {
		t.Errorf("--events-only: %+v", d)
	}
	h.write(h.st.L.CheckLog(r.ID, 2, "unit"), "unit ok\n")
	if d := m.tail(tailCursor{Seq: 99}, "--check=unit"); texts(d.Output) != "[2@0]unit ok\n" || d.Output[0].Kind != "check" || d.Output[0].Name != "unit" {
		t.Errorf("--check unit: %+v", d)
	}
}

// A log larger than one answer comes in pieces whose cursor chains them
// to exactly the file; done only with the last.
func TestMCPTailBudget(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	m := mcpHarness{t: t, h: h, id: r.ID}
	var want strings.Builder
	for i := 0; want.Len() < 2*maxTailBytes+1000; i++ {
		fmt.Fprintf(&want, "line %d of a long log\n", i)
	}
	want.WriteString(strings.Repeat("x", maxTailBytes+10)) // one line longer than an answer
	h.write(h.st.L.AgentLog(r.ID, 2), want.String())
	var got strings.Builder
	c := tailCursor{Attempt: 2}
	for n := 0; ; n++ {
		if n > 10 {
			t.Fatal("no end")
		}
		d := m.tail(c)
		for _, p := range d.Output {
			if p.Attempt == 2 {
				if int64(got.Len()) != p.Offset {
					t.Fatalf("piece at %d after %d bytes", p.Offset, got.Len())
				}
				got.WriteString(p.Text)
			}
			if len(p.Text) > maxTailBytes {
				t.Fatalf("a piece of %d bytes", len(p.Text))
			}
		}
		c = d.Cursor
		if d.Done {
			break
		}
	}
	if got.String() != want.String() {
		t.Errorf("read %d bytes, want %d", got.Len(), want.Len())
	}
}

// --wait answers as soon as there is news.
func TestMCPTailWaits(t *testing.T) {
	h := newTestHome(t)
	r := activeRun(t, h)
	m := mcpHarness{t: t, h: h, id: r.ID}
	go func() {
		time.Sleep(200 * time.Millisecond)
		m.log(1, "news\n")
	}()
	d := m.tail(tailCursor{}, "--wait=30s")
	if texts(d.Output) != "[1@0]news\n" {
		t.Errorf("after waiting: %+v", d)
	}
	if code, out, _ := h.exec("mcp", "tail", r.ID, "--json", "--wait=2m"); code != 2 || !strings.Contains(out, "at most") {
		t.Errorf("--wait 2m: exit %d %s", code, out)
	}
}

// The tail's output type is declared whole by its schema.
func TestMCPTailSchemaDeclaresEveryField(t *testing.T) {
	if err := schemas(t).Validate("mcp-tail.schema.json", filled[tailOutput](), jsonschema.Options{Shape: true}); err != nil {
		t.Error(err)
	}
}

// `agentrun mcp` over stdio in process, with several tool calls at once
// (each a fresh App: run with -race).
func TestMCPStdioConcurrentCalls(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	app, _, errb := h.app()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	app.Stdin, app.Stdout = inR, outW
	done := make(chan int)
	go func() {
		done <- app.Execute(context.Background(), []string{"mcp"})
		outW.Close()
	}()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tool, args := "status", map[string]any{"id": r.ID}
			if i%2 == 1 {
				tool, args = "result", map[string]any{"id": r.ID, "patch": false}
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
			if err != nil || res.IsError {
				t.Errorf("%s: %v %+v", tool, err, res)
				return
			}
			b, _ := json.Marshal(res.StructuredContent)
			validDoc(t, tool+".schema.json", tool, string(b))
		}()
	}
	wg.Wait()
	cs.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("mcp ended with exit %d when stdin closed: %s", code, errb)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("mcp did not end when stdin closed")
	}
}
