package execpriv

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The constants written out here are the kernel's.
func TestConstantsAreTheKernels(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"PR_CAPBSET_READ", prCapbsetRead, unix.PR_CAPBSET_READ},
		{"PR_SET_NO_NEW_PRIVS", prSetNoNewPrivs, unix.PR_SET_NO_NEW_PRIVS},
		{"PR_CAP_AMBIENT", prCapAmbient, unix.PR_CAP_AMBIENT},
		{"PR_CAP_AMBIENT_CLEAR_ALL", prCapAmbientClearAll, unix.PR_CAP_AMBIENT_CLEAR_ALL},
		{"CLOCK_MONOTONIC", clockMonotonic, unix.CLOCK_MONOTONIC},
		{"CAP_SETFCAP", capSetfcap, unix.CAP_SETFCAP},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d here, %d in x/sys/unix", c.name, c.got, c.want)
		}
	}
}

// The package is among the first initialized only while it imports no
// more than these (see the package doc): any other import, x/sys/unix or
// fmt among them, would move its init after theirs.
func TestImportsStayFew(t *testing.T) {
	allowed := []string{"errors", "os", "strconv", "syscall", "unsafe"}
	_, self, _, _ := runtime.Caller(0)
	files, err := filepath.Glob(filepath.Join(filepath.Dir(self), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !slices.Contains(allowed, p) {
				t.Errorf("%s imports %s: only %v keep this package's init among the first", f, p, allowed)
			}
		}
	}
}

// A process not started as the init drops nothing at package init.
func TestNothingDroppedOutsideTheInit(t *testing.T) {
	if done && os.Getenv(helperEnv) == "" {
		t.Fatalf("dropped at package init in %v", os.Args)
	}
}

const (
	helperEnv = "EXECPRIV_HELPER"
	exitCgo   = 6 // the helper's exit code when the binary uses cgo
)

// TestDroppedOnEveryThread runs the drop in a child (it cannot be undone)
// with threads the runtime made before it, and checks every thread's end
// state there; without CAP_SETPCAP the drop fails, and says which step.
func TestDroppedOnEveryThread(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		dropHelper()
		return
	}
	out, err := runHelper(os.Args[0])
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == exitCgo {
		// This test binary uses cgo (as -race does), and the runtime
		// makes no call on every thread then: the child is this
		// package's tests built without it, as agentrun is.
		bin := filepath.Join(t.TempDir(), "execpriv.test")
		build := exec.Command("go", "test", "-c", "-o", bin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build the tests without cgo: %v\n%s", err, b)
		}
		out, err = runHelper(bin)
	}
	if os.Getuid() != 0 {
		if err == nil || !strings.Contains(string(out), "drop capability 0 from the bounding set on every thread: operation not permitted") {
			t.Fatalf("unprivileged drop: %v\n%s", err, out)
		}
		return
	}
	if err != nil {
		t.Fatalf("drop: %v\n%s", err, out)
	}
}

// runHelper runs the drop's helper in the test binary bin.
func runHelper(bin string) ([]byte, error) {
	cmd := exec.Command(bin, "-test.run=^TestDroppedOnEveryThread$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	return cmd.CombinedOutput()
}

func dropHelper() {
	// Threads to drop on: goroutines blocked in system calls hold their own.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			time.Sleep(50 * time.Millisecond)
		}()
	}
	time.Sleep(10 * time.Millisecond)
	if _, err := Dropped(); err != nil {
		fmt.Println(err)
		if errors.Is(err, syscall.ENOTSUP) {
			os.Exit(exitCgo)
		}
		os.Exit(3)
	}
	wg.Wait()
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	if len(tasks) < 3 {
		fmt.Println("only", len(tasks), "threads")
		os.Exit(4)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // a locked goroutine's thread, ending after it
		}
		if err != nil {
			fmt.Println(err)
			os.Exit(4)
		}
		st := string(b)
		for _, want := range []string{"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1"} {
			if !strings.Contains(st, want) {
				fmt.Printf("%s: no %q in\n%s", f, want, st)
				os.Exit(5)
			}
		}
	}
}
