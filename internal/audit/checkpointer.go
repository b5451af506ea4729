package audit

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Checkpointer seals a Log every Every entries or every Interval,
// whichever comes first, and once more when it stops.
type Checkpointer struct {
	Log    Log
	Signer Signer
	// Every is the most entries left unsealed (default 100).
	Every int64
	// Interval is the longest an entry stays unsealed (default 1m).
	Interval time.Duration
	Logger   *slog.Logger

	mu      sync.Mutex
	stop    chan struct{} // nil until Start
	done    chan struct{}
	stopped bool
}

func (c *Checkpointer) defaults() {
	if c.Every <= 0 {
		c.Every = 100
	}
	if c.Interval <= 0 {
		c.Interval = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Start begins sealing in the background until Stop. A second Start does
// nothing, nor does a Checkpointer without a Log.
func (c *Checkpointer) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil || c.stopped || c.Log == nil {
		return
	}
	c.defaults()
	c.stop = make(chan struct{})
	c.done = make(chan struct{})
	go c.loop(c.stop, c.done)
}

// Stop ends the background work and seals what is left. Stop before
// Start, and a second Stop, only seal.
func (c *Checkpointer) Stop(ctx context.Context) error {
	c.mu.Lock()
	stop, done := c.stop, c.done
	if stop != nil && !c.stopped {
		close(stop)
	}
	c.stopped = true
	c.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c.Log == nil {
		return nil
	}
	_, _, err := c.Log.Seal(ctx, c.Signer)
	return err
}

func (c *Checkpointer) loop(stop, done chan struct{}) {
	defer close(done)
	tick := min(c.Interval, time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		head, sealed, err := c.Log.Head(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.Logger.Error("audit checkpoint: read the head", "error", err.Error())
			}
			continue
		}
		if head <= sealed || (head-sealed < c.Every && time.Since(last) < c.Interval) {
			continue
		}
		cp, ok, err := c.Log.Seal(ctx, c.Signer)
		switch {
		case err != nil && ctx.Err() == nil:
			c.Logger.Error("audit checkpoint", "error", err.Error())
		case ok:
			last = time.Now()
			c.Logger.Debug("audit checkpoint", "seq", cp.Seq)
		}
	}
}
