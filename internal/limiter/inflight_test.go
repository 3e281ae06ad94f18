package limiter

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// inflightLimiter is a Limiter on a client of its own to the test Redis,
// which it returns, on prefix ("": one of the test's own), without a deny
// cache unless cache is set.
func inflightLimiter(t *testing.T, prefix string, cache bool) (*Limiter, *redis.Client) {
	t.Helper()
	rdb := newClient(t, 8)
	if prefix == "" {
		prefix = testPrefix(t, rdb)
	}
	o := Options{Prefix: prefix, Timeout: testTimeout, DenyCacheSize: -1}
	if cache {
		o.DenyCacheSize = 0
	}
	return New(rdb, o), rdb
}

func TestInFlightHoldsAndReleases(t *testing.T) {
	// The deny cache is on: an in-flight denial must not be cached.
	l, _ := inflightLimiter(t, "", true)
	ctx := context.Background()
	b := Bucket{ID: "exports", Limit: 2, Period: time.Minute, Concurrency: true}
	req := Request{Subject: "s", Buckets: []Bucket{b}, Cost: 7} // a cost takes one slot all the same

	d1, err1 := l.Allow(ctx, req)
	d2, err2 := l.Allow(ctx, req)
	if err1 != nil || err2 != nil || !d1.Allowed || !d2.Allowed || d1.Slots.Count() != 1 || d2.Slots.Count() != 1 {
		t.Fatalf("two requests under a limit of 2: %+v %v, %+v %v", d1, err1, d2, err2)
	}
	if d2.Remaining != 0 {
		t.Errorf("second request: remaining %d, want 0", d2.Remaining)
	}
	d3, err := l.Allow(ctx, req)
	if err != nil || d3.Allowed || d3.Slots.Held() || d3.RetryAfter != time.Second {
		t.Fatalf("third request = %+v, %v; want a deny holding nothing, retry 1s", d3, err)
	}
	if n, err := l.InFlight(ctx, "s", b); err != nil || n != 2 {
		t.Fatalf("InFlight = %d, %v; want 2", n, err)
	}
	if err := l.Release(ctx, d1.Slots); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, d1.Slots); err != nil { // idempotent
		t.Fatal(err)
	}
	d4, err := l.Allow(ctx, req)
	if err != nil || !d4.Allowed || d4.Cached {
		t.Fatalf("after a release: %+v, %v; want allowed at once (no cached deny)", d4, err)
	}
	if n, _ := l.InFlight(ctx, "s", b); n != 2 {
		t.Errorf("InFlight = %d, want 2", n)
	}
	s := l.Stats()
	if s.Slots != 3 || s.Released != 2 {
		t.Errorf("stats: %d slots, %d released; want 3, 2", s.Slots, s.Released)
	}
}

// TestInFlightAllOrNothing: a request its rate admits but its in-flight
// limit denies consumes nothing, and one its rate denies takes no slot.
func TestInFlightAllOrNothing(t *testing.T) {
	l, _ := inflightLimiter(t, "", false)
	ctx := context.Background()
	rate := Bucket{ID: "rate", Limit: 10, Period: time.Hour}
	quota := Bucket{ID: "quota", Limit: 10, Period: time.Hour, Window: Daily}
	conc := Bucket{ID: "conc", Limit: 1, Period: time.Minute, Concurrency: true}
	all := []Bucket{rate, quota, conc}
	d, err := l.Allow(ctx, Request{Subject: "s", Buckets: all, Cost: 1})
	if err != nil || !d.Allowed || d.Slots.Count() != 1 {
		t.Fatalf("first = %+v, %v", d, err)
	}
	for range 3 {
		if d, err := l.Allow(ctx, Request{Subject: "s", Buckets: all, Cost: 1}); err != nil || d.Allowed || d.Bucket != 2 {
			t.Fatalf("while one is in flight = %+v, %v; want denied by bucket 2", d, err)
		}
	}
	st, err := l.Peek(ctx, "s", all[:2])
	if err != nil || st[0].Remaining != 9 || st[1].Remaining != 9 {
		t.Fatalf("rate and quota after 3 in-flight denials: %+v, %v; want 9 and 9 left", st, err)
	}

	// The rate denies: no slot is taken.
	if err := l.Release(ctx, d.Slots); err != nil {
		t.Fatal(err)
	}
	tight := Bucket{ID: "tight", Limit: 1, Period: time.Hour}
	if d, err := l.Allow(ctx, Request{Subject: "t", Buckets: []Bucket{tight}, Cost: 1}); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if d, err := l.Allow(ctx, Request{Subject: "t", Buckets: []Bucket{tight, conc}, Cost: 1}); err != nil || d.Allowed || d.Slots.Held() {
		t.Fatalf("rate spent = %+v, %v; want a deny holding nothing", d, err)
	}
	if n, _ := l.InFlight(ctx, "t", conc); n != 0 {
		t.Errorf("a request its rate denied holds %d slots", n)
	}
}

