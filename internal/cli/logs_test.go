package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

func TestLogsEveryAttempt(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	app, out, _ := h.app()
	if err := runLogs(context.Background(), &logsOptions{ID: r.ID}, app); err != nil {
		t.Fatal(err)
	}
	want := "==> attempt 1 <==\nattempt one line 1\nattempt one line 2\n\n==> attempt 2 <==\nattempt two\n"
	if out.String() != want {
		t.Errorf("got %q\nwant %q", out.String(), want)
	}
	code, s, _ := h.exec("logs", r.ID, "--attempt", "2")
	if code != 0 || s != "attempt two\n" {
		t.Errorf("--attempt 2: exit %d %q", code, s)
	}
	code, s, _ = h.exec("logs", r.ID, "--check", "unit", "--attempt", "1")
	if code != 0 || s != "unit output of attempt 1\n" {
		t.Errorf("--check unit --attempt 1: exit %d %q", code, s)
	}
	code, s, _ = h.exec("logs", r.ID, "--check", "unit")
	if code != 0 || !strings.Contains(s, "==> attempt 2: check unit <==\nunit output of attempt 2\n") {
		t.Errorf("--check unit: exit %d %q", code, s)
	}
}

func TestLogsJSON(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	code, out, _ := h.exec("logs", r.ID, "--json")
	var doc struct {
		ID   string     `json:"id"`
		Logs []logPiece `json:"logs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if doc.ID != r.ID || len(doc.Logs) != 2 || !reflect.DeepEqual(doc.Logs[1], logPiece{Attempt: 2, Kind: "agent", Text: "attempt two\n"}) {
		t.Errorf("%+v", doc)
	}
}

func TestLogsBadInput(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	for _, c := range []struct {
		args []string
		exit int
		code string
	}{
		{[]string{"--check", "../../../etc/passwd"}, 2, "usage"},
		{[]string{"--check", ".hidden"}, 2, "usage"},
		{[]string{"--check", "a/b"}, 2, "usage"},
		{[]string{"--attempt", "-1"}, 2, "usage"},
		{[]string{"--attempt", "9"}, 2, "no_log"},
		{[]string{"--check", "lint"}, 2, "no_log"},
		{[]string{"--events", "--check", "unit"}, 2, "conflicting_flags"},
		{[]string{"--attempt", "x"}, 2, "usage"},
	} {
		code, out, _ := h.exec(append([]string{"logs", r.ID, "--json"}, c.args...)...)
		if code != c.exit || jsonErr(t, out)["code"] != c.code {
			t.Errorf("%v: exit %d %s", c.args, code, out)
		}
	}
}

func TestLogsBadIDs(t *testing.T) {
	badIDCases(t, newTestHome(t), "logs")
}

func TestLogsQueuedRunHasNoOutputYet(t *testing.T) {
	h := newTestHome(t)
	r := h.add(func(r *run.Run) { r.State, r.Reason = run.StateQueued, "" })
	h.holdSupervisor(r.ID)
	code, out, stderr := h.exec("logs", r.ID)
	if code != 0 || out != "" || !strings.Contains(stderr, "no agent output yet") {
		t.Errorf("exit %d %q %q", code, out, stderr)
	}
}

func TestLogsEvents(t *testing.T) {
	h := newTestHome(t)
	r := h.add(func(r *run.Run) { r.State, r.Reason = run.StateQueued, "" })
	h.holdSupervisor(r.ID)
	ctx := context.Background()
	if _, err := h.st.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.AppendEvent(ctx, r.ID, run.NewEvent(run.EventWarning, "repo had \x1b[31muncommitted\x1b[0m changes", map[string]int{"files": 2})); err != nil {
		t.Fatal(err)
	}
	code, out, _ := h.exec("logs", r.ID, "--events")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(lines[0], "state") || !strings.Contains(lines[0], "preparing") ||
		!strings.Contains(lines[1], "warning") || !strings.Contains(lines[1], `{"files":2}`) {
		t.Errorf("%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Error("an escape sequence from an event message reached the output")
	}
	code, out, _ = h.exec("logs", r.ID, "--events", "--json")
	var doc struct {
		Events []run.Event `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || len(doc.Events) != 2 || doc.Events[1].Seq != 2 {
		t.Errorf("exit %d %v %+v", code, err, doc)
	}
}

// appendLines appends lines to path one write at a time, as an agent does.
func appendLines(t *testing.T, path string, lines []string) {
	if err := os.MkdirAll(path[:strings.LastIndex(path, "/")], 0o700); err != nil {
		t.Error(err)
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	for _, l := range lines {
		// Half a line, a pause, the rest: output arrives in pieces.
		half := len(l) / 2
		f.WriteString(l[:half])
		time.Sleep(time.Millisecond)
		f.WriteString(l[half:] + "\n")
		time.Sleep(time.Millisecond)
	}
}

// activeRun makes a running run with a live supervisor lock.
func activeRun(t *testing.T, h *testHome) *run.Run {
	r := h.add(func(r *run.Run) {
		r.State, r.Reason = run.StateRunning, ""
		r.Attempts = []run.Attempt{{N: 1, StartedAt: time.Now()}}
	})
	h.holdSupervisor(r.ID)
	return r
}

// finish records attempt 2 and ends the run as the supervisor would.
func finish(t *testing.T, h *testHome, id string) {
	ctx := context.Background()
	if _, err := h.st.Update(ctx, id, func(r *run.Run) error {
		r.Attempts = append(r.Attempts, run.Attempt{N: 2, StartedAt: time.Now()})
		return nil
	}); err != nil {
		t.Error(err)
	}
	if _, err := h.st.Transition(ctx, id, []run.State{run.StateRunning}, run.StateSucceeded, run.ReasonCompleted, ""); err != nil {
		t.Error(err)
	}
}

func numbered(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s line %03d", prefix, i))
	}
	return out
}

// logs -f on a run that another goroutine writes to and then finishes:
// every line in order, across attempts, and the command returns.
func TestLogsFollow(t *testing.T) {
	h := newTestHome(t)
	r := activeRun(t, h)
	one, two := numbered("one", 60), numbered("two", 40)
	go func() {
		appendLines(t, h.st.L.AgentLog(r.ID, 1), one)
		appendLines(t, h.st.L.AgentLog(r.ID, 2), two[:20])
		finishAfter := two[20:]
		appendLines(t, h.st.L.AgentLog(r.ID, 2), finishAfter)
		finish(t, h, r.ID)
	}()
	app, out, errb := h.app()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := runLogs(ctx, &logsOptions{ID: r.ID, Follow: true, Poll: 3 * time.Millisecond}, app); err != nil {
		t.Fatal(err)
	}
	want := strings.Join(one, "\n") + "\n==> attempt 2 <==\n" + strings.Join(two, "\n") + "\n"
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	if !strings.Contains(errb.String(), "run "+r.ID+" succeeded (completed)") {
		t.Errorf("stderr: %q", errb.String())
	}
}

func TestLogsFollowJSONLines(t *testing.T) {
	h := newTestHome(t)
	r := activeRun(t, h)
	lines := numbered("x", 30)
	go func() {
		appendLines(t, h.st.L.AgentLog(r.ID, 1), lines)
		finish(t, h, r.ID)
	}()
	app, out, _ := h.app()
	app.JSON = true
	if err := runLogs(context.Background(), &logsOptions{ID: r.ID, Follow: true, Poll: 3 * time.Millisecond}, app); err != nil {
		t.Fatal(err)
	}
	var got []string
	all := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if end := all[len(all)-1]; !strings.HasPrefix(end, `{"type":"end","id":"`+r.ID+`","status":"succeeded"`) {
		t.Errorf("last line %s", end)
	}
	for _, l := range all[:len(all)-1] {
		var ll logLine
		if err := json.Unmarshal([]byte(l), &ll); err != nil || ll.Attempt != 1 || ll.Kind != "agent" {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, ll.Line)
	}
	if strings.Join(got, "|") != strings.Join(lines, "|") {
		t.Errorf("got %v", got)
	}
}

func TestLogsFollowEvents(t *testing.T) {
	h := newTestHome(t)
	r := activeRun(t, h)
	ctx := context.Background()
	go func() {
		for i := range 20 {
			if _, err := h.st.AppendEvent(ctx, r.ID, run.NewEvent(run.EventWarning, fmt.Sprintf("note %02d", i), nil)); err != nil {
				t.Error(err)
			}
			time.Sleep(time.Millisecond)
		}
		finish(t, h, r.ID)
	}()
	app, out, _ := h.app()
	app.JSON = true
	if err := runLogs(ctx, &logsOptions{ID: r.ID, Follow: true, Events: true, Poll: 3 * time.Millisecond}, app); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 22 || !strings.HasPrefix(lines[21], `{"type":"end","id":"`+r.ID+`","status":"succeeded"`) {
		t.Fatalf("%d lines, want 21 events and the end:\n%s", len(lines), out.String())
	}
	lines = lines[:21]
	for i, l := range lines {
		var e run.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Seq != int64(i+1) {
			t.Fatalf("line %d: %v %q", i, err, l)
		}
		if i == 20 && e.State != run.StateSucceeded {
			t.Errorf("last event %+v", e)
		}
	}
}

// A followed run whose supervisor dies ends the follow: it is reconciled
// to interrupted.
func TestLogsFollowEndsWhenSupervisorDies(t *testing.T) {
	h := newTestHome(t)
	r := h.add(func(r *run.Run) {
		r.State, r.Reason = run.StateRunning, ""
		r.Attempts = []run.Attempt{{N: 1, StartedAt: time.Now()}}
	})
	lock := h.holdSupervisor(r.ID)
	app, _, errb := h.app()
	done := make(chan error, 1)
	go func() {
		done <- runLogs(context.Background(), &logsOptions{ID: r.ID, Follow: true, Poll: 3 * time.Millisecond}, app)
	}()
	select {
	case err := <-done:
		t.Fatalf("follow ended while the supervisor lives: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	lock.Close() // the supervisor dies
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after the supervisor died")
	}
	if !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("stderr %q", errb.String())
	}
	if got, _ := h.st.Get(context.Background(), r.ID); got.State != run.StateInterrupted {
		t.Errorf("state %s", got.State)
	}
}

// Ctrl-C while following: exit 130, the run untouched.
func TestLogsFollowInterrupted(t *testing.T) {
	h := newTestHome(t)
	r := activeRun(t, h)
	app, _, _ := h.app()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(30 * time.Millisecond); cancel() }()
	if code := app.Execute(ctx, []string{"logs", "-f", r.ID}); code != 130 {
		t.Errorf("exit %d, want 130", code)
	}
	if got, _ := h.st.Get(context.Background(), r.ID); got.State != run.StateRunning {
		t.Errorf("state %s", got.State)
	}
}

