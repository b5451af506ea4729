package sandboxtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
)

// opStep runs one op; want is the expected normalised result, or code the
// expected OpError code.
func opStep(name string, do func(e *env) (any, error), want any, code string) step {
	return step{
		name: name,
		do:   func(e *env) outcome { return result(do(e)) },
		check: func(t *testing.T, e *env, o outcome) {
			if code != "" {
				wantCode(code)(t, e, o)
				return
			}
			if o.Code != "" {
				t.Fatalf("got code %q, want a result", o.Code)
			}
			if want != nil && !reflect.DeepEqual(o.Result, want) {
				t.Errorf("got %#v\nwant %#v", o.Result, want)
			}
		},
	}
}

type readOut struct {
	Data string
	Size int64
	EOF  bool
}

func read(req runner.ReadFileRequest) func(e *env) (any, error) {
	return func(e *env) (any, error) {
		r, err := e.cl.ReadFile(bg(), req)
		if err != nil {
			return nil, err
		}
		d := string(r.Data)
		if len(d) > 64 {
			d = fmt.Sprintf("%d bytes", len(d))
		}
		return readOut{Data: d, Size: r.Size, EOF: r.EOF}, nil
	}
}

func write(req runner.WriteFileRequest) func(e *env) (any, error) {
	return func(e *env) (any, error) {
		r, err := e.cl.WriteFile(bg(), req)
		if err != nil {
			return nil, err
		}
		return *r, nil
	}
}

func edit(req runner.EditFileRequest) func(e *env) (any, error) {
	return func(e *env) (any, error) {
		r, err := e.cl.EditFile(bg(), req)
		if err != nil {
			return nil, err
		}
		return *r, nil
	}
}

type entryOut struct {
	Name, Type string
	Size       int64
	Mode       uint32
}

func list(req runner.ListDirRequest) func(e *env) (any, error) {
	return func(e *env) (any, error) {
		r, err := e.cl.ListDir(bg(), req)
		if err != nil {
			return nil, err
		}
		var out []entryOut
		for _, en := range r.Entries {
			if en.ModTime.IsZero() {
				return nil, fmt.Errorf("%s: zero mod time", en.Name)
			}
			size := en.Size
			if en.Type == "dir" {
				size = 0 // file system dependent
			}
			out = append(out, entryOut{Name: en.Name, Type: en.Type, Size: size, Mode: en.Mode})
		}
		return map[string]any{"entries": out, "truncated": r.Truncated}, nil
	}
}

func grep(req runner.GrepRequest) func(e *env) (any, error) {
	return func(e *env) (any, error) {
		r, err := e.cl.Grep(bg(), req)
		if err != nil {
			return nil, err
		}
		return map[string]any{"matches": r.Matches, "truncated": r.Truncated}, nil
	}
}

type statOut struct {
	Exists bool
	Type   string
	Size   int64
	Mode   uint32
}

func stat(p string) func(e *env) (any, error) {
	return func(e *env) (any, error) {
		r, err := e.cl.Stat(bg(), runner.StatRequest{Path: p})
		if err != nil {
			return nil, err
		}
		if r.Exists && r.ModTime.IsZero() {
			return nil, fmt.Errorf("zero mod time")
		}
		size := r.Size
		if r.Type == "dir" {
			size = 0
		}
		return statOut{Exists: r.Exists, Type: r.Type, Size: size, Mode: r.Mode}, nil
	}
}

func shell(cmd string) func(e *env) (any, error) {
	return func(e *env) (any, error) {
		r, err := e.cl.Exec(bg(), runner.ExecRequest{Shell: cmd}, nil, nil)
		if err != nil {
			return nil, err
		}
		return e.norm(string(r.Stdout)), nil
	}
}

// fileSteps are the file ops' steps, in order: later ones see what
// earlier ones wrote.
func fileSteps() []step {
	return slices.Concat(readSteps(), writeSteps(), editSteps(), listSteps(), grepSteps(), statSteps())
}