// TestInFlightShadow: a shadow in-flight limit never denies; over it a
// request is flagged and takes no slot.
func TestInFlightShadow(t *testing.T) {
	l, _ := inflightLimiter(t, "", false)
	ctx := context.Background()
	b := Bucket{ID: "try", Limit: 1, Period: time.Minute, Concurrency: true, Shadow: true}
	d1, _ := l.Allow(ctx, Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1})
	d2, err := l.Allow(ctx, Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1})
	if !d1.Allowed || d1.Slots.Count() != 1 || d1.ShadowDenied != 0 {
		t.Fatalf("first = %+v", d1)
	}
	if err != nil || !d2.Allowed || d2.ShadowDenied != 1 || d2.Slots.Held() {
		t.Fatalf("second = %+v, %v; want allowed, flagged, holding nothing", d2, err)
	}
	if n, _ := l.InFlight(ctx, "s", b); n != 1 {
		t.Errorf("in flight %d, want 1", n)
	}
}

// TestInFlightResent: a call go-redis sends twice (a connection broken
// after Redis ran it) holds one slot, not two.
func TestInFlightResent(t *testing.T) {
	rdb := newClient(t, 4)
	rdb.AddHook(twice{})
	l := New(rdb, Options{Prefix: testPrefix(t, rdb), Timeout: testTimeout, DenyCacheSize: -1})
	ctx := context.Background()
	b := Bucket{ID: "x", Limit: 2, Period: time.Minute, Concurrency: true}
	for i := range 2 {
		d, err := l.Allow(ctx, Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1})
		if err != nil || !d.Allowed {
			t.Fatalf("request %d sent twice = %+v, %v; want allowed (its copy finds its own slot)", i, d, err)
		}
	}
	if n, _ := l.InFlight(ctx, "s", b); n != 2 {
		t.Errorf("two requests sent twice hold %d slots, want 2", n)
	}
}

// TestInFlightTTL: a slot never released frees itself when its TTL ends,
// and not before (Redis's clock; real time is what is tested).
func TestInFlightTTL(t *testing.T) {
	l, c := inflightLimiter(t, "", false)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	b := Bucket{ID: "ttl", Limit: 1, Period: ttl, Concurrency: true}
	d, err := l.Allow(ctx, Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1})
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	taken := time.Now()
	freed := testenv.Await(t, 5*time.Second, 5*time.Millisecond, "the slot frees at its TTL", func() bool {
		d, err := l.Allow(ctx, Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1})
		return err == nil && d.Allowed
	})
	if held := time.Since(taken); held < ttl-5*time.Millisecond {
		t.Errorf("the slot freed after %v, before its TTL %v", held, ttl)
	}
	t.Logf("slot free %v after it was taken (TTL %v, polled every 5ms)", freed, ttl)
	key := bucketKey(l.prefix, "s", b)
	if pt := c.PTTL(ctx, key).Val(); pt <= 0 || pt > ttl+2*time.Millisecond {
		t.Errorf("the key's TTL is %v, want that of its last slot (≤ %v)", pt, ttl)
	}
}

