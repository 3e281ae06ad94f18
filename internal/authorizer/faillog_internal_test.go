package authorizer

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestFailLogSamples: in a storm, one line a kind is written an interval,
// carrying how many it stands for; fail-open and fail-closed are sampled
// apart. On synctest's clock, so the test waits on nothing.
func TestFailLogSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := failLog{every: time.Second}
		var written, skipped int64
		for range 1000 {
			if n, ok := f.take(true); ok {
				written++
				skipped += n
			}
		}
		if written != 1 || skipped != 0 {
			t.Fatalf("1000 fail-opens at one instant: %d lines carrying %d suppressed, want 1 carrying 0", written, skipped)
		}
		if _, ok := f.take(false); !ok {
			t.Errorf("the first fail-closed line was suppressed by the fail-open storm")
		}
		time.Sleep(999 * time.Millisecond) // sleep: virtual, on synctest's clock
		if _, ok := f.take(true); ok {
			t.Errorf("a second line within the interval")
		}
		time.Sleep(time.Millisecond) // sleep: virtual, on synctest's clock
		n, ok := f.take(true)
		if !ok || n != 1000 {
			t.Errorf("after the interval: written %v carrying %d suppressed, want a line carrying 1000", ok, n)
		}
		every := failLog{every: -1}
		for i := range 3 {
			if _, ok := every.take(true); !ok {
				t.Errorf("FailLogInterval < 0: line %d suppressed", i+1)
			}
		}
	})
}
