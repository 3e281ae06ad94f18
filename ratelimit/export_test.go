package ratelimit

import "time"

// SetKeyChecks sets how often a Limiter checks its subject hash key again
// while refused and while accepted, for the tests; the returned func puts
// back the defaults.
func SetKeyChecks(retry, recheck time.Duration) (restore func()) {
	r, c := keyRetry, keyRecheck
	keyRetry, keyRecheck = retry, recheck
	return func() { keyRetry, keyRecheck = r, c }
}