// TestInFlightExact is the in-flight checker: 64 callers in two processes
// (this test's and a child it runs) hold work for random times against one
// subject's limit of N. Each holder counts itself in a Redis counter after
// it is admitted and out before it releases: no INCR may ever return more
// than N. Every slot freed must be reused: the test measures the time from
// a release to the next admission while callers wait.
func TestInFlightExact(t *testing.T) {
	if os.Getenv("SLUICE_INFLIGHT_CHILD") != "" {
		return // run by inflightChild
	}
	const (
		limit   = 5
		callers = 32 // per process
		run     = 2 * time.Second
	)
	c := newClient(t, 1)
	prefix := testPrefix(t, c)
	ctx := context.Background()

	cmd := exec.Command(os.Args[0], "-test.run=^TestInFlightChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_INFLIGHT_CHILD="+prefix, "SLUICE_INFLIGHT_RUN="+run.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mine := holdWork(t, prefix, limit, callers, run)
	var child workStats
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), "inflight: "); ok {
			child = parseWorkStats(t, f)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child process: %v", err)
	}
	if child.admitted == 0 {
		t.Fatal("the child process reported nothing")
	}
	maxSeen := max(mine.maxSeen, child.maxSeen)
	total := mine.admitted + child.admitted
	t.Logf("%d admitted in %v across 2 processes × %d callers, limit %d; most seen in flight %d; reuse p50 %v p99 %v (%d samples)",
		total, run, callers, limit, maxSeen, mine.p(50), mine.p(99), len(mine.reuse))
	if maxSeen > limit {
		t.Errorf("over-admission: %d in flight at once, limit %d", maxSeen, limit)
	}
	// A slot lost (never freed) would cut the limit for the rest of the
	// run: the last quarter must still see all of them in use.
	if late := max(mine.lateMax, child.lateMax); late < limit {
		t.Errorf("in the last quarter of the run at most %d in flight, limit %d: a slot was lost", late, limit)
	}
	if n, _ := c.Get(ctx, prefix+"active").Int64(); n != 0 {
		t.Errorf("%d holders still counted at the end", n)
	}
	l := New(c, Options{Prefix: prefix, Timeout: testTimeout})
	if n, err := l.InFlight(ctx, "tenant", inflightBucket(limit)); err != nil || n != 0 {
		t.Errorf("%d slots held after every holder released (%v)", n, err)
	}
}

// TestInFlightChild is TestInFlightExact's second process.
func TestInFlightChild(t *testing.T) {
	prefix := os.Getenv("SLUICE_INFLIGHT_CHILD")
	if prefix == "" {
		t.Skip("run by TestInFlightExact")
	}
	run, _ := time.ParseDuration(os.Getenv("SLUICE_INFLIGHT_RUN"))
	s := holdWork(t, prefix, 5, 32, run)
	fmt.Printf("inflight: %d %d %d\n", s.admitted, s.maxSeen, s.lateMax)
}

func inflightBucket(limit int64) Bucket {
	return Bucket{ID: "exports", Limit: limit, Period: 30 * time.Second, Concurrency: true}
}

type workStats struct {
	admitted, maxSeen int64
	lateMax           int64 // maxSeen in the run's last quarter
	reuse             []time.Duration
}

func (s workStats) p(q int) time.Duration {
	if len(s.reuse) == 0 {
		return 0
	}
	r := append([]time.Duration(nil), s.reuse...)
	slices.Sort(r)
	return r[min(len(r)-1, len(r)*q/100)]
}

func parseWorkStats(t *testing.T, f string) workStats {
	var s workStats
	if _, err := fmt.Sscanf(f, "%d %d %d", &s.admitted, &s.maxSeen, &s.lateMax); err != nil {
		t.Fatalf("child reported %q: %v", f, err)
	}
	return s
}

