package worker

// remote_files.go: the run's logs (the agent's, the checks', the setup's)
// go to the server as they grow, so that 'agentrun logs -f' against the
// server follows a run on any host. Each file is sent from the offset the
// server last acknowledged; the server skips bytes it has.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/server"
)

// shipEvery is how often the logs are looked at.
const shipEvery = 200 * time.Millisecond

// maxChunk is the most of one log sent in one request.
const maxChunk = 4 << 20

type shipper struct {
	c   *client.Client
	j   *job
	dir string // the run's directory here

	mu   sync.Mutex
	sent map[string]int64 // by path under dir
}

func (s *shipper) loop(ctx context.Context) {
	t := time.NewTicker(shipEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.ship(ctx)
		}
	}
}

// logs are the run's log files here, by path under dir.
func (s *shipper) logs() []string {
	var out []string
	if fi, err := os.Lstat(filepath.Join(s.dir, "setup.log")); err == nil && fi.Mode().IsRegular() {
		out = append(out, "setup.log")
	}
	root := filepath.Join(s.dir, "attempts")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if rel, err := filepath.Rel(s.dir, p); err == nil {
				out = append(out, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	return out
}

// ship sends what the logs gained since the last time; a failure is
// tried again the next time.
func (s *shipper) ship(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == nil {
		s.sent = map[string]int64{}
	}
	for _, rel := range s.logs() {
		for s.j.lostErr() == nil && ctx.Err() == nil {
			more, err := s.send(ctx, rel)
			if err != nil || !more {
				break
			}
		}
	}
}

// send sends the next chunk of rel; more: there is more to send.
func (s *shipper) send(ctx context.Context, rel string) (more bool, err error) {
	f, err := os.Open(filepath.Join(s.dir, filepath.FromSlash(rel)))
	if err != nil {
		return false, err
	}
	defer f.Close()
	off := s.sent[rel]
	// Only what the log gained is read: a buffer of maxChunk for each
	// log at each look would be most of what a host allocates.
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if fi.Size() <= off {
		return false, nil
	}
	buf := make([]byte, min(fi.Size()-off, maxChunk))
	n, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return false, err
	}
	if n == 0 {
		return false, nil
	}
	q := url.Values{"token": {strconv.FormatInt(s.j.token, 10)}, "path": {rel}, "offset": {strconv.FormatInt(off, 10)}}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	b, err := s.c.Send(cctx, "POST", "/v1/hosts/runs/"+url.PathEscape(s.j.id)+"/files", q, bytes.NewReader(buf[:n]), "application/octet-stream")
	if err != nil {
		return false, err
	}
	var a server.FileAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return false, err
	}
	s.sent[rel] = a.Size
	return a.Size > off && n == maxChunk, nil
}
