package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The capacity tests share slots with other processes: the test binary
// run again as a helper (helperEnv names what it does).
const helperEnv = "AGENTRUN_GATEWAY_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(capacityHelper(mode))
	}
	os.Exit(m.Run())
}

// capacityHelper is another supervisor's process on the same machine.
//
//	hold:   take a slot, print "held", wait for a line on stdin, release, print "released"
//	rounds: take and hold a slot CAP_ROUNDS times for CAP_HOLD, logging to CAP_LOG
func capacityHelper(mode string) int {
	c := FlockCapacity{Dir: os.Getenv("CAP_DIR")}
	key := os.Getenv("CAP_KEY")
	maxSlots, _ := strconv.Atoi(os.Getenv("CAP_MAX"))
	switch mode {
	case "hold":
		release, err := c.Acquire(context.Background(), key, maxSlots)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		fmt.Println("held")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		release()
		fmt.Println("released")
		return 0
	case "rounds":
		rounds, _ := strconv.Atoi(os.Getenv("CAP_ROUNDS"))
		hold, _ := time.ParseDuration(os.Getenv("CAP_HOLD"))
		log, err := os.OpenFile(os.Getenv("CAP_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			err = holdRounds(c, key, maxSlots, rounds, hold, log, fmt.Sprintf("pid%d", os.Getpid()))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
	return 2
}

// holdRounds takes a slot rounds times; every hold is logged as "+ who"
// after the slot is taken and "- who" before it is released, with
// O_APPEND writes, so that the log's order bounds who held at once.
func holdRounds(c FlockCapacity, key string, maxSlots, rounds int, hold time.Duration, log *os.File, who string) error {
	for range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		release, err := c.Acquire(ctx, key, maxSlots)
		cancel()
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "+ %s\n", who)
		time.Sleep(hold)
		fmt.Fprintf(log, "- %s\n", who)
		release()
	}
	return nil
}

type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startHelper(t *testing.T, mode, dir, key string, maxSlots int, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "CAP_DIR="+dir, "CAP_KEY="+key, "CAP_MAX="+strconv.Itoa(maxSlots))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return h
}

func (h *helper) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok || l != want {
			t.Fatalf("helper %d said %q (%v), want %q", h.cmd.Process.Pid, l, ok, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("helper %d did not say %q", h.cmd.Process.Pid, want)
	}
}

// wait waits for the helper to end and returns how.
func (h *helper) wait() error {
	for range h.lines {
	}
	return h.cmd.Wait()
}

// kill9 kills the helper with SIGKILL and waits for it.
func (h *helper) kill9(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := h.wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, not by SIGKILL", err)
	}
}

// acquireWithin takes a slot or fails the test after d.
func acquireWithin(t *testing.T, c FlockCapacity, key string, maxSlots int, d time.Duration) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	release, err := c.Acquire(ctx, key, maxSlots)
	if err != nil {
		t.Fatalf("no slot of %d within %s: %v", maxSlots, d, err)
	}
	return release
}

// acquireAsync takes a slot in a goroutine; the channel gets its release
// (nil and a test error if none came within d).
func acquireAsync(t *testing.T, c FlockCapacity, key string, maxSlots int, d time.Duration) <-chan func() {
	got := make(chan func(), 1)
	done := make(chan struct{})
	ended := errors.New("the test ended")
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(ended); <-done })
	go func() {
		defer close(done)
		tctx, tcancel := context.WithTimeout(ctx, d)
		defer tcancel()
		release, err := c.Acquire(tctx, key, maxSlots)
		if err != nil && !errors.Is(err, ended) {
			t.Errorf("no slot of %d within %s: %v", maxSlots, d, err)
		}
		got <- release
	}()
	return got
}

// mustWait checks that no slot is free for d.
func mustWait(t *testing.T, c FlockCapacity, key string, maxSlots int, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	release, err := c.Acquire(ctx, key, maxSlots)
	if err == nil {
		release()
		t.Fatalf("got a slot of %d that should be taken", maxSlots)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire: %v, want the deadline", err)
	}
}

