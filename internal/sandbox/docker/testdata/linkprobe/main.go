// Command linkprobe runs inside a docker sandbox as the agent would and
// attacks the runner's connection to the host: it tries to take the
// socket's place, to pass for the runner without the token, and to read
// the token out of every process it can see. It prints one line per
// attack: "held" when the attack failed, anything else when it worked.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const sock = "/.agentrun/runner.sock"

func main() {
	dump := os.Args[1]
	fmt.Println("replace:", replace())
	fmt.Println("listen:", listen())
	fmt.Println("impersonate:", impersonate())
	fmt.Println("read:", read(dump))
}

// replace tries to remove, rename or shadow the socket.
func replace() string {
	if err := os.Remove(sock); err == nil {
		return "removed"
	}
	if err := os.Rename(sock, "/tmp/moved.sock"); err == nil {
		return "renamed"
	}
	if err := os.WriteFile("/.agentrun/other.sock", nil, 0o600); err == nil {
		return "wrote beside it"
	}
	if err := syscall.Mount("/tmp", "/.agentrun", "", syscall.MS_BIND, ""); err == nil {
		return "mounted over it"
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return "gone"
	}
	return "held"
}

// listen tries to serve at the socket's path, as a relay would.
func listen() string {
	ln, err := net.Listen("unix", sock)
	if err == nil {
		ln.Close()
		return "listening"
	}
	return "held"
}

// impersonate connects as the runner would, without the token: the host
// must hang up on every try.
func impersonate() string {
	tries := []string{
		strings.Repeat("0", 64),
		strings.Repeat("a", 64) + "\x00\x00\x00\x10{\"proto\":2}",
		"{\"proto\":2,\"instance\":\"x\"}\n",
	}
	for _, t := range tries {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return "dial: " + err.Error()
		}
		io.WriteString(c, t)
		c.SetReadDeadline(time.Now().Add(8 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		// The host hangs up: EOF, or a reset when it left bytes unread.
		if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
			return fmt.Sprintf("kept open (%q): %v", t[:8], err)
		}
	}
	return "held"
}

// read copies whatever it can read of every process into dump, for the
// host to look for the token in.
func read(dump string) string {
	f, err := os.Create(dump)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		for _, name := range []string{"environ", "cmdline", "mem"} {
			b, err := os.ReadFile(filepath.Join(p, name))
			if err == nil {
				f.Write(b)
			}
		}
		fds, _ := filepath.Glob(filepath.Join(p, "fd", "*"))
		for _, fd := range fds {
			if t, err := os.Readlink(fd); err == nil {
				fmt.Fprintln(f, fd, t)
			}
		}
	}
	return "held"
}
