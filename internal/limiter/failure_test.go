package limiter

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// deadClient returns a client of an address where nothing listens.
func deadClient(t testing.TB) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// silentClient returns a client of a server that accepts connections and
// never answers.
func silentClient(t testing.TB) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: true, PoolSize: 4})
	t.Cleanup(func() {
		_ = c.Close()
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return c
}

// transitions records breaker changes.
type transitions struct {
	mu  sync.Mutex
	got []string
}

func (tr *transitions) record(from, to BreakerState) {
	tr.mu.Lock()
	tr.got = append(tr.got, from.String()+"→"+to.String())
	tr.mu.Unlock()
}

func (tr *transitions) list() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.got...)
}

const (
	failTimeout = 25 * time.Millisecond
	// slack is what a decision may take beyond the timeout: a few ms, more
	// under -race on two cores shared with a busy build.
	slack = 10 * time.Millisecond
	// outlier is what one descheduled decision may take beyond the
	// timeout. A client without ContextTimeoutEnabled would take seconds.
	outlier = 100 * time.Millisecond
)

// latencies collects how long decisions took; check fails the test when
// the median one took longer than the timeout plus slack or any one longer
// than the timeout plus outlier.
type latencies []time.Duration

func (ls *latencies) check(t *testing.T) {
	t.Helper()
	s := slices.Clone(*ls)
	if len(s) == 0 {
		return
	}
	slices.Sort(s)
	t.Logf("%d decisions: median %v, max %v", len(s), s[len(s)/2], s[len(s)-1])
	if med := s[len(s)/2]; med > failTimeout+slack {
		t.Errorf("median decision took %v, want <= %v", med, failTimeout+slack)
	}
	if worst := s[len(s)-1]; worst > failTimeout+outlier {
		t.Errorf("slowest decision took %v, want <= %v", worst, failTimeout+outlier)
	}
}

var (
	openBucket   = Bucket{ID: "o", Limit: 10, Period: time.Second}
	closedBucket = Bucket{ID: "c", Limit: 10, Period: time.Second, FailClosed: true}
)

// timedAllow calls Allow and records how long it took.
func timedAllow(t *testing.T, ls *latencies, l *Limiter, req Request) (Decision, time.Duration, error) {
	t.Helper()
	start := time.Now()
	d, err := l.Allow(context.Background(), req)
	took := time.Since(start)
	*ls = append(*ls, took)
	return d, took, err
}

func TestStalledRedisFailsOpenAndBreaks(t *testing.T) {
	var lat latencies
	defer lat.check(t)
	var tr transitions
	l := New(silentClient(t), Options{
		Timeout: failTimeout, BreakerThreshold: 3, BreakerCooldown: 150 * time.Millisecond,
		OnBreakerChange: tr.record,
	})
	clock := injectClock(l)
	open := Request{Subject: "s", Buckets: []Bucket{openBucket}, Cost: 1}
	closed := Request{Subject: "s", Buckets: []Bucket{openBucket, closedBucket}, Cost: 1}

	// Three timeouts: fail open, then fail closed, then open again.
	for i, req := range []Request{open, closed, open} {
		d, took, err := timedAllow(t, &lat, l, req)
		if err == nil || errors.Is(err, ErrBreakerOpen) {
			t.Errorf("call %d: err = %v, want a Redis timeout", i, err)
		}
		if took < failTimeout-2*time.Millisecond {
			t.Errorf("call %d took %v: it did not wait for the timeout", i, took)
		}
		wantOpen := req.Buckets[len(req.Buckets)-1] == openBucket
		if d.Allowed != wantOpen || d.FailOpen != wantOpen {
			t.Errorf("call %d: Allow() = %+v, want Allowed = FailOpen = %v", i, d, wantOpen)
		}
	}
	// The breaker is open: no wait, no Redis.
	for range 10 {
		d, took, err := timedAllow(t, &lat, l, open)
		if !errors.Is(err, ErrBreakerOpen) || !d.Allowed || !d.FailOpen || took > 5*time.Millisecond {
			t.Errorf("Allow(breaker open) = %+v, %v in %v, want fail-open, ErrBreakerOpen, at once", d, err, took)
		}
	}
	d, _, err := timedAllow(t, &lat, l, closed)
	if !errors.Is(err, ErrBreakerOpen) || d.Allowed || d.Bucket != 1 {
		t.Errorf("Allow(breaker open, fail closed) = %+v, %v, want a deny by bucket 1", d, err)
	}
	// After the cooldown (the Limiter's clock moved past it, no wait) one
	// probe goes through, fails, and reopens it.
	clock.advance(160 * time.Millisecond)
	if _, _, err := timedAllow(t, &lat, l, open); err == nil || errors.Is(err, ErrBreakerOpen) {
		t.Errorf("probe: err = %v, want a Redis timeout", err)
	}
	want := []string{"closed→open", "open→half-open", "half-open→open"}
	if diff := cmp.Diff(want, tr.list()); diff != "" {
		t.Errorf("breaker transitions (-want +got):\n%s", diff)
	}
	s := l.Stats()
	wantStats := Stats{
		Calls: 15, Allowed: 13, Denied: 2, RedisCalls: 4, Errors: 4, FailOpen: 13, FailClosed: 2,
		Skipped: 11, Breaker: BreakerOpen, BreakerOpened: 2,
	}
	if diff := cmp.Diff(wantStats, s); diff != "" {
		t.Errorf("Stats() (-want +got):\n%s", diff)
	}
}

