// Package cardinality bounds the distinct values a metric's label or
// attribute takes, so that a caller sending endless API ids or rule ids
// cannot grow a metrics backend's series without end. Both observers of
// ratelimit (prommetrics, otelmetrics) use it.
package cardinality

import (
	"sync"
	"sync/atomic"
)

// Set admits the first Max distinct values. The zero value admits none;
// it is safe for concurrent use.
type Set struct {
	Max  int64
	n    atomic.Int64
	seen sync.Map // string → struct{}
}

// Keep returns v when it is one of the first Max distinct values seen,
// else other.
func (s *Set) Keep(v, other string) string {
	if _, ok := s.seen.Load(v); ok {
		return v
	}
	if s.n.Add(1) > s.Max {
		s.n.Add(-1)
		return other
	}
	if _, dup := s.seen.LoadOrStore(v, struct{}{}); dup {
		s.n.Add(-1) // another goroutine kept it first
	}
	return v
}