// readSteps are the steps of read_file: reads, caps, errors and escapes.
func readSteps() []step {
	big := int64(bigSize)
	return []step{
		opStep("read/whole", read(runner.ReadFileRequest{Path: "README.md"}), readOut{readme, 12, true}, ""),
		opStep("read/offset-limit", read(runner.ReadFileRequest{Path: "README.md", Offset: 2, Limit: 3}), readOut{"llo", 12, false}, ""),
		opStep("read/offset-to-end", read(runner.ReadFileRequest{Path: "README.md", Offset: 6}), readOut{"world\n", 12, true}, ""),
		opStep("read/past-end", read(runner.ReadFileRequest{Path: "README.md", Offset: 100}), readOut{"", 12, true}, ""),
		opStep("read/absolute-inside", func(e *env) (any, error) {
			return read(runner.ReadFileRequest{Path: e.sb.WorkDir() + "/src/../README.md"})(e)
		}, readOut{readme, 12, true}, ""),
		opStep("read/cap", read(runner.ReadFileRequest{Path: "big.txt"}), nil, runner.CodeTooLarge),
		opStep("read/cap-raised", read(runner.ReadFileRequest{Path: "big.txt", MaxBytes: 2 << 20}), readOut{fmt.Sprintf("%d bytes", big), big, true}, ""),
		opStep("read/cap-with-limit", read(runner.ReadFileRequest{Path: "big.txt", Offset: big - 4, Limit: 10}), readOut{"xxxx", big, true}, ""),
		opStep("read/small-cap", read(runner.ReadFileRequest{Path: "README.md", MaxBytes: 5}), nil, runner.CodeTooLarge),
		opStep("read/negative-offset", read(runner.ReadFileRequest{Path: "README.md", Offset: -1}), nil, runner.CodeBadRequest),
		opStep("read/not-found", read(runner.ReadFileRequest{Path: "nope.txt"}), nil, runner.CodeNotFound),
		opStep("read/dir", read(runner.ReadFileRequest{Path: "src"}), nil, runner.CodeIsDir),
		opStep("read/fifo-not-regular", read(runner.ReadFileRequest{Path: "fifo"}), nil, runner.CodeNotRegular),
		opStep("read/symlink-inside", read(runner.ReadFileRequest{Path: "link-in"}), readOut{readme, 12, true}, ""),
		opStep("read/symlink-escape", read(runner.ReadFileRequest{Path: "link-out"}), nil, runner.CodeEscape),
		opStep("read/symlink-absolute-escape", read(runner.ReadFileRequest{Path: "link-etc/passwd"}), nil, runner.CodeEscape),
		opStep("read/dotdot-escape", read(runner.ReadFileRequest{Path: "../secret.txt"}), nil, runner.CodeEscape),
		opStep("read/dotdot-inside-escape", read(runner.ReadFileRequest{Path: "src/../../secret.txt"}), nil, runner.CodeEscape),
		opStep("read/absolute-escape", read(runner.ReadFileRequest{Path: "/etc/passwd"}), nil, runner.CodeEscape),
		opStep("read/through-dir-symlink", read(runner.ReadFileRequest{Path: "link-dir/main.go"}), readOut{mainGo, int64(len(mainGo)), true}, ""),
	}
}

