package limiter

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestExactUnderConcurrency plays 4 processes (separate clients and
// Limiters) × 32 goroutines against one subject: the bucket must admit
// exactly burst + rate × elapsed, give or take the token being refilled.
func TestExactUnderConcurrency(t *testing.T) {
	const (
		clients    = 4
		goroutines = 32
		burst      = 20
		rate       = 200 // tokens per second
		run        = 2 * time.Second
	)
	bs := []Bucket{{ID: "hot", Limit: rate, Period: time.Second, Burst: burst}}
	timeClient := newClient(t, 1)
	prefix := testPrefix(t, timeClient)
	ls := make([]*Limiter, clients)
	for i := range ls {
		// The deny cache is off: this test is about the script.
		ls[i] = New(newClient(t, goroutines), Options{Prefix: prefix, DenyCacheSize: -1, Timeout: time.Second})
	}
	req := Request{Subject: "hot-subject", Buckets: bs, Cost: 1}

	var admitted, denied, failed atomic.Int64
	// The longest time no call was sent, across every worker: a bucket
	// left alone longer than burst/rate fills past its burst and the
	// excess is rightly lost, which a starved machine (a loaded make
	// test) does; the lower bound holds only without such a gap.
	var lastSent, maxGap atomic.Int64
	t0, i0, i1 := crowd(t, timeClient, ls, goroutines, run, new(atomic.Bool), func(l *Limiter, _ int) {
		now := time.Now().UnixNano()
		if prev := lastSent.Swap(now); prev != 0 && now-prev > maxGap.Load() {
			maxGap.Store(now - prev) // racy max: a rough gauge is enough
		}
		d, err := l.Allow(context.Background(), req)
		switch {
		case err != nil:
			failed.Add(1)
		case d.Allowed:
			admitted.Add(1)
		default:
			denied.Add(1)
		}
	})
	t1 := redisNow(t, timeClient)

	if n := failed.Load(); n > 0 {
		t.Fatalf("%d calls failed", n)
	}
	most := burst + rate*t1.Sub(t0).Seconds()
	least := burst + rate*i1.Sub(i0).Seconds()
	got := admitted.Load()
	t.Logf("admitted %d, denied %d; burst + rate×elapsed = %.2f (outer, %v) / %.2f (inner, %v)",
		got, denied.Load(), most, t1.Sub(t0), least, i1.Sub(i0))
	if float64(got) > most {
		t.Errorf("admitted %d > burst + rate×elapsed = %.2f: over-admitted", got, most)
	}
	// The token being refilled when the run stops is never admitted.
	if gap := time.Duration(maxGap.Load()); gap > time.Duration(burst)*time.Second/rate {
		t.Logf("no call was sent for %v (more than burst/rate): the machine starved the workers, tokens past the burst were rightly lost; the lower bound is not checked", gap)
	} else if float64(got) < least-1 {
		t.Errorf("admitted %d < burst + rate×elapsed - 1 = %.2f: tokens lost", got, least-1)
	}
	if denied.Load() == 0 {
		t.Errorf("no call was denied: the test did not contend")
	}
}
