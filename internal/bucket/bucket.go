// Package bucket turns an applied rule into the limiter bucket that
// enforces it. A bucket's ID names its Redis key, so everything that
// charges, reads or resets a subject's buckets (the authorizer, the admin
// API) builds them here and the keys cannot drift apart.
package bucket

import (
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
)

// For returns the limiter bucket for an applied rule: its id, numbers,
// failure mode and mode, and for a quota its window and anchor.
func For(e *rules.Effective) limiter.Bucket {
	b := limiter.Bucket{
		ID:           e.ID,
		Limit:        e.Limit,
		Period:       e.Period,
		Burst:        e.Burst,
		FailClosed:   e.FailureMode == rules.FailClosed,
		Shadow:       e.Mode == rules.Shadow,
		MinRemaining: e.MinRemaining,
		Durable:      e.Durable,
	}
	if e.Kind == rules.Quota {
		b.Window = Window(rules.Period(e.Period))
		b.Anchor = e.Anchor
	}
	return b
}

// Window returns the limiter window of a quota's period: Day, Week, Month
// or Year; NoWindow for anything else.
func Window(p rules.Period) limiter.Window {
	switch p {
	case rules.Period(rules.Day):
		return limiter.Daily
	case rules.Period(rules.Week):
		return limiter.Weekly
	case rules.Month:
		return limiter.Monthly
	case rules.Period(rules.Year):
		return limiter.Yearly
	}
	return limiter.NoWindow
}