func waiters(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*", "wait-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func waitWaiters(t *testing.T, dir string, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); len(waiters(t, dir)) != n; {
		if time.Now().After(end) {
			t.Fatalf("%d waiters queued, want %d", len(waiters(t, dir)), n)
		}
		time.Sleep(time.Millisecond)
	}
}

const testServer = "lmstudio http://127.0.0.1:1234"

func TestFlockCapacityBound(t *testing.T) {
	dir := t.TempDir()
	c := FlockCapacity{Dir: dir}
	logPath := filepath.Join(dir, "holds.log")
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	const rounds, hold = 4, 15 * time.Millisecond
	// 6 acquirers: 4 goroutines here and 2 other processes.
	var helpers []*helper
	for range 2 {
		helpers = append(helpers, startHelper(t, "rounds", dir, testServer, 2,
			"CAP_ROUNDS="+strconv.Itoa(rounds), "CAP_HOLD="+hold.String(), "CAP_LOG="+logPath))
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if err := holdRounds(c, testServer, 2, rounds, hold, log, fmt.Sprintf("g%d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, h := range helpers {
		if err := h.wait(); err != nil {
			t.Errorf("helper: %v", err)
		}
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	holders, most, holds := map[string]bool{}, 0, 0
	whoHeld := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		op, who, _ := strings.Cut(line, " ")
		switch op {
		case "+":
			if holders[who] {
				t.Fatalf("%s took a second slot", who)
			}
			holders[who] = true
			holds++
			whoHeld[who]++
		case "-":
			delete(holders, who)
		}
		most = max(most, len(holders))
		if len(holders) > 2 {
			t.Fatalf("%d holders at once (%v), max 2:\n%s", len(holders), holders, b)
		}
	}
	if holds != 6*rounds || len(whoHeld) != 6 {
		t.Errorf("%d holds by %d acquirers, want %d by 6", holds, len(whoHeld), 6*rounds)
	}
	if most != 2 {
		t.Errorf("at most %d holders at once: the 2 slots were never both used", most)
	}
	if w := waiters(t, dir); len(w) != 0 {
		t.Errorf("waiter files left: %v", w)
	}
}

func TestFlockCapacityArrivalOrder(t *testing.T) {
	dir := t.TempDir()
	c := FlockCapacity{Dir: dir}
	holder := acquireWithin(t, c, testServer, 1, time.Second)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	const n = 5
	for i := range n {
		got := acquireAsync(t, c, testServer, 1, 10*time.Second)
		wg.Go(func() {
			release := <-got
			if release == nil {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			release()
		})
		waitWaiters(t, dir, i+1)
		time.Sleep(15 * time.Millisecond) // distinct ticket times on a coarse clock
	}
	holder()
	wg.Wait()
	if !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
		t.Errorf("served in the order %v, want arrival order", order)
	}
}

func TestFlockCapacityOtherProcessAndKill9(t *testing.T) {
	dir := t.TempDir()
	c := FlockCapacity{Dir: dir}
	a := startHelper(t, "hold", dir, testServer, 2)
	a.expect(t, "held")
	b := startHelper(t, "hold", dir, testServer, 2)
	b.expect(t, "held")
	// Both slots are another process's.
	mustWait(t, c, testServer, 2, 100*time.Millisecond)

	// One released: a waiter here gets it.
	got := acquireAsync(t, c, testServer, 2, 10*time.Second)
	waitWaiters(t, dir, 1)
	fmt.Fprintln(a.stdin)
	a.expect(t, "released")
	select {
	case release := <-got:
		if release == nil {
			t.FailNow()
		}
		defer release()
	case <-time.After(5 * time.Second):
		t.Fatal("a released slot was not taken")
	}
	if err := a.wait(); err != nil {
		t.Fatal(err)
	}

	// The other holder killed -9: its slot is free at once.
	mustWait(t, c, testServer, 2, 50*time.Millisecond)
	got = acquireAsync(t, c, testServer, 2, 10*time.Second)
	waitWaiters(t, dir, 1)
	b.kill9(t)
	t0 := time.Now()
	select {
	case release := <-got:
		if release == nil {
			t.FailNow()
		}
		defer release()
		if d := time.Since(t0); d > time.Second {
			t.Errorf("the killed holder's slot was free after %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the slot of a holder killed -9 was not freed")
	}
}

func TestFlockCapacityDeadWaiter(t *testing.T) {
	dir := t.TempDir()
	c := FlockCapacity{Dir: dir}
	holder := acquireWithin(t, c, testServer, 1, time.Second)
	// Another process queues behind the holder and is killed -9 there:
	// its waiter file stays, older than any later waiter.
	w := startHelper(t, "hold", dir, testServer, 1)
	waitWaiters(t, dir, 1)
	w.kill9(t)
	dead := waiters(t, dir)
	if len(dead) != 1 {
		t.Fatalf("waiter files %v", dead)
	}
	time.Sleep(15 * time.Millisecond)
	got := acquireAsync(t, c, testServer, 1, 10*time.Second)
	// The new waiter queues (and clears the dead one's file away).
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		w := waiters(t, dir)
		if len(w) == 1 && w[0] != dead[0] {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("waiter files %v", w)
		}
	}
	holder()
	select {
	case release := <-got:
		if release != nil {
			release()
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a dead waiter's file holds the queue up")
	}
}

func TestFlockCapacityCancel(t *testing.T) {
	dir := t.TempDir()
	c := FlockCapacity{Dir: dir}
	holder := acquireWithin(t, c, testServer, 1, time.Second)
	defer holder()
	stop := errors.New("the run was cancelled")
	ctx, cancel := context.WithCancelCause(context.Background())
	// t0 before the timer: under load the test may be descheduled between
	// the two, and the cancel comes 30 ms after the timer's start.
	t0 := time.Now()
	time.AfterFunc(30*time.Millisecond, func() { cancel(stop) })
	release, err := c.Acquire(ctx, testServer, 1)
	if err == nil {
		release()
		t.Fatal("Acquire took a taken slot")
	}
	if !errors.Is(err, stop) || release != nil {
		t.Errorf("Acquire: %v, want the cause %q", err, stop)
	}
	if d := time.Since(t0); d < 30*time.Millisecond || d > 2*time.Second {
		t.Errorf("returned after %s", d)
	}
	if w := waiters(t, dir); len(w) != 0 {
		t.Errorf("a cancelled waiter left its file: %v", w)
	}
	mustWait(t, c, testServer, 1, 20*time.Millisecond)
}

func TestFlockCapacityKeysAndUnlimited(t *testing.T) {
	dir := t.TempDir()
	c := FlockCapacity{Dir: dir}
	a := acquireWithin(t, c, "server-a", 1, time.Second)
	defer a()
	b := acquireWithin(t, c, "server-b", 1, 100*time.Millisecond) // another server's slots
	defer b()
	mustWait(t, c, "server-a", 1, 20*time.Millisecond)
	// max 0: no limit, and nothing is written.
	none := FlockCapacity{Dir: filepath.Join(dir, "never", "made")}
	for range 3 {
		release, err := none.Acquire(context.Background(), "x", 0)
		if err != nil || release == nil {
			t.Fatalf("unlimited Acquire: %v", err)
		}
		defer release()
	}
	if _, err := os.Stat(none.Dir); !os.IsNotExist(err) {
		t.Errorf("unlimited Acquire made %s", none.Dir)
	}
	if _, err := (FlockCapacity{Dir: "/proc/no/such/dir"}).Acquire(context.Background(), "x", 1); err == nil {
		t.Error("Acquire without a usable directory succeeded")
	}
}

// TestFlockCapacityLiveWaiterFiles: a waiter file another waiter can lock
// is taken for a dead waiter's (removed, its waiter losing its place), and
// a waiter whose file is locked by another as it starts fails its Acquire.
// So while its waiter lives, a wait-* file must never be lockable: a
// watcher that keeps trying while waiters come and go must never get one
// that is still there.
func TestFlockCapacityLiveWaiterFiles(t *testing.T) {
	dir := t.TempDir()
	c := FlockCapacity{Dir: dir}
	var stop atomic.Bool
	var caught, acquired atomic.Int64
	var errs sync.Map
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				release, err := c.Acquire(context.Background(), testServer, 64)
				if err != nil {
					errs.Store(err.Error(), true)
					continue
				}
				acquired.Add(1)
				release()
			}
		})
	}
	var example atomic.Value
	wg.Go(func() {
		for !stop.Load() {
			paths, _ := filepath.Glob(filepath.Join(dir, "*", "wait-*"))
			for _, p := range paths {
				f, err := os.OpenFile(p, os.O_RDWR, 0) // never O_CREATE: a gone waiter's file stays gone
				if err != nil {
					continue
				}
				if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
					f.Close()
					continue
				}
				// Locked: a live waiter's only if the path still names it.
				fi, err1 := f.Stat()
				now, err2 := os.Stat(p)
				if err1 == nil && err2 == nil && os.SameFile(fi, now) {
					caught.Add(1)
					example.Store(p)
				}
				f.Close()
			}
		}
	})
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if n := caught.Load(); n > 0 {
		t.Errorf("%d times a live waiter's file (e.g. %v) could be locked by another (%d acquired)", n, example.Load(), acquired.Load())
	}
	errs.Range(func(k, _ any) bool {
		t.Errorf("Acquire: %v", k)
		return true
	})
	if acquired.Load() == 0 {
		t.Error("nothing acquired")
	}
	// Every waiter removed its own file, and nobody made one again.
	if left, _ := filepath.Glob(filepath.Join(dir, "*", "wait-*")); len(left) > 0 {
		t.Errorf("waiter files left after every waiter ended: %v", left)
	}
}

