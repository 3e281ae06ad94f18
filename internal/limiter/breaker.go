package limiter

import (
	"sync/atomic"
	"time"
)

// breaker is a lock-free circuit breaker: after threshold consecutive
// failures it opens and keeps calls away from Redis for cooldown, then lets
// exactly one probe through (half-open); the probe's outcome closes it or
// opens it again.
type breaker struct {
	threshold int64 // <= 0: never opens
	cooldown  int64 // ns
	onChange  func(from, to BreakerState)

	st        atomic.Int32 // BreakerState
	failures  atomic.Int64 // consecutive
	openUntil atomic.Int64 // Limiter.now() when the cooldown ends
	opened    atomic.Uint64
	closed    atomic.Uint64
}

func (b *breaker) init(threshold int, cooldown time.Duration, onChange func(from, to BreakerState)) {
	b.threshold = int64(threshold)
	b.cooldown = int64(cooldown)
	b.onChange = onChange
}

func (b *breaker) state() BreakerState { return BreakerState(b.st.Load()) }

// move switches from → to when the state still is from, and reports it.
func (b *breaker) move(from, to BreakerState) bool {
	if !b.st.CompareAndSwap(int32(from), int32(to)) {
		return false
	}
	switch to {
	case BreakerOpen:
		b.opened.Add(1)
	case BreakerClosed:
		b.closed.Add(1)
	}
	if b.onChange != nil {
		b.onChange(from, to)
	}
	return true
}

// enter reports whether a call at now may go to Redis, and whether it is
// the half-open probe (whose outcome must be reported to done).
func (b *breaker) enter(now int64) (ok, probe bool) {
	switch BreakerState(b.st.Load()) {
	case BreakerClosed:
		return true, false
	case BreakerOpen:
		if now < b.openUntil.Load() {
			return false, false
		}
		if b.move(BreakerOpen, BreakerHalfOpen) {
			return true, true
		}
	}
	return false, false // half-open: the probe is in flight
}

// done records a call's outcome at now.
func (b *breaker) done(now int64, ok, probe bool) {
	if ok {
		b.failures.Store(0)
		if probe {
			b.move(BreakerHalfOpen, BreakerClosed)
		}
		return
	}
	n := b.failures.Add(1)
	if probe {
		b.openUntil.Store(now + b.cooldown)
		b.move(BreakerHalfOpen, BreakerOpen)
		return
	}
	if b.threshold > 0 && n >= b.threshold && b.st.Load() == int32(BreakerClosed) {
		b.openUntil.Store(now + b.cooldown)
		b.move(BreakerClosed, BreakerOpen)
	}
}
