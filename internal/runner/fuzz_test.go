package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// requestSeeds are well-formed requests of every op, as the client encodes
// them.
func requestSeeds(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	add := func(id, op string, args any) {
		raw, err := json.Marshal(args)
		if err != nil {
			f.Fatal(err)
		}
		b, err := encodeRequest(&request{ID: id, Op: op, Args: raw})
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	add("1", opExec, ExecRequest{Argv: []string{"true"}, Env: []string{"A=1"}, Stdin: []byte("x"), Timeout: time.Second, OutputCap: 10})
	add("2", opReadFile, ReadFileRequest{Path: "a.txt", Offset: 1, Limit: 3})
	add("3", opWriteFile, WriteFileRequest{Path: "b.txt", Data: []byte("data")})
	add("4", opEditFile, EditFileRequest{Path: "a.txt"})
	add("5", opListDir, ListDirRequest{Path: "."})
	add("6", opGrep, GrepRequest{Pattern: "hel+o"})
	add("7", opStat, StatRequest{Path: "sub"})
	add("8", opStat, StatRequest{Path: "../../etc/passwd"})
	add("9", opReadFile, ReadFileRequest{Path: "link"})
	out = append(out, []byte(`{"id":"c","op":"cancel"}`), []byte(`{"id":"x","op":"stat","stdout_off":-5}`+"\n"+`{"path":"/"}`),
		[]byte(`{"id":"","op":"stat"}`), []byte("{}\n{}"), []byte("\n"), []byte(`{"id":"g","op":"grep"}`+"\n"+`{"pattern":"(","path":"sub"}`))
	return out
}

// FuzzServerRequest decodes any frame payload as the server does (header,
// then the op's arguments) and runs the read-only ops on a real server
// over a small tree: nothing may panic, a decoded request survives
// re-encoding, and every answer encodes into a frame the client decodes.
// Mutating ops (exec, write_file, edit_file) are decoded, not run.
func FuzzServerRequest(f *testing.F) {
	for _, b := range requestSeeds(f) {
		f.Add(b)
	}
	root := f.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\nworld\n"), 0o644)
	os.Mkdir(filepath.Join(root, "sub"), 0o755)
	os.WriteFile(filepath.Join(root, "sub", "c.go"), []byte("package c // hello\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(root, "link"))
	s, err := newServer(ServerOptions{Root: root})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.close)
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := decodeRequest(p)
		if err != nil {
			return
		}
		enc, err := encodeRequest(r)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", r, err)
		}
		r2, err := decodeRequest(enc)
		if err != nil || r2.ID != r.ID || r2.Op != r.Op || r2.StdoutOff != r.StdoutOff || r2.StderrOff != r.StderrOff || !bytes.Equal(r2.Args, r.Args) {
			t.Fatalf("round trip of %q: %+v %v", p, r2, err)
		}
		var resp *response
		switch r.Op {
		case opExec:
			var a ExecRequest
			if decodeArgs(r.Args, &a) == nil {
				if limit, grace := a.bounds(); limit <= 0 || grace <= 0 {
					t.Fatalf("bounds of %+v: %d %v", a, limit, grace)
				}
			}
			return
		case opWriteFile:
			decodeArgs(r.Args, &WriteFileRequest{})
			return
		case opEditFile:
			decodeArgs(r.Args, &EditFileRequest{})
			return
		case opCancel:
			return
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp = s.do(ctx, newExecution(r.ID, r.Op), r)
			cancel()
		}
		if resp == nil || !resp.Done || resp.ID != r.ID {
			t.Fatalf("answer to %q: %+v", p, resp)
		}
		frame, err := encodeResponse(resp)
		if err != nil {
			t.Fatalf("encode answer %+v: %v", resp, err)
		}
		if back, err := decodeResponse(frame); err != nil || back.ID != resp.ID || !back.Done {
			t.Fatalf("answer %+v does not decode: %+v %v", resp, back, err)
		}
	})
}

// FuzzClientResponse decodes any frame payload as the client does and
// delivers it to a call: nothing may panic, a stream never writes past the
// call's limit nor twice the same bytes, and a final answer's result
// decodes (or fails) cleanly into every result type.
func FuzzClientResponse(f *testing.F) {
	for _, r := range []*response{
		{ID: "1", Stream: streamStdout, Off: 0, Data: []byte("hello")},
		{ID: "1", Stream: streamStderr, Off: 3, Data: []byte("world")},
		{ID: "1", Stream: streamStdout, Off: -1, Data: []byte("x")},
		{ID: "1", Done: true, Result: json.RawMessage(`{"exit_code":1,"stdout":"aGk=","duration":5}`)},
		{ID: "1", Done: true, Error: &OpError{Code: CodeNotFound, Message: "no"}},
		{ID: "1", Done: true, Fail: "journal: disk full"},
		{ID: "1", Done: true, Result: json.RawMessage(`{"data":"aGk=","size":2,"eof":true}`)},
	} {
		b, err := encodeResponse(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"id":"1","stream":"stdout","off":9223372036854775807}` + "\nzz"))
	f.Add([]byte(`{"id":"1","stream":"stdout","off":-9223372036854775808}` + "\nzz"))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := decodeResponse(p)
		if err != nil {
			return
		}
		const limit = 64
		var outs [2]bytes.Buffer
		c := &call{id: r.ID, outs: [2]io.Writer{&outs[0], &outs[1]}, doneCh: make(chan struct{}), limit: limit}
		c.deliver(r)
		n0, n1 := outs[0].Len(), outs[1].Len()
		if n0 > limit || n1 > limit {
			t.Fatalf("wrote %d/%d bytes past the limit %d", n0, n1, limit)
		}
		c.deliver(r) // a resent chunk
		if outs[0].Len() != n0 || outs[1].Len() != n1 {
			t.Fatalf("a resent chunk was written again: %d/%d -> %d/%d", n0, n1, outs[0].Len(), outs[1].Len())
		}
		if !r.Done {
			return
		}
		c.finish(r, nil)
		raw, err := result(c)
		if err != nil {
			return
		}
		for _, v := range []any{&ExecResult{}, &ReadFileResult{}, &WriteFileResult{}, &EditFileResult{}, &ListDirResult{}, &GrepResult{}, &StatResult{}} {
			json.Unmarshal(raw, v)
		}
	})
}
