package runner

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testServer serves a runner in-process on a unix socket over root and
// returns the socket path. The server stops at the end of the test.
func testServer(t testing.TB, root string, opts ServerOptions) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	opts.Root = root
	if opts.Env == nil {
		opts.Env = []string{"PATH=" + os.Getenv("PATH")}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return sock
}

func testClient(t testing.TB, sock string) Client {
	t.Helper()
	c, err := Dial(context.Background(), sock, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestExecSmoke(t *testing.T) {
	root := t.TempDir()
	c := testClient(t, testServer(t, root, ServerOptions{}))
	ctx := context.Background()
	var out, errb bytes.Buffer
	res, err := c.Exec(ctx, ExecRequest{Shell: "echo hi; echo err >&2; pwd; cat; exit 3", Stdin: []byte("in")}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	want := "hi\n" + root + "\nin"
	if out.String() != want || errb.String() != "err\n" || res.ExitCode != 3 || string(res.Stdout) != want {
		t.Fatalf("out %q err %q res %+v", out.String(), errb.String(), res)
	}
}

func TestFileSmoke(t *testing.T) {
	root := t.TempDir()
	c := testClient(t, testServer(t, root, ServerOptions{}))
	ctx := context.Background()
	w, err := c.WriteFile(ctx, WriteFileRequest{Path: "a/b/c.txt", Data: []byte("hello world\n")})
	if err != nil || !w.Created {
		t.Fatal(w, err)
	}
	if _, err := c.EditFile(ctx, EditFileRequest{Path: "a/b/c.txt", Old: "world", New: "there"}); err != nil {
		t.Fatal(err)
	}
	r, err := c.ReadFile(ctx, ReadFileRequest{Path: "a/b/c.txt"})
	if err != nil || string(r.Data) != "hello there\n" || !r.EOF {
		t.Fatal(r, err)
	}
	g, err := c.Grep(ctx, GrepRequest{Pattern: "th.re", Glob: "**/*.txt"})
	if err != nil || len(g.Matches) != 1 || g.Matches[0].Path != "a/b/c.txt" {
		t.Fatal(g, err)
	}
	l, err := c.ListDir(ctx, ListDirRequest{Path: ".", Recursive: true})
	if err != nil || len(l.Entries) != 3 {
		t.Fatal(l, err)
	}
	if _, err := c.ReadFile(ctx, ReadFileRequest{Path: "../x"}); !IsCode(err, CodeEscape) {
		t.Fatal(err)
	}
	os.Symlink("/etc/passwd", filepath.Join(root, "link"))
	if _, err := c.ReadFile(ctx, ReadFileRequest{Path: "link"}); !IsCode(err, CodeEscape) {
		t.Fatal(err)
	}
	st, err := c.Stat(ctx, StatRequest{Path: "link"})
	if err != nil || st.Type != "symlink" {
		t.Fatal(st, err)
	}
}

func TestServerRefusesOversizedWrite(t *testing.T) {
	s, err := newServer(ServerOptions{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	_, err = s.writeFile(&WriteFileRequest{Path: "big", Data: make([]byte, DefaultWriteCap+1)})
	if !IsCode(err, CodeTooLarge) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.opts.Root, "big")); !os.IsNotExist(err) {
		t.Fatalf("file made: %v", err)
	}
}

func TestExecLooksUpArgv0OnTheCommandPath(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	os.WriteFile(filepath.Join(root, "bin", "mytool"), []byte("#!/bin/sh\necho mine\n"), 0o755)
	c := testClient(t, testServer(t, root, ServerOptions{Env: []string{"PATH=/usr/bin:/bin"}}))
	ctx := context.Background()
	if _, err := c.Exec(ctx, ExecRequest{Argv: []string{"mytool"}}, nil, nil); !IsCode(err, CodeExec) {
		t.Fatalf("found a tool off the PATH: %v", err)
	}
	res, err := c.Exec(ctx, ExecRequest{Argv: []string{"mytool"}, Env: []string{"PATH=" + filepath.Join(root, "bin") + ":/usr/bin:/bin"}}, nil, nil)
	if err != nil || string(res.Stdout) != "mine\n" {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestDialRefusesOtherProtocol(t *testing.T) {
	dir, _ := os.MkdirTemp("", "rt")
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		WriteFrame(c, []byte(`{"proto":99,"instance":"x"}`))
		c.Close()
	}()
	if _, err := Dial(context.Background(), filepath.Join(dir, "s"), DialOptions{}); err == nil || !strings.Contains(err.Error(), "protocol 99") {
		t.Fatalf("got %v", err)
	}
}

func TestExecTimeoutReportsSignal(t *testing.T) {
	c := testClient(t, testServer(t, t.TempDir(), ServerOptions{}))
	res, err := c.Exec(context.Background(), ExecRequest{Argv: []string{"sleep", "30"}, Timeout: 100 * time.Millisecond}, nil, nil)
	if err != nil || !res.TimedOut || res.ExitCode != -1 || res.Signal != "SIGTERM" {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestCancelledGrepStops(t *testing.T) {
	root := t.TempDir()
	for i := range 200 {
		d := filepath.Join(root, "d"+strings.Repeat("x", i%7), string(rune('a'+i%26)))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "f"+strings.Repeat("y", i)), []byte(strings.Repeat("some text line\n", 2000)), 0o644)
	}
	c := testClient(t, testServer(t, root, ServerOptions{}))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(5*time.Millisecond, cancel)
	if _, err := c.Grep(ctx, GrepRequest{Pattern: "nomatch"}); err != nil && err != context.Canceled {
		t.Fatalf("got %v", err)
	}
	res, err := c.Grep(context.Background(), GrepRequest{Pattern: "text", Limit: 3})
	if err != nil || len(res.Matches) != 3 || !res.Truncated {
		t.Fatalf("res %+v err %v", res, err)
	}
}