// TestFlockCapacityGoneWaiterStaysGone: a waiter that looks at an older
// waiter's file must never make it again once that waiter has removed it
// (between its listing and its open). Made again, the file is unlocked
// until the looker's flock: another could lock it first, take a live
// waiter's file for a dead one's, and leave it behind. One goroutine makes
// an older waiter's file and removes it, over and over, with O_EXCL; while
// another asks first, any EEXIST means first made the file again.
func TestFlockCapacityGoneWaiterStaysGone(t *testing.T) {
	dir := t.TempDir()
	minePath := filepath.Join(dir, "wait-mine")
	if err := os.WriteFile(minePath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	mine, err := os.Stat(minePath)
	if err != nil {
		t.Fatal(err)
	}
	old := mine.ModTime().Add(-time.Hour)
	older := filepath.Join(dir, "wait-older")
	var stop atomic.Bool
	var remade, rounds atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			first(dir, mine)
		}
	})
	wg.Go(func() {
		for !stop.Load() {
			f, err := os.OpenFile(older, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, os.ErrExist) {
				remade.Add(1)
				os.Remove(older)
				continue
			}
			if err != nil {
				t.Error(err)
				return
			}
			unix.Flock(int(f.Fd()), unix.LOCK_EX)
			os.Chtimes(older, old, old)
			os.Remove(older)
			f.Close()
			rounds.Add(1)
		}
	})
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if n := remade.Load(); n > 0 {
		t.Errorf("a gone waiter's file was made again %d times in %d rounds", n, rounds.Load())
	}
	if rounds.Load() == 0 {
		t.Error("no rounds")
	}
}

