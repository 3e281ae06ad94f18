package testenv

import (
	"testing"
	"time"
)

// AwaitLift follows a cached denial that something else lifted (a refund,
// a reset, in another process): it calls decide every 5ms until it allows
// and returns when that was, counted from denied (the cached deny's Redis
// call). The test fails when decide allows before minAge, answers a deny
// that is not from the cache, or still denies after within.
func AwaitLift(tb testing.TB, denied time.Time, minAge, within time.Duration, decide func() (allowed, cached bool, desc any)) time.Duration {
	tb.Helper()
	for {
		asked := time.Since(denied)
		allowed, cached, desc := decide()
		if allowed {
			if asked < minAge-10*time.Millisecond {
				tb.Errorf("allowed %v after the cached deny, before its max age %v", asked, minAge)
			}
			return asked
		}
		if !cached || asked > within {
			tb.Fatalf("%v after the deny and its lift = %+v, want the cached deny until %v, then allowed within %v", asked, desc, minAge, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
