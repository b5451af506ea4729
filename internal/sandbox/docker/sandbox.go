package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/diskwatch"
)

var _ sandbox.LimitStopper = (*sbox)(nil)

// sbox is a running docker sandbox: one container.
type sbox struct {
	cl       *client.Client
	id       string
	client   runner.Client
	stateDir string
	link     *link // the host's socket the runner dials
	disk     *diskwatch.Watch
	gateway  bool
	enforced map[string]string
	done     chan struct{} // closed when the container is not running

	stopOnce  sync.Once
	mu        sync.Mutex
	destroyed bool
}

func (s *sbox) Runner() runner.Client { return s.client }
func (s *sbox) WorkDir() string       { return WorkDir }
func (s *sbox) HomeDir() string       { return homeDir }

func (s *sbox) GatewayAddr() string {
	if s.gateway {
		return fmt.Sprintf("127.0.0.1:%d", gatewayPort)
	}
	return ""
}

func (s *sbox) Enforced() map[string]string {
	m := make(map[string]string, len(s.enforced))
	for k, v := range s.enforced {
		m[k] = v
	}
	return m
}

// Stop asks the engine to stop the container: SIGTERM to the init, which
// passes it to the runner (it ends its commands' groups), and SIGKILL
// after the grace or when ctx ends. Calls still in flight then fail with
// runner.ErrClosed.
func (s *sbox) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		select {
		case <-s.done:
		default:
			grace := stopGrace
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(grace+10)*time.Second)
			stop := context.AfterFunc(ctx, func() {
				// The caller gave up waiting: kill at once.
				s.cl.ContainerKill(context.Background(), s.id, client.ContainerKillOptions{Signal: "KILL"})
			})
			_, err = s.cl.ContainerStop(sctx, s.id, client.ContainerStopOptions{Timeout: &grace})
			stop()
			cancel()
			if err != nil && isGone(err) {
				err = nil
			}
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
			}
		}
		if s.client != nil {
			s.client.Close()
		}
	})
	if err != nil {
		return fmt.Errorf("stop container %s: %w", shortID(s.id), err)
	}
	return nil
}

// Destroy stops the sandbox, removes the container and the state dir.
func (s *sbox) Destroy(ctx context.Context) error {
	stopErr := s.Stop(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return nil
	}
	s.destroyed = true
	var errs []error
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := s.cl.ContainerRemove(rctx, s.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isGone(err) {
		errs = append(errs, fmt.Errorf("remove container %s: %w", shortID(s.id), err))
	} else {
		stopErr = nil // removed with force: whatever Stop said, it is gone
	}
	s.link.Close()
	if err := os.RemoveAll(s.stateDir); err != nil {
		errs = append(errs, fmt.Errorf("remove sandbox state: %w", err))
	}
	s.cl.Close()
	return errors.Join(append(errs, stopErr)...)
}

// isGone reports an engine error saying the container is not there (or
// already being removed).
func isGone(err error) bool {
	return cerrNotFound(err) || containsAny(err.Error(), "No such container", "no such container", "is already in progress", "not running")
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// watchDisk starts sampling the workspace, HOME and /tmp (seen from the
// host through the init's root, when the engine runs here and tells its
// pid) against the disk bound; past it, the container is killed and the
// calls in flight fail at once.
func (s *sbox) watchDisk(spec sandbox.Spec, p *plan, st *container.State) {
	s.disk = &diskwatch.Watch{
		Dirs:     []string{spec.Workspace, p.home},
		MaxBytes: p.diskBytes, MaxInodes: p.diskInodes,
		What: "the workspace, HOME and /tmp",
		Done: s.done,
	}
	if st != nil && st.Pid > 0 {
		s.disk.Tmpfs = []string{"/proc/" + strconv.Itoa(st.Pid) + "/root/tmp"}
	}
	go s.disk.Run(func() {
		s.cl.ContainerKill(context.Background(), s.id, client.ContainerKillOptions{Signal: "KILL"})
		if s.client != nil {
			s.client.Close()
		}
	})
}

// LimitExceeded implements sandbox.LimitStopper.
func (s *sbox) LimitExceeded() error { return s.disk.Exceeded() }