// ---- capacity through the gateway ----

func TestGatewayCapacity(t *testing.T) {
	for _, limited := range []bool{true, false} {
		t.Run(fmt.Sprintf("limited=%v", limited), func(t *testing.T) {
			started := make(chan string, 8)
			finish := make(chan struct{}, 8)
			var inflight, most atomic.Int32
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					writeJSON(w, modelsJSON)
					return
				}
				n := inflight.Add(1)
				defer inflight.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, chatEvents[0])
				w.(http.Flusher).Flush()
				started <- r.Header.Get("X-Request")
				select {
				case <-finish:
				case <-time.After(10 * time.Second):
				}
				io.WriteString(w, strings.Join(chatEvents[1:], ""))
			})
			maxc := 0
			if limited {
				maxc = 1
			}
			tg := startGateway(t, Options{
				Routes:   map[string]Route{RouteOpenAI: {Upstream: up.url, Server: "local-llm", MaxConcurrent: maxc, Prices: Prices{Free: true}}},
				Capacity: FlockCapacity{Dir: t.TempDir()},
			})
			p := protoByName(t, "chat-stream")
			stream := func(id string, ctx context.Context) <-chan error {
				done := make(chan error, 1)
				go func() {
					req, _ := http.NewRequestWithContext(ctx, "POST", "http://gateway/openai"+p.path, strings.NewReader(p.body))
					req.Header = bearerKey(tg.Placeholder())
					req.Header.Set("X-Request", id)
					resp, err := tg.client.Do(req)
					if err != nil {
						done <- err
						return
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					if err == nil && (resp.StatusCode != 200 || string(b) != p.answer()) {
						err = fmt.Errorf("%s: %d %s", id, resp.StatusCode, b)
					}
					done <- err
				}()
				return done
			}
			expectStart := func(want string) {
				t.Helper()
				select {
				case got := <-started:
					if got != want {
						t.Fatalf("request %s reached the model server, want %s", got, want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("request %s did not reach the model server", want)
				}
			}
			a := stream("a", context.Background())
			expectStart("a")
			b := stream("b", context.Background())
			if !limited {
				expectStart("b") // the control: without a limit both run at once
				finish <- struct{}{}
				finish <- struct{}{}
				if err := errors.Join(<-a, <-b); err != nil {
					t.Fatal(err)
				}
				if most.Load() != 2 {
					t.Errorf("at most %d at once", most.Load())
				}
				return
			}
			select {
			case id := <-started:
				t.Fatalf("request %s reached the model server while its one slot was taken", id)
			case <-time.After(100 * time.Millisecond):
			}
			// A request that gives up while it waits leaves no trace.
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			if err := <-stream("c", ctx); err == nil {
				t.Error("a request cancelled while waiting succeeded")
			}
			cancel()
			// A model list needs no slot.
			resp, err := tg.send("GET", "/openai/v1/models", bearerKey(tg.Placeholder()), "")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("GET models while the slot is taken: %v %v", resp, err)
			}
			resp.Body.Close()

			finish <- struct{}{}
			if err := <-a; err != nil {
				t.Fatal(err)
			}
			expectStart("b")
			finish <- struct{}{}
			if err := <-b; err != nil {
				t.Fatal(err)
			}
			if m := most.Load(); m != 1 {
				t.Errorf("%d requests at the model server at once, max 1", m)
			}
			ev := tg.events.kind("capacity_wait")
			if len(ev) != 1 || ev[0].Data["server"] != "local-llm" || ev[0].Data["max_concurrent"] != 1 {
				t.Fatalf("capacity_wait events %+v", ev)
			}
			if w, _ := time.ParseDuration(ev[0].Data["wait"].(string)); w < 100*time.Millisecond {
				t.Errorf("waited %s", w)
			}
			for _, r := range up.requests() {
				if r.Header.Get("X-Request") == "c" {
					t.Error("the cancelled request reached the model server")
				}
			}
			tg.waitUsage(t, 2)
		})
	}
}
