package authorizer

import (
	"sync/atomic"
	"time"
)

// DefaultFailLogInterval is Options.FailLogInterval's default.
const DefaultFailLogInterval = time.Second

// failLog samples the log lines of decisions Redis failed: when Redis is
// down or slow, every request fails open or closed, and a line each is as
// many lines as requests (a service at 10,000 requests a second would write
// 10,000 WARN lines a second, and pay for them in CPU just when it has
// none). One line a kind is written an interval; it carries, as
// "suppressed", how many lines of that kind were left out since the last.
// The metrics still count every decision (FailOpen, FailClosed).
type failLog struct {
	every time.Duration // 0: DefaultFailLogInterval; < 0: every line
	kinds [2]failKind   // [0] fail-closed, [1] fail-open
}

type failKind struct {
	next    atomic.Int64 // Unix ns before which lines are counted, not written
	skipped atomic.Int64
}

// take reports whether a line of the kind (open or closed) is written now,
// and how many were left out before it.
func (f *failLog) take(open bool) (skipped int64, ok bool) {
	if f.every < 0 {
		return 0, true
	}
	every := f.every
	if every == 0 {
		every = DefaultFailLogInterval
	}
	k := &f.kinds[0]
	if open {
		k = &f.kinds[1]
	}
	now := time.Now().UnixNano()
	next := k.next.Load()
	if now < next || !k.next.CompareAndSwap(next, now+int64(every)) {
		k.skipped.Add(1)
		return 0, false
	}
	return k.skipped.Swap(0), true
}
