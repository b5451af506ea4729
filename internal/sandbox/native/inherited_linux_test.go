package native_test

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A descriptor that the process starting a sandbox holds without
// close-on-exec (a shell's or a harness's pipe, which Go hands to every
// child) reaches no process inside, and the sandbox's init does not keep
// it either: the pipe's reader sees its end while the sandbox runs. For a
// sandbox started at once and one whose init was started ahead.
func TestInheritedDescriptorsStayOut(t *testing.T) {
	b := requireNative(t)
	for _, ahead := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "ahead"}[ahead], func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			leak, err := unix.Dup(int(w.Fd())) // not close-on-exec
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			if ahead {
				prewarmed(context.Background(), t, b)
			}
			sb := start(t, b, newSpec(t))
			unix.Close(leak)
			if ahead && !tookWarm(sb) {
				t.Fatal("Start did not take the init started ahead")
			}
			res := run(t, sb, "ls /proc/self/fd")
			fds := strings.Fields(string(res.Stdout))
			if res.ExitCode != 0 || len(fds) < 3 {
				t.Fatalf("ls /proc/self/fd: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			for _, fd := range fds {
				if fd == strconv.Itoa(leak) {
					t.Fatalf("a process in the sandbox has the host's pipe as fd %d: %v", leak, fds)
				}
			}
			r.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("the pipe's reader, with the sandbox running: %d %v, want its end (the init still holds fd %d)", n, err, leak)
			}
		})
	}
}
