package authorizer

import "time"

// Seconds returns d in whole seconds, rounded up: the unit of Retry-After
// and of the authorizer's reset and retryAfter context values. Negative
// durations give 0.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
