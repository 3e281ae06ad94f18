package limiter

import (
	"context"
	"sync/atomic"
	"time"
)

// callCtx is the per-call timeout context, pooled so that a decision does not
// pay context.WithTimeout's allocations (a timer, a context, a channel) on
// every call. Its deadline is the earlier of the parent's and now+timeout;
// go-redis applies it to the socket (ContextTimeoutEnabled) and its Done
// channel, closed by a reusable timer, ends pool and dial waits.
//
// go-redis only uses a call's context during the call (its background dials
// run on their own contexts), so the Limiter may re-arm it for the next
// call once this one has returned.
//
// Unlike context.WithTimeout it does not watch the parent's Done: a parent
// cancelled before its deadline is seen by Err at once but only ends a call
// already blocked in Redis at the call's own deadline, at most the Limiter's
// Timeout later.
type callCtx struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	timer    *time.Timer
	fired    atomic.Bool
}

// arm starts a call under parent with timeout.
func (c *callCtx) arm(parent context.Context, timeout time.Duration) {
	c.parent = parent
	now := time.Now()
	c.deadline = now.Add(timeout)
	if d, ok := parent.Deadline(); ok && d.Before(c.deadline) {
		c.deadline = d
	}
	wait := c.deadline.Sub(now)
	if c.timer == nil {
		c.done = make(chan struct{})
		c.timer = time.AfterFunc(wait, c.fire)
		return
	}
	c.timer.Reset(wait)
}

// disarm ends the call and reports whether c may be reused: not when its
// timer fired (or is firing), which closed done for good.
func (c *callCtx) disarm() bool {
	c.parent = nil
	return c.timer.Stop()
}

func (c *callCtx) fire() {
	c.fired.Store(true)
	close(c.done)
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *callCtx) Done() <-chan struct{}       { return c.done }
func (c *callCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *callCtx) Err() error {
	if c.fired.Load() {
		return context.DeadlineExceeded
	}
	return c.parent.Err()
}