// writeSteps are the steps of write_file: creating, replacing, modes, refused targets and atomic replacement.
func writeSteps() []step {
	return []step{
		opStep("write/create-mkdir-p", write(runner.WriteFileRequest{Path: "new/deep/dir/f.txt", Data: []byte("v1\n")}), runner.WriteFileResult{Created: true, Size: 3}, ""),
		opStep("write/read-back", read(runner.ReadFileRequest{Path: "new/deep/dir/f.txt"}), readOut{"v1\n", 3, true}, ""),
		opStep("write/replace", write(runner.WriteFileRequest{Path: "new/deep/dir/f.txt", Data: []byte("v2 longer\n")}), runner.WriteFileResult{Created: false, Size: 10}, ""),
		opStep("write/no-temp-left", list(runner.ListDirRequest{Path: "new/deep/dir"}), map[string]any{"entries": []entryOut{{"f.txt", "file", 10, 0o644}}, "truncated": false}, ""),
		opStep("write/mode", write(runner.WriteFileRequest{Path: "tool.sh", Data: []byte("#!/bin/sh\necho tool\n"), Mode: 0o755}), runner.WriteFileResult{Created: true, Size: 20}, ""),
		opStep("write/mode-runs", shell("./tool.sh"), "tool\n", ""),
		opStep("write/keeps-mode", write(runner.WriteFileRequest{Path: "tool.sh", Data: []byte("#!/bin/sh\necho tool2\n")}), runner.WriteFileResult{Size: 21}, ""),
		opStep("write/keeps-mode-stat", stat("tool.sh"), statOut{true, "file", 21, 0o755}, ""),
		opStep("write/symlink-final", write(runner.WriteFileRequest{Path: "link-in", Data: []byte("through")}), nil, runner.CodeSymlink),
		opStep("write/symlink-target-unchanged", read(runner.ReadFileRequest{Path: "README.md"}), readOut{readme, 12, true}, ""),
		opStep("write/symlink-out-final", write(runner.WriteFileRequest{Path: "link-out", Data: []byte("through")}), nil, runner.CodeSymlink),
		opStep("write/secret-unchanged", func(e *env) (any, error) {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(e.host), "secret.txt"))
			return string(b), err
		}, secret, ""),
		opStep("write/escape-dotdot", write(runner.WriteFileRequest{Path: "../evil.txt", Data: []byte("x")}), nil, runner.CodeEscape),
		opStep("write/escape-via-dir-symlink", write(runner.WriteFileRequest{Path: "link-etc/agentrun-evil", Data: []byte("x")}), nil, runner.CodeEscape),
		opStep("write/escape-absolute", write(runner.WriteFileRequest{Path: "/tmp/agentrun-evil", Data: []byte("x")}), nil, runner.CodeEscape),
		opStep("write/over-dir", write(runner.WriteFileRequest{Path: "src", Data: []byte("x")}), nil, runner.CodeIsDir),
		opStep("write/parent-is-file", write(runner.WriteFileRequest{Path: "README.md/x", Data: []byte("x")}), nil, runner.CodeNotDir),
		opStep("write/fifo", write(runner.WriteFileRequest{Path: "fifo", Data: []byte("x")}), nil, runner.CodeNotRegular),
		opStep("write/cap", write(runner.WriteFileRequest{Path: "huge.bin", Data: make([]byte, runner.DefaultWriteCap+1)}), nil, runner.CodeTooLarge),
		opStep("write/cap-nothing-left", stat("huge.bin"), statOut{}, ""),
		{name: "write/atomic", do: atomicWrites, check: func(t *testing.T, e *env, o outcome) {
			if o.Result != "ok" {
				t.Errorf("got %v (code %q)", o.Result, o.Code)
			}
		}},
	}
}

// editSteps are the steps of edit_file: unique matches, refusals and kept modes.
func editSteps() []step {
	return []step{
		opStep("edit/unique", edit(runner.EditFileRequest{Path: "src/main.go", Old: `println("Hello")`, New: `println("Bye")`}), runner.EditFileResult{Size: int64(len(mainGo) - 2)}, ""),
		opStep("edit/read-back", read(runner.ReadFileRequest{Path: "src/main.go"}), readOut{strings.Replace(mainGo, "Hello", "Bye", 1), int64(len(mainGo) - 2), true}, ""),
		opStep("edit/no-match", edit(runner.EditFileRequest{Path: "src/main.go", Old: "absent text", New: "x"}), nil, runner.CodeNoMatch),
		opStep("edit/not-unique", edit(runner.EditFileRequest{Path: "dup.txt", Old: "same", New: "x"}), nil, runner.CodeNotUnique),
		opStep("edit/not-unique-unchanged", read(runner.ReadFileRequest{Path: "dup.txt"}), readOut{"same same\n", 10, true}, ""),
		opStep("edit/empty-old", edit(runner.EditFileRequest{Path: "dup.txt", Old: "", New: "x"}), nil, runner.CodeBadRequest),
		opStep("edit/symlink", edit(runner.EditFileRequest{Path: "link-in", Old: "hello", New: "x"}), nil, runner.CodeSymlink),
		opStep("edit/not-found", edit(runner.EditFileRequest{Path: "nope.txt", Old: "a", New: "b"}), nil, runner.CodeNotFound),
		opStep("edit/escape", edit(runner.EditFileRequest{Path: "link-out", Old: "outside", New: "x"}), nil, runner.CodeSymlink),
		opStep("edit/escape-dotdot", edit(runner.EditFileRequest{Path: "../secret.txt", Old: "outside", New: "x"}), nil, runner.CodeEscape),
		opStep("edit/keeps-mode", edit(runner.EditFileRequest{Path: "script.sh", Old: "script-ran", New: "script-edited"}), nil, ""),
		opStep("edit/keeps-mode-runs", shell("./script.sh"), "script-edited\n", ""),
	}
}

