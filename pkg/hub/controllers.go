package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/kubeferry/ferry/pkg/hub/controller"
)

// controllers runs the hub's controller manager (controller.Run) for as
// long as the server runs, starting it again with backoff (1 s to 1 min)
// whenever it stops, and answers the readyz check "ferry-hub-controllers":
// a hub whose controllers are not running is not ready, as no Migration,
// Backup or Restore would ever run on it.
type controllers struct {
	opts controller.Options

	mu       sync.Mutex
	running  bool
	lastErr  error
	stop     context.CancelFunc
	stopping bool
	done     chan struct{} // closed when run returns
	quit     chan struct{} // closed by shutdown
}

// run supervises the manager until ctx is done or shutdown is called. A
// manager that ran a minute or more is started again after a second;
// one that stops sooner waits longer each time, up to a minute.
func (c *controllers) run(ctx context.Context) {
	defer close(c.done)
	newBackoff := func() wait.Backoff { return wait.Backoff{Duration: time.Second, Factor: 2, Steps: 7, Cap: time.Minute} }
	backoff := newBackoff()
	for ctx.Err() == nil {
		if !c.awaitRuns(ctx) {
			return
		}
		runCtx, cancel := context.WithCancel(ctx)
		c.mu.Lock()
		if c.stopping {
			c.mu.Unlock()
			cancel()
			return
		}
		c.stop = cancel
		c.mu.Unlock()
		opts := c.opts
		var started atomic.Int64 // unix nanoseconds
		opts.OnStarted = func() {
			started.Store(time.Now().UnixNano())
			c.mu.Lock()
			c.running, c.lastErr = true, nil
			c.mu.Unlock()
		}
		err := controller.Run(runCtx, opts)
		cancel()
		c.mu.Lock()
		stopping := c.stopping
		c.mu.Unlock()
		if ctx.Err() != nil || stopping {
			return
		}
		if err == nil {
			err = errors.New("the controller manager stopped")
		}
		c.mu.Lock()
		c.running, c.lastErr = false, err
		c.mu.Unlock()
		if at := started.Load(); at != 0 && time.Since(time.Unix(0, at)) >= time.Minute {
			backoff = newBackoff()
		}
		delay := backoff.Step()
		if c.opts.Log != nil {
			c.opts.Log.Error("hub controllers stopped; starting them again", "error", err, "in", delay)
		}
		select {
		case <-ctx.Done():
		case <-c.quit:
			return
		case <-time.After(delay):
		}
	}
}

// awaitRuns waits until the runs of a stopped manager have ended (their
// context is cancelled), saying so every 30 s; false if the controllers
// stop meanwhile.
func (c *controllers) awaitRuns(ctx context.Context) bool {
	if c.opts.Runs == nil {
		return true
	}
	ended := c.opts.Runs.Idle()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ended:
			return true
		case <-ctx.Done():
			return false
		case <-c.quit:
			return false
		case <-tick.C:
			if c.opts.Log != nil {
				c.opts.Log.Error("hub controllers: waiting for the runs of the stopped controller manager to end before starting them again")
			}
		}
	}
}

// shutdown stops the controllers for good and waits until they have
// stopped (a run in progress is cancelled), so that the server stops
// serving only after them; a no-op if they never started.
func (c *controllers) shutdown(started bool) {
	c.mu.Lock()
	if !c.stopping {
		close(c.quit)
	}
	c.stopping = true
	if c.stop != nil {
		c.stop()
	}
	c.mu.Unlock()
	if started {
		<-c.done
	}
}

// stopManager stops the running manager (which run then starts again).
func (c *controllers) stopManager() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		c.stop()
	}
}

// check is the readyz check.
func (c *controllers) check() healthz.HealthChecker {
	return healthz.NamedCheck("ferry-hub-controllers", func(*http.Request) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case c.running:
			return nil
		case c.lastErr != nil:
			return fmt.Errorf("the hub's controllers are not running: %w", c.lastErr)
		}
		return errors.New("the hub's controllers have not started")
	})
}
