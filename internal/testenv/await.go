package testenv

import (
	"testing"
	"time"
)

// Await calls cond every interval until it holds and returns how long
// that took; the test fails, naming what, when cond does not hold within.
// It waits on real servers and processes (a publish reaching another
// process, a pool closing a connection, a server starting); a test of
// in-memory parts runs under testing/synctest instead.
func Await(tb testing.TB, within, every time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			tb.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(every) // sleep: the state polled moves in another process
	}
	return time.Since(start)
}