// listSteps are the steps of list_dir: flat, recursive, limits and escapes.
func listSteps() []step {
	return []step{
		opStep("list/flat", list(runner.ListDirRequest{Path: "src"}), map[string]any{"entries": []entryOut{
			{"main.go", "file", int64(len(mainGo) - 2), 0o644}, {"util", "dir", 0, 0o755}}, "truncated": false}, ""),
		opStep("list/recursive", list(runner.ListDirRequest{Path: "deep", Recursive: true}), map[string]any{"entries": []entryOut{
			{"a", "dir", 0, 0o755}, {"a/b", "dir", 0, 0o755}, {"a/b/c", "dir", 0, 0o755}, {"a/b/c/leaf.txt", "file", 10, 0o644}}, "truncated": false}, ""),
		opStep("list/root", list(runner.ListDirRequest{}), nil, ""),
		opStep("list/recursive-skips-git-contents", list(runner.ListDirRequest{Recursive: true}), nil, ""),
		opStep("list/limit", list(runner.ListDirRequest{Path: "deep", Recursive: true, Limit: 2}), map[string]any{"entries": []entryOut{
			{"a", "dir", 0, 0o755}, {"a/b", "dir", 0, 0o755}}, "truncated": true}, ""),
		opStep("list/types", list(runner.ListDirRequest{Path: ".", Limit: 100}), nil, ""),
		opStep("list/file", list(runner.ListDirRequest{Path: "README.md"}), nil, runner.CodeNotDir),
		opStep("list/not-found", list(runner.ListDirRequest{Path: "nope"}), nil, runner.CodeNotFound),
		opStep("list/escape", list(runner.ListDirRequest{Path: "link-etc"}), nil, runner.CodeEscape),
		opStep("list/escape-dotdot", list(runner.ListDirRequest{Path: ".."}), nil, runner.CodeEscape),
	}
}