// A built-in agent attempt is shown from its transcript, rendered.
func TestLogsRendersTranscript(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	h.write(h.st.L.Transcript(r.ID, 2),
		`{"type":"assistant","attempt":2,"turn":1,"content":"Looking at the failing test first."}`+"\n"+
			`{"type":"tool_result","attempt":2,"turn":1,"tool":"bash","output":"ok  auth 0.1s"}`+"\n")
	code, out, _ := h.exec("logs", r.ID, "--attempt", "2")
	if code != 0 || !strings.Contains(out, "Looking at the failing test first.") || strings.Contains(out, "attempt two") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestLogsSaysWhenNothingWasPrinted(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	h.write(h.st.L.AgentLog(r.ID, 1), "")
	h.write(h.st.L.AgentLog(r.ID, 2), "")
	code, out, stderr := h.exec("logs", r.ID)
	if code != 0 || out != "" || !strings.Contains(stderr, "the agent printed nothing") {
		t.Errorf("exit %d %q %q", code, out, stderr)
	}
}

// -f --attempt N waits for attempt N, and -f --check follows one check.
func TestLogsFollowOneAttemptAndCheck(t *testing.T) {
	for _, check := range []string{"", "unit"} {
		h := newTestHome(t)
		r := activeRun(t, h)
		h.write(h.st.L.AgentLog(r.ID, 1), "attempt one\n")
		path := h.st.L.AgentLog(r.ID, 2)
		if check != "" {
			path = h.st.L.CheckLog(r.ID, 2, check)
		}
		lines := numbered("two", 10)
		go func() {
			time.Sleep(20 * time.Millisecond)
			appendLines(t, path, lines)
			finish(t, h, r.ID)
		}()
		app, out, _ := h.app()
		o := &logsOptions{ID: r.ID, Follow: true, Attempt: 2, Check: check, Poll: 3 * time.Millisecond}
		if err := runLogs(context.Background(), o, app); err != nil {
			t.Fatal(err)
		}
		if want := strings.Join(lines, "\n") + "\n"; out.String() != want {
			t.Errorf("check %q: got %q", check, out.String())
		}
	}
}