func TestUnreachableRedisFailsFast(t *testing.T) {
	var lat latencies
	defer lat.check(t)
	l := New(deadClient(t), Options{Timeout: failTimeout, BreakerThreshold: -1})
	for range 20 {
		d, _, err := timedAllow(t, &lat, l, Request{Subject: "s", Buckets: []Bucket{openBucket}, Cost: 1})
		if err == nil || !d.Allowed || !d.FailOpen {
			t.Fatalf("Allow(unreachable) = %+v, %v, want fail-open and an error", d, err)
		}
	}
	if s := l.Stats(); s.Breaker != BreakerClosed || s.FailOpen != 20 || s.Errors != 20 {
		t.Errorf("Stats() = %+v, want 20 fail-open errors and a disabled breaker", s)
	}
}

// TestStalledRealRedisRecovers stalls a private Redis (not the shared test
// one, whose other users would stall too) with DEBUG SLEEP from another
// client: decisions keep their timeout, the breaker opens, and closes again
// through a probe once Redis answers.
func TestStalledRealRedisRecovers(t *testing.T) {
	var lat latencies
	defer lat.check(t)
	addr := testenv.StartRedis(t).Addr
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: 8})
	t.Cleanup(func() { _ = c.Close() })
	var tr transitions
	l := New(c, Options{
		Prefix: testPrefix(t, c), Timeout: failTimeout, BreakerThreshold: 3,
		BreakerCooldown: 100 * time.Millisecond, OnBreakerChange: tr.record,
	})
	req := Request{Subject: "s", Buckets: []Bucket{openBucket}, Cost: 1}
	if d, err := l.Allow(context.Background(), req); err != nil || !d.Allowed || d.FailOpen {
		t.Fatalf("Allow before the stall = %+v, %v, want allowed by Redis", d, err)
	}

	sleeper := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = sleeper.Close() })
	done := make(chan error, 1)
	go func() { done <- sleeper.Do(context.Background(), "DEBUG", "SLEEP", "0.4").Err() }()
	// DEBUG SLEEP reached Redis once a PING of a third client times out
	// (50ms: an eighth of the stall, far beyond a PING's time otherwise).
	probe := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = probe.Close() })
	testenv.Await(t, 2*time.Second, time.Millisecond, "Redis stalled by DEBUG SLEEP", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return probe.Ping(ctx).Err() != nil
	})

	var failOpen int
	testenv.Await(t, 5*time.Second, 5*time.Millisecond, "Redis answering again after the stall", func() bool {
		d, _, err := timedAllow(t, &lat, l, req)
		if err == nil && !d.FailOpen {
			return true
		}
		if !d.Allowed || !d.FailOpen {
			t.Fatalf("Allow during the stall = %+v, %v, want fail-open", d, err)
		}
		failOpen++
		return false
	})
	if err := <-done; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	if failOpen < 3 {
		t.Errorf("%d fail-open decisions during a 400ms stall, want at least 3", failOpen)
	}
	got := tr.list()
	if len(got) < 3 || got[0] != "closed→open" || got[len(got)-1] != "half-open→closed" {
		t.Errorf("breaker transitions = %q, want closed→open … half-open→closed", got)
	}
	s := l.Stats()
	if s.Breaker != BreakerClosed || s.BreakerOpened == 0 || s.BreakerClosed != 1 || s.FailOpen != uint64(failOpen) || s.Skipped == 0 {
		t.Errorf("Stats() = %+v, want a closed breaker that opened, %d fail-open, skipped calls", s, failOpen)
	}
}