// grepSteps are the steps of grep: globs, paths, skipped files, limits and errors.
func grepSteps() []step {
	return []step{
		opStep("grep/glob-base", grep(runner.GrepRequest{Pattern: `^func`, Glob: "*.go"}), map[string]any{"matches": []runner.GrepMatch{
			{Path: "src/main.go", Line: 3, Text: "func main() {"}, {Path: "src/util/x.go", Line: 4, Text: "func Func() {}"}}, "truncated": false}, ""),
		opStep("grep/glob-doublestar", grep(runner.GrepRequest{Pattern: `func`, Glob: "src/**/*.go"}), map[string]any{"matches": []runner.GrepMatch{
			{Path: "src/main.go", Line: 3, Text: "func main() {"}, {Path: "src/util/x.go", Line: 4, Text: "func Func() {}"}}, "truncated": false}, ""),
		opStep("grep/path", grep(runner.GrepRequest{Pattern: `func`, Path: "notes"}), map[string]any{"matches": []runner.GrepMatch{
			{Path: "notes/todo.txt", Line: 1, Text: "one func"}, {Path: "notes/todo.txt", Line: 3, Text: "three func"}}, "truncated": false}, ""),
		opStep("grep/one-file", grep(runner.GrepRequest{Pattern: `three`, Path: "notes/todo.txt"}), map[string]any{"matches": []runner.GrepMatch{
			{Path: "notes/todo.txt", Line: 3, Text: "three func"}}, "truncated": false}, ""),
		opStep("grep/ignore-case", grep(runner.GrepRequest{Pattern: `FUNC\(\)`, IgnoreCase: true}), map[string]any{"matches": []runner.GrepMatch{
			{Path: "src/util/x.go", Line: 4, Text: "func Func() {}"}}, "truncated": false}, ""),
		opStep("grep/skips-git-and-binary", grep(runner.GrepRequest{Pattern: `func`}), map[string]any{"matches": []runner.GrepMatch{
			{Path: "deep/a/b/c/leaf.txt", Line: 1, Text: "leaf func"},
			{Path: "notes/todo.txt", Line: 1, Text: "one func"}, {Path: "notes/todo.txt", Line: 3, Text: "three func"},
			{Path: "src/main.go", Line: 3, Text: "func main() {"}, {Path: "src/util/x.go", Line: 4, Text: "func Func() {}"}}, "truncated": false}, ""),
		opStep("grep/limit", grep(runner.GrepRequest{Pattern: `func`, Limit: 2}), map[string]any{"matches": []runner.GrepMatch{
			{Path: "deep/a/b/c/leaf.txt", Line: 1, Text: "leaf func"}, {Path: "notes/todo.txt", Line: 1, Text: "one func"}}, "truncated": true}, ""),
		opStep("grep/bad-pattern", grep(runner.GrepRequest{Pattern: `(`}), nil, runner.CodeBadRequest),
		opStep("grep/escape", grep(runner.GrepRequest{Pattern: `root`, Path: "link-etc"}), nil, runner.CodeEscape),
		opStep("grep/not-found", grep(runner.GrepRequest{Pattern: `x`, Path: "nope"}), nil, runner.CodeNotFound),
	}
}

// statSteps are the steps of stat: each type, missing paths and escapes.
func statSteps() []step {
	return []step{
		opStep("stat/file", stat("README.md"), statOut{true, "file", 12, 0o644}, ""),
		opStep("stat/dir", stat("src"), statOut{true, "dir", 0, 0o755}, ""),
		opStep("stat/symlink", stat("link-out"), statOut{true, "symlink", int64(len("../secret.txt")), 0o777}, ""),
		opStep("stat/fifo", stat("fifo"), statOut{true, "other", 0, 0o644}, ""),
		opStep("stat/missing", stat("nope"), statOut{}, ""),
		opStep("stat/escape", stat("../secret.txt"), nil, runner.CodeEscape),
		opStep("stat/escape-absolute", stat("/etc/passwd"), nil, runner.CodeEscape),
	}
}

// atomicWrites replaces a file many times while reading it concurrently:
// every read sees one whole version, never a mix or a truncated file.
func atomicWrites(e *env) outcome {
	a := bytes.Repeat([]byte("A"), 256<<10)
	b := bytes.Repeat([]byte("B"), 256<<10)
	if _, err := e.cl.WriteFile(bg(), runner.WriteFileRequest{Path: "atomic.bin", Data: a}); err != nil {
		return result(nil, err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var bad string
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := e.cl.ReadFile(bg(), runner.ReadFileRequest{Path: "atomic.bin"})
			if err == nil && !bytes.Equal(r.Data, a) && !bytes.Equal(r.Data, b) {
				mu.Lock()
				bad = fmt.Sprintf("read a mixed or partial version (%d bytes)", len(r.Data))
				mu.Unlock()
			}
		}
	}()
	deadline := time.Now().Add(time.Second)
	for i := 0; i < 30 && time.Now().Before(deadline); i++ {
		data := a
		if i%2 == 0 {
			data = b
		}
		if _, err := e.cl.WriteFile(bg(), runner.WriteFileRequest{Path: "atomic.bin", Data: data}); err != nil {
			close(stop)
			wg.Wait()
			return result(nil, err)
		}
	}
	close(stop)
	wg.Wait()
	if bad != "" {
		return outcome{Result: bad}
	}
	return outcome{Result: "ok"}
}

func steps() []step {
	return append(execSteps(), fileSteps()...)
}