// holdWork runs callers goroutines over one Limiter (a process's), that ask for a slot without pause, hold it 1-10 ms and release it,
// for run. It returns what they were admitted, the most in flight any
// INCR saw, and the times from a release to the next admission.
func holdWork(t *testing.T, prefix string, limit int64, callers int, run time.Duration) workStats {
	t.Helper()
	ctx := context.Background()
	counter := newClient(t, callers)
	b := inflightBucket(limit)
	var (
		admitted, maxSeen atomic.Int64
		lateMax           atomic.Int64
		lastRelease       atomic.Int64 // ns since start
		mu                sync.Mutex
		reuse             []time.Duration
		wg                sync.WaitGroup
	)
	start := time.Now()
	l := New(newClient(t, callers), Options{Prefix: prefix, Timeout: time.Second, DenyCacheSize: -1})
	for range callers {
		wg.Go(func() {
			for time.Since(start) < run {
				d, err := l.Allow(ctx, Request{Subject: "tenant", Buckets: []Bucket{b}, Cost: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if !d.Allowed {
					// sleep: a waiting caller's back-off (real time), so
					// that 64 callers leave Redis time for the releases.
					time.Sleep(500*time.Microsecond + rand.N(time.Millisecond))
					continue
				}
				if r := lastRelease.Load(); r > 0 {
					mu.Lock()
					reuse = append(reuse, time.Since(start)-time.Duration(r))
					mu.Unlock()
				}
				n := counter.Incr(ctx, prefix+"active").Val()
				raise(&maxSeen, n)
				if time.Since(start) > run*3/4 {
					raise(&lateMax, n)
				}
				admitted.Add(1)
				// sleep: the work a slot is held for, in real time.
				time.Sleep(time.Millisecond + rand.N(9*time.Millisecond))
				counter.Decr(ctx, prefix+"active")
				lastRelease.Store(int64(time.Since(start)))
				if err := l.Release(ctx, d.Slots); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	return workStats{admitted: admitted.Load(), maxSeen: maxSeen.Load(), lateMax: lateMax.Load(), reuse: reuse}
}

// raise sets v to n when n is larger.
func raise(v *atomic.Int64, n int64) {
	for {
		m := v.Load()
		if n <= m || v.CompareAndSwap(m, n) {
			return
		}
	}
}

// TestInFlightHolderKilled: a process holding a slot is SIGKILLed
// mid-request; its slot frees itself at the TTL, not before, and the
// time from the kill to the next admission is measured.
func TestInFlightHolderKilled(t *testing.T) {
	if os.Getenv("SLUICE_INFLIGHT_HOLDER") != "" {
		return // run by TestInFlightHolder
	}
	c := newClient(t, 1)
	prefix := testPrefix(t, c)
	const ttl = time.Second
	cmd := exec.Command(os.Args[0], "-test.run=^TestInFlightHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_INFLIGHT_HOLDER="+prefix)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // killed below already
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "holding" {
	}
	taken := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	l, _ := inflightLimiter(t, prefix, false)
	b := Bucket{ID: "killed", Limit: 1, Period: ttl, Concurrency: true}
	if d, _ := l.Allow(context.Background(), Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1}); d.Allowed {
		t.Fatal("the killed holder's slot was free at once: its request was never counted")
	}
	testenv.Await(t, 5*time.Second, 5*time.Millisecond, "the killed holder's slot frees", func() bool {
		d, err := l.Allow(context.Background(), Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1})
		return err == nil && d.Allowed
	})
	held := time.Since(taken)
	if held < ttl-10*time.Millisecond || held > ttl+500*time.Millisecond {
		t.Errorf("the slot was held %v after it was taken, want its TTL %v", held, ttl)
	}
	t.Logf("crash to free: %v after the SIGKILL, %v after the slot was taken (TTL %v)", time.Since(killed), held, ttl)
}

// TestInFlightHolder is TestInFlightHolderKilled's holder: it takes the
// slot, says so and waits to be killed.
func TestInFlightHolder(t *testing.T) {
	prefix := os.Getenv("SLUICE_INFLIGHT_HOLDER")
	if prefix == "" {
		t.Skip("run by TestInFlightHolderKilled")
	}
	l := New(newClient(t, 1), Options{Prefix: prefix, Timeout: time.Second, DenyCacheSize: -1})
	b := Bucket{ID: "killed", Limit: 1, Period: time.Second, Concurrency: true}
	d, err := l.Allow(context.Background(), Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1})
	if err != nil || !d.Allowed {
		t.Fatalf("holder: %+v %v", d, err)
	}
	fmt.Println("holding")
	time.Sleep(time.Minute) // sleep: the work, until the parent's SIGKILL
}

// TestInFlightToken: slots travel as a token and are released from it;
// a token of another prefix, or a forged one, is refused.
func TestInFlightToken(t *testing.T) {
	l, c := inflightLimiter(t, "", false)
	ctx := context.Background()
	b := Bucket{ID: "tok", Limit: 1, Period: time.Minute, Concurrency: true}
	d, err := l.Allow(ctx, Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1})
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	s, err := l.ParseToken(d.Slots.Token())
	if err != nil || s.Count() != 1 {
		t.Fatalf("ParseToken(%q) = %d slots, %v", d.Slots.Token(), s.Count(), err)
	}
	if err := l.Release(ctx, s); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.InFlight(ctx, "s", b); n != 0 {
		t.Errorf("released by token: %d in flight", n)
	}
	other := New(c, Options{Prefix: "other:"})
	for _, tok := range []string{"", "s1.", "s1.zz.aa", d.Slots.Token() + "x", "s2" + d.Slots.Token()[2:]} {
		if _, err := l.ParseToken(tok); err == nil {
			t.Errorf("ParseToken(%q) passed", tok)
		}
	}
	if _, err := other.ParseToken(d.Slots.Token()); err == nil {
		t.Error("another prefix's Limiter took the token")
	}
}
