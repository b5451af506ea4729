//go:build unix

package inheritedfd_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/inheritedfd"
)

// In the helper process: close what was inherited but fd 4, say what was
// closed and whether a file this process opened (close-on-exec) is still
// open, then hold on until stdin ends.
func TestMain(m *testing.M) {
	if os.Getenv("INHERITEDFD_HELPER") == "1" {
		own, err := os.Open(os.DevNull)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		closed, err := inheritedfd.Close(4)
		_, statErr := own.Stat()
		fmt.Printf("closed %v err %v own %v\n", closed, err, statErr)
		os.Stdout.Close()
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A process started with two inherited pipe ends closes the one it does
// not keep (its reader sees the end while the process still runs) and
// keeps the other, and the files it opened itself stay open.
func TestCloseInherited(t *testing.T) {
	r3, w3, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r3.Close()
	r4, w4, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r4.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INHERITEDFD_HELPER=1")
	cmd.ExtraFiles = []*os.File{w3, w4} // fds 3 and 4, not close-on-exec
	hold, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		hold.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper: %v", err)
		}
	}()
	w3.Close()
	w4.Close()
	said, _ := io.ReadAll(out)
	line := strings.TrimSpace(string(said))
	if !strings.HasPrefix(line, "closed [3") || strings.Contains(line, " 4") || !strings.HasSuffix(line, "err <nil> own <nil>") {
		t.Fatalf("helper says %q: want fd 3 closed, 4 kept, its own file open", line)
	}
	// The helper still runs (it waits for stdin): the pipe it closed has
	// no writer left, the one it kept still has one.
	r3.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := r3.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read the closed pipe: %d %v, want EOF", n, err)
	}
	r4.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := r4.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read the kept pipe: %v, want it still open", err)
	}
}
