package loop

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// windowTTL is how long a model server's answer about a model's context
// window is reused: runs in a row ask the server once, and a model loaded
// again with another context is seen within minutes.
const windowTTL = 10 * time.Minute

// WindowCache remembers what model servers said about context windows, on
// the host, one small file per (server, model) in Dir: each run's first
// turn would otherwise wait for up to four probes of the server. A zero
// answer (the server does not say) is remembered too. Best effort: a
// cache that cannot be read or written only means probing again.
type WindowCache struct {
	Dir string
	// Server names the model server (its URL as the user gave it: behind
	// the gateway every run's BaseURL is the same).
	Server string
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

func (c *WindowCache) path(model string) string {
	sum := sha256.Sum256([]byte(c.Server + "\n" + model))
	return filepath.Join(c.Dir, "window-"+hex.EncodeToString(sum[:12]))
}

func (c *WindowCache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// get returns the remembered window of model, and whether a fresh answer
// is remembered.
func (c *WindowCache) get(model string) (int, bool) {
	if c == nil || c.Dir == "" || c.Server == "" {
		return 0, false
	}
	p := c.path(model)
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	if age := c.now().Sub(fi.ModTime()); age < 0 || age >= windowTTL {
		return 0, false
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	// The file names its key: a hash collision is never taken for an answer.
	key, val, ok := strings.Cut(strings.TrimSuffix(string(data), "\n"), "\n")
	n, err := strconv.Atoi(val)
	if !ok || key != c.Server+" "+model || err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// put remembers the server's answer for model (atomically: concurrent
// runs read a whole file or none).
func (c *WindowCache) put(model string, n int) {
	if c == nil || c.Dir == "" || c.Server == "" {
		return
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(c.Dir, ".window-*")
	if err != nil {
		return
	}
	_, werr := f.WriteString(c.Server + " " + model + "\n" + strconv.Itoa(n) + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		now := c.now()
		werr = os.Chtimes(f.Name(), now, now)
	}
	if werr == nil {
		werr = os.Rename(f.Name(), c.path(model))
	}
	if werr != nil {
		_ = os.Remove(f.Name())
	}
}
