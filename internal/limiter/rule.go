package limiter

import "github.com/sluicehq/sluice/internal/rules"

// BucketFor returns the bucket that enforces an applied rule: its id,
// numbers, failure mode and mode, and for a quota its window and anchor.
// A bucket's ID names its Redis key, so everything that charges, reads or
// resets a subject's buckets (the authorizer, the admin API) builds them
// here and the keys cannot drift apart.
func BucketFor(e *rules.Effective) Bucket {
	b := Bucket{
		ID:           e.ID,
		Limit:        e.Limit,
		Period:       e.Period,
		Burst:        e.Burst,
		FailClosed:   e.FailureMode == rules.FailClosed,
		Shadow:       e.Mode == rules.Shadow,
		MinRemaining: e.MinRemaining,
		Durable:      e.Durable,
		Global:       e.GlobalKey,
	}
	if e.Blocked() {
		b.Until = e.Expires
	}
	switch e.Kind {
	case rules.Quota:
		b.Window = windowOf(rules.Period(e.Period))
		b.Anchor = e.Anchor
	case rules.Concurrency:
		b.Concurrency = true
	}
	return b
}

// windowOf returns the window of a quota's period: Daily, Weekly, Monthly
// or Yearly; NoWindow for anything else.
func windowOf(p rules.Period) Window {
	switch p {
	case rules.Period(rules.Day):
		return Daily
	case rules.Period(rules.Week):
		return Weekly
	case rules.Month:
		return Monthly
	case rules.Period(rules.Year):
		return Yearly
	}
	return NoWindow
}
