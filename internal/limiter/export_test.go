package limiter

import (
	"sync/atomic"
	"time"
)

// Test hooks into the Limiter's in-process state.

// WaitGlobalRefills waits for the background refills of global pools
// (refillAsync) that calls of l have started. Call it while no other
// goroutine calls l: a refill started during the wait may be missed.
func (l *Limiter) WaitGlobalRefills() {
	if l.global != nil {
		l.global.bg.Wait()
	}
}

// testClock is a Limiter's clock (Limiter.now: the deny cache, the
// breaker, the leases) that a test moves ahead: real time since New plus
// what advance added. Redis TIME, the scripts' clock, does not move.
type testClock struct{ skew atomic.Int64 }

// injectClock gives l a testClock. Call it before l is used; the clock
// may then be advanced while l is in use.
func injectClock(l *Limiter) *testClock {
	c := &testClock{}
	real := l.now
	l.now = func() int64 { return real() + c.skew.Load() }
	return c
}

// advance moves the clock d ahead, as if d had passed, without waiting.
func (c *testClock) advance(d time.Duration) { c.skew.Add(int64(d)) }
