package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A command writing 40 MiB, ending with a marker, into a log file (as a
// check's log is written): the log keeps the first and the last half of the
// cap, with a note where the middle was cut, so it ends with the marker.
func TestOutputCapKeepsHeadAndTail(t *testing.T) {
	root := t.TempDir()
	c := testClient(t, testServer(t, root, ServerOptions{}))
	const total = 40 << 20
	const marker = "END-OF-OUTPUT\n"
	logPath := filepath.Join(t.TempDir(), "check.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	shell := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; echo END-OF-OUTPUT", total-len(marker))
	res, err := c.Exec(context.Background(), ExecRequest{Shell: shell}, logf, logf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	note := fmt.Sprintf("\n... %d bytes cut ...\n", total-DefaultOutputCap)
	if !res.Truncated {
		t.Error("Truncated not set")
	}
	if !bytes.HasSuffix(b, []byte(marker)) {
		t.Errorf("the log (%d bytes) does not end with the marker: ends %q", len(b), b[max(len(b)-40, 0):])
	}
	if i := bytes.Index(b, []byte(note)); i != DefaultOutputCap/2 {
		t.Errorf("cut note %q at %d, want %d", note, i, DefaultOutputCap/2)
	}
	if len(b) != DefaultOutputCap+len(note) {
		t.Errorf("log is %d bytes, want the cap %d and the note", len(b), DefaultOutputCap)
	}
	if n := CutBytes(b); n != total-DefaultOutputCap {
		t.Errorf("CutBytes = %d", n)
	}
}

// Output under the cap is whole, without a note; just over half of it,
// the part past the head arrives when the command ends.
func TestOutputCapSmallOutputsWhole(t *testing.T) {
	root := t.TempDir()
	c := testClient(t, testServer(t, root, ServerOptions{}))
	for _, n := range []int{0, 10, 500, 501, 999, 1000} {
		var out bytes.Buffer
		res, err := c.Exec(context.Background(), ExecRequest{Shell: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' b", n), OutputCap: 1000}, &out, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != strings.Repeat("b", n) || res.Truncated {
			t.Errorf("%d bytes: got %d bytes, truncated %v", n, out.Len(), res.Truncated)
		}
	}
	var out bytes.Buffer
	res, err := c.Exec(context.Background(), ExecRequest{Shell: "head -c 1001 /dev/zero | tr '\\0' b", OutputCap: 1000}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("b", 500) + CutNote(1) + strings.Repeat("b", 500); out.String() != want || !res.Truncated {
		t.Errorf("1001 bytes: got %q truncated %v", out.String(), res.Truncated)
	}
}

func TestRing(t *testing.T) {
	for _, max := range []int{1, 3, 7} {
		var r ring
		r.max = max
		var all []byte
		for i, n := range []int{0, 1, 2, 5, 1, 9, 3} {
			p := bytes.Repeat([]byte{byte('a' + i)}, n)
			all = append(all, p...)
			r.write(p)
			want := all[len(all)-min(len(all), max):]
			if !bytes.Equal(r.bytes(), want) || r.dropped != int64(len(all)-len(want)) {
				t.Fatalf("max %d after %q: %q dropped %d, want %q", max, all, r.bytes(), r.dropped, want)
			}
		}
	}
}

// TestExecKeepsOutputItsReaderIsSlowToTake: the command has ended while
// its pipe still holds output its reader has not taken yet (the reader
// was not scheduled for a while, as on a loaded machine; here the capture
// it feeds is held). The output comes whole: drain waits while the pipe
// holds data instead of closing it after drainIdle.
func TestExecKeepsOutputItsReaderIsSlowToTake(t *testing.T) {
	s, err := newServer(ServerOptions{Root: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}, NoWatchdog: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	e := newExecution("slow", "exec")
	// 60,000 bytes fit in the pipe, so the command ends at once, while
	// its reader, stopped at the capture, has taken 32 KiB at most.
	e.mu.Lock()
	time.AfterFunc(3*drainIdle, e.mu.Unlock)
	res, err := s.exec(context.Background(), e, &ExecRequest{Shell: "head -c 59996 /dev/zero | tr '\\0' a; echo END"})
	if err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	out := string(e.out[0])
	e.mu.Unlock()
	if res.ExitCode != 0 || len(out) != 60000 || !strings.HasSuffix(out, "aEND\n") {
		t.Fatalf("exit %d, %d bytes of output, want 60000 ending in END: ...%q", res.ExitCode, len(out), out[max(len(out)-10, 0):])
	}
}
