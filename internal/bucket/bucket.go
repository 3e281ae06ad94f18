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
// failure mode and mode.
func For(e *rules.Effective) limiter.Bucket {
	return limiter.Bucket{
		ID:         e.ID,
		Limit:      e.Limit,
		Period:     e.Period,
		Burst:      e.Burst,
		FailClosed: e.FailureMode == rules.FailClosed,
		Shadow:     e.Mode == rules.Shadow,
	}
}
