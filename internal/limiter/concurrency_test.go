package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

	var calls tally
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
		calls.allow(l, req)
	})
	t1 := redisNow(t, timeClient)

	if n := calls.failed.Load(); n > 0 {
		t.Fatalf("%d calls failed", n)
	}
	most := burst + rate*t1.Sub(t0).Seconds()
	least := burst + rate*i1.Sub(i0).Seconds()
	got := calls.admitted.Load()
	t.Logf("admitted %d, denied %d; burst + rate×elapsed = %.2f (outer, %v) / %.2f (inner, %v)",
		got, calls.denied.Load(), most, t1.Sub(t0), least, i1.Sub(i0))
	if float64(got) > most {
		t.Errorf("admitted %d > burst + rate×elapsed = %.2f: over-admitted", got, most)
	}
	// The token being refilled when the run stops is never admitted.
	if gap := time.Duration(maxGap.Load()); gap > time.Duration(burst)*time.Second/rate {
		t.Logf("no call was sent for %v (more than burst/rate): the machine starved the workers, tokens past the burst were rightly lost; the lower bound is not checked", gap)
	} else if float64(got) < least-1 {
		t.Errorf("admitted %d < burst + rate×elapsed - 1 = %.2f: tokens lost", got, least-1)
	}
	if calls.denied.Load() == 0 {
		t.Errorf("no call was denied: the test did not contend")
	}
}

// crowd runs goroutines workers on each of ls for run, real time (the
// refill is what the bounds count), each calling call(l, n), n its calls
// so far, until stop is set (by crowd, once run is over). Each connects
// first: a bucket starts full, so refill during a slow start would be
// lost. It returns two brackets of timeClient's Redis TIME: the outer one
// starts at t0 and ends at the caller's next reading, holding every call;
// the inner one, [i0, i1], lies within the calls (i0 after a first call
// returned, i1 while every worker still calls).
func crowd(t *testing.T, timeClient redis.UniversalClient, ls []*Limiter, goroutines int, run time.Duration, stop *atomic.Bool, call func(l *Limiter, n int)) (t0, i0, i1 time.Time) {
	t.Helper()
	var first atomic.Bool
	firstDone, start := make(chan struct{}), make(chan struct{})
	var wg, ready sync.WaitGroup
	for _, l := range ls {
		for range goroutines {
			wg.Add(1)
			ready.Add(1)
			go func() {
				defer wg.Done()
				if err := l.rdb.(*redis.Client).Ping(context.Background()).Err(); err != nil {
					t.Error(err)
				}
				ready.Done()
				<-start
				for n := 0; !stop.Load(); n++ {
					call(l, n)
					if first.CompareAndSwap(false, true) {
						close(firstDone)
					}
				}
			}()
		}
	}
	ready.Wait()
	t0 = redisNow(t, timeClient)
	close(start)
	<-firstDone
	i0 = redisNow(t, timeClient)
	time.Sleep(run) // sleep: the run is real time on Redis TIME, the refill the bound counts
	i1 = redisNow(t, timeClient)
	stop.Store(true)
	wg.Wait()
	return t0, i0, i1
}

// tally counts decisions: admitted, denied, and calls that failed.
type tally struct{ admitted, denied, failed atomic.Int64 }

// allow sends req to l and counts its decision.
func (n *tally) allow(l *Limiter, req Request) {
	d, err := l.Allow(context.Background(), req)
	switch {
	case err != nil:
		n.failed.Add(1)
	case d.Allowed:
		n.admitted.Add(1)
	default:
		n.denied.Add(1)
	}
}
