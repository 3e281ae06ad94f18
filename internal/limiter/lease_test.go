package limiter

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// newLeasing returns a Limiter with leases on prefix, closed (its leases
// given back) when the test ends.
func newLeasing(t testing.TB, c redis.UniversalClient, prefix string, o Options) *Limiter {
	t.Helper()
	o.Prefix = prefix
	if o.LeaseMax == 0 {
		o.LeaseMax = 64
	}
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	l := New(c, o)
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// TestLeaseReturnScript runs lease_return.lua against buckets charged by
// charge.lua: tokens go back, never above full, and nothing goes back to a
// bucket whose stored numbers are not the lease's.
func TestLeaseReturnScript(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	prefix := testPrefix(t, c)
	ctx := context.Background()
	l := New(c, Options{Prefix: prefix, DenyCacheSize: -1, Timeout: time.Second})
	// An hour-long period: refill is a token per 36s, nothing during a test.
	a := Bucket{ID: "a", Limit: 100, Period: time.Hour}
	b := Bucket{ID: "b", Limit: 50, Period: time.Hour, Burst: 80}

	tests := []struct {
		name    string
		charge  int64 // charged first, with the buckets below
		prepare func(key func(id string) string)
		give    []Bucket // the lease's numbers
		n       int64
		want    []int64 // tokens each bucket took back
		left    []int64 // Peek's remaining afterwards, with charged numbers
	}{
		{name: "part of what was used", charge: 30, give: []Bucket{a}, n: 10, want: []int64{10}, left: []int64{80}},
		{name: "never above full", charge: 5, give: []Bucket{a}, n: 12, want: []int64{5}, left: []int64{100}},
		{name: "all of what was used", charge: 7, give: []Bucket{a}, n: 7, want: []int64{7}, left: []int64{100}},
		{name: "missing key is full", give: []Bucket{a}, n: 3, want: []int64{0}, left: []int64{100}},
		{name: "two buckets", charge: 20, give: []Bucket{a, b}, n: 15, want: []int64{15, 15}, left: []int64{95, 75}},
		{
			name: "numbers changed: nothing back", charge: 30,
			give: []Bucket{{ID: "a", Limit: 200, Period: time.Hour}}, n: 10, want: []int64{0}, left: []int64{70},
		},
		{
			name: "burst changed: nothing back", charge: 30,
			give: []Bucket{{ID: "a", Limit: 100, Period: time.Hour, Burst: 150}}, n: 10, want: []int64{0}, left: []int64{70},
		},
		{
			name: "one bucket changed, the other takes its tokens", charge: 20,
			give: []Bucket{a, {ID: "b", Limit: 60, Period: time.Hour, Burst: 80}}, n: 5, want: []int64{5, 0}, left: []int64{85, 60},
		},
		{
			name: "previous version's form: nothing back", charge: 30,
			prepare: func(key func(string) string) {
				// "<tat>" alone, 30 tokens used at 36s a token.
				now := redisNow(t, c)
				tat := float64(now.Sub(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()) + 30*36e6
				if err := c.Set(ctx, key("a"), fmt.Sprintf("%.17g", tat), time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
			},
			give: []Bucket{a}, n: 10, want: []int64{0}, left: []int64{70},
		},
		{name: "blocked bucket", charge: 0, give: []Bucket{{ID: "a", Limit: 0, Period: time.Hour, Burst: 1}}, n: 5, want: []int64{0}, left: []int64{100}},
	}
	for i, tt := range tests {
		subj := subject(t, i)
		sd := digestOf(subj)
		charged := []Bucket{a, b}[:len(tt.give)]
		if tt.charge > 0 {
			if d, err := l.Allow(ctx, Request{Subject: subj, Buckets: charged, Cost: tt.charge}); err != nil || !d.Allowed {
				t.Fatalf("%s: charge: %+v, %v", tt.name, d, err)
			}
		}
		if tt.prepare != nil {
			tt.prepare(func(id string) string { return prefix + "{" + SubjectHash(subj) + "}:" + id })
		}
		got, err := l.returnTokens(ctx, sd, tt.give, nil, tt.n)
		if err != nil {
			t.Fatalf("%s: returnTokens: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: tokens taken back (-want +got):\n%s", tt.name, diff)
		}
		st, err := l.Peek(ctx, subj, charged)
		if err != nil {
			t.Fatal(err)
		}
		var left []int64
		for _, s := range st {
			left = append(left, s.Remaining)
		}
		if diff := cmp.Diff(tt.left, left); diff != "" {
			t.Errorf("%s: remaining after the return (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestLeaseAdapts checks k against demand, what is left, LeaseMax, shadow
// buckets and cost, one Limiter calling sequentially.
func TestLeaseAdapts(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	prefix := testPrefix(t, c)
	ctx := context.Background()
	// Refills a token every 3.6s: Remaining moves by the requests only.
	big := Bucket{ID: "big", Limit: 1_000_000, Period: 1000 * time.Hour}

	tests := []struct {
		name    string
		buckets []Bucket
		cost    int64
		max     int
		calls   int
		pause   time.Duration
		// bounds on the Stats deltas
		maxRedis, minLeases, maxLeases int64
		maxLeaseSize                   int64 // tokens per lease
	}{
		// A subject seen less than leaseMin times a TTL is never leased:
		// every call is one script call, as with leasing off.
		{name: "cold", buckets: []Bucket{big}, cost: 1, max: 64, calls: 6, pause: 120 * time.Millisecond, maxRedis: 6, maxLeases: 0},
		// A hot subject with tokens to spare: at most LeaseMax a lease.
		{name: "hot", buckets: []Bucket{big}, cost: 1, max: 64, calls: 2000, maxRedis: 2000/64 + 12, minLeases: 1, maxLeases: 2000/32 + 4, maxLeaseSize: 64},
		{name: "hot, cost 5", buckets: []Bucket{big}, cost: 5, max: 16, calls: 500, maxRedis: 500/16 + 12, minLeases: 1, maxLeases: 500/8 + 4, maxLeaseSize: 16 * 5},
		{name: "hot, stacked", buckets: []Bucket{big, {ID: "route", Limit: 500_000, Period: 500 * time.Hour}}, cost: 1, max: 32, calls: 1000, maxRedis: 1000/32 + 12, minLeases: 1, maxLeaseSize: 32},
		// Few tokens: a lease takes at most a quarter of what is left, and
		// below leaseMin there is none.
		{name: "few left", buckets: []Bucket{{ID: "small", Limit: 15, Period: time.Hour}}, cost: 1, max: 64, calls: 15, maxRedis: 15, maxLeases: 0},
		{name: "quarter of what is left", buckets: []Bucket{{ID: "q", Limit: 40, Period: time.Hour}}, cost: 1, max: 64, calls: 40, minLeases: 1, maxRedis: 40, maxLeaseSize: 9},
		// Shadow buckets are never leased.
		{name: "shadow", buckets: []Bucket{big, {ID: "sh", Limit: 1_000_000, Period: 1000 * time.Hour, Shadow: true}}, cost: 1, max: 64, calls: 300, maxRedis: 300, maxLeases: 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLeasing(t, c, prefix, Options{LeaseMax: tt.max, DenyCacheSize: -1})
			clock := injectClock(l)
			req := Request{Subject: subject(t, i), Buckets: tt.buckets, Cost: tt.cost}
			var admitted, leased int64
			prev := int64(-1)
			for range tt.calls {
				clock.advance(tt.pause) // the demand is counted on the Limiter's clock
				d, err := l.Allow(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					continue
				}
				admitted++
				if d.Leased {
					leased++
				}
				// Leased or not, Remaining goes down by the cost (the
				// subject's leased tokens count as its own).
				if prev >= 0 && tt.pause == 0 && d.Remaining > prev-tt.cost {
					t.Errorf("call %d: Remaining %d after %d: want at most %d", admitted, d.Remaining, prev, prev-tt.cost)
				}
				prev = d.Remaining
			}
			s := l.Stats()
			t.Logf("admitted %d of %d: %d script calls, %d leases (%d tokens), %d leased admissions", admitted, tt.calls, s.RedisCalls, s.Leases, s.LeaseTokens, s.Leased)
			if admitted != int64(tt.calls) {
				t.Errorf("admitted %d of %d, want all", admitted, tt.calls)
			}
			if int64(s.RedisCalls) > tt.maxRedis {
				t.Errorf("%d script calls, want at most %d", s.RedisCalls, tt.maxRedis)
			}
			if int64(s.Leases) < tt.minLeases || tt.maxLeases > 0 && int64(s.Leases) > tt.maxLeases || tt.maxLeases == 0 && tt.minLeases == 0 && s.Leases > 0 {
				t.Errorf("%d leases, want %d to %d", s.Leases, tt.minLeases, tt.maxLeases)
			}
			if s.Leases > 0 && tt.maxLeaseSize > 0 && s.LeaseTokens > s.Leases*uint64(tt.maxLeaseSize) {
				t.Errorf("%d tokens in %d leases: more than %d a lease", s.LeaseTokens, s.Leases, tt.maxLeaseSize)
			}
			if s.LeaseTokens%uint64(tt.cost) != 0 {
				t.Errorf("%d tokens leased: not whole requests of cost %d", s.LeaseTokens, tt.cost)
			}
			if uint64(leased) != s.Leased {
				t.Errorf("%d decisions say Leased, Stats.Leased = %d", leased, s.Leased)
			}
			if s.Leased+s.RedisCalls < uint64(tt.calls) {
				t.Errorf("leased %d + script calls %d < %d calls", s.Leased, s.RedisCalls, tt.calls)
			}
		})
	}
}

// hotUntilLeased calls Allow on req until a lease holds tokens.
func hotUntilLeased(t *testing.T, l *Limiter, req Request) int64 {
	t.Helper()
	var n int64
	for l.Stats().LeaseOutstanding == 0 {
		if n++; n > 1000 {
			t.Fatalf("no lease after 1000 calls: %+v", l.Stats())
		}
		if d, err := l.Allow(context.Background(), req); err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v, %v", d, err)
		}
	}
	return n
}

// TestLeaseGivesBack checks that unused tokens go back to Redis, exactly,
// at expiry and on Close, and that Close stops leasing.
func TestLeaseGivesBack(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	prefix := testPrefix(t, c)
	ctx := context.Background()
	bs := []Bucket{{ID: "a", Limit: 1000, Period: time.Hour}} // 3.6s a token

	for i, how := range []string{"expiry", "close"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			const ttl = 100 * time.Millisecond
			l := newLeasing(t, c, prefix, Options{LeaseMax: 32, LeaseTTL: ttl})
			clock := injectClock(l)
			req := Request{Subject: subject(t, i), Buckets: bs, Cost: 1}
			admitted := hotUntilLeased(t, l, req)
			held := l.Stats().LeaseOutstanding
			switch how {
			case "expiry":
				// Past the TTL on the Limiter's clock: the sweeper, which
				// ticks every TTL/4 (real time), gives the lease back to
				// Redis at its next tick.
				clock.advance(ttl)
				testenv.Await(t, 2*time.Second, time.Millisecond, "the expired lease given back", func() bool {
					s := l.Stats()
					return s.LeaseOutstanding == 0 && s.LeaseReturned > 0
				})
			case "close":
				if err := l.Close(ctx); err != nil {
					t.Fatal(err)
				}
				if err := l.Close(ctx); err != nil {
					t.Fatalf("second Close: %v", err)
				}
			}
			s := l.Stats()
			t.Logf("admitted %d, lease held %d, returned %d", admitted, held, s.LeaseReturned)
			if s.LeaseReturned != uint64(held) || s.LeaseOutstanding != 0 || s.LeaseLost != 0 {
				t.Errorf("returned %d, outstanding %d, lost %d; want %d, 0, 0", s.LeaseReturned, s.LeaseOutstanding, s.LeaseLost, held)
			}
			st, err := l.Peek(ctx, req.Subject, bs)
			if err != nil {
				t.Fatal(err)
			}
			if want := 1000 - admitted; st[0].Remaining != want {
				t.Errorf("Peek after the return: %d left, want 1000 - %d admitted = %d", st[0].Remaining, admitted, want)
			}
			if how == "close" {
				before := l.Stats()
				for range 20 {
					if _, err := l.Allow(ctx, req); err != nil {
						t.Fatal(err)
					}
				}
				if after := l.Stats(); after.RedisCalls-before.RedisCalls != 20 || after.Leases != before.Leases {
					t.Errorf("after Close: %d script calls and %d new leases for 20 requests, want 20 and 0",
						after.RedisCalls-before.RedisCalls, after.Leases-before.Leases)
				}
			}
		})
	}
}

// TestLeaseInvalidation checks that a change of the numbers and a Reset end
// TestLeaseInvalidation checks that a change of the numbers and a Reset end
// a lease at once, and that a lease denied falls back to one request.
func TestLeaseInvalidation(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	prefix := testPrefix(t, c)
	ctx := context.Background()
	a := Bucket{ID: "a", Limit: 1000, Period: time.Hour}

	t.Run("numbers changed", func(t *testing.T) {
		t.Parallel()
		l := newLeasing(t, c, prefix, Options{LeaseTTL: 100 * time.Millisecond})
		req := Request{Subject: subject(t, 0), Buckets: []Bucket{a}, Cost: 1}
		admitted := hotUntilLeased(t, l, req)
		held := l.Stats().LeaseOutstanding
		// The rule's limit moves (a new snapshot): the next request has
		// other numbers, so another lease key.
		up := req
		up.Buckets = []Bucket{{ID: "a", Limit: 2000, Period: time.Hour}}
		before := l.Stats()
		d, err := l.Allow(ctx, up)
		if err != nil || !d.Allowed || d.Leased {
			t.Fatalf("Allow after the change = %+v, %v; want allowed by a script call", d, err)
		}
		admitted++
		if s := l.Stats(); s.Leased != before.Leased || s.LeaseOutstanding != 0 {
			t.Errorf("after the change: %d leased, %d tokens still leased; want the old lease unused and given back",
				s.Leased-before.Leased, s.LeaseOutstanding)
		}
		// The old lease's tokens went back to the old numbers before the
		// call converted the bucket, or, after it, nowhere: the converted
		// bucket has at most burst − admitted left, and at least that
		// minus what the lease held.
		l.leases.returns.Wait()
		st, err := l.Peek(ctx, up.Subject, up.Buckets)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("admitted %d, the old lease held %d; the converted bucket has %d", admitted, held, st[0].Remaining)
		if r := st[0].Remaining; r > 2000-admitted || r < 2000-admitted-held {
			t.Errorf("converted bucket has %d left, want %d to %d", r, 2000-admitted-held, 2000-admitted)
		}
	})

	t.Run("reset", func(t *testing.T) {
		t.Parallel()
		l := newLeasing(t, c, prefix, Options{})
		req := Request{Subject: subject(t, 1), Buckets: []Bucket{a}, Cost: 1}
		hotUntilLeased(t, l, req)
		if err := l.Reset(ctx, req.Subject, req.Buckets); err != nil {
			t.Fatal(err)
		}
		if s := l.Stats(); s.LeaseOutstanding != 0 {
			t.Errorf("after Reset %d tokens still leased, want 0", s.LeaseOutstanding)
		}
		before := l.Stats()
		d, err := l.Allow(ctx, req)
		if err != nil || !d.Allowed || d.Remaining != 999 {
			t.Errorf("Allow after Reset = %+v, %v; want allowed from a full bucket, 999 left", d, err)
		}
		if s := l.Stats(); s.RedisCalls != before.RedisCalls+1 {
			t.Errorf("after Reset: %d script calls, want 1", s.RedisCalls-before.RedisCalls)
		}
	})

	t.Run("lease denied, one request passes", func(t *testing.T) {
		t.Parallel()
		small := Bucket{ID: "s", Limit: 100, Period: time.Hour}
		l := newLeasing(t, c, prefix, Options{DenyCacheSize: -1})
		other := New(c, Options{Prefix: prefix, DenyCacheSize: -1, Timeout: time.Second})
		req := Request{Subject: subject(t, 2), Buckets: []Bucket{small}, Cost: 1}
		// Three calls: demand below leaseMin, 97 left seen.
		for range 3 {
			if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
				t.Fatalf("Allow = %+v, %v", d, err)
			}
		}
		// Another process takes all but two.
		if d, err := other.Allow(ctx, Request{Subject: req.Subject, Buckets: req.Buckets, Cost: 95}); err != nil || !d.Allowed {
			t.Fatalf("other Allow = %+v, %v", d, err)
		}
		before := l.Stats()
		d, err := l.Allow(ctx, req)
		if err != nil || !d.Allowed || d.Remaining != 1 {
			t.Errorf("Allow = %+v, %v; want allowed, 1 left (a lease of 4 denied, then one request)", d, err)
		}
		s := l.Stats()
		if s.RedisCalls-before.RedisCalls != 2 || s.Leases != before.Leases {
			t.Errorf("%d script calls, %d leases; want 2 (the lease denied, the request) and none", s.RedisCalls-before.RedisCalls, s.Leases-before.Leases)
		}
	})
}

// TestLeaseExactUnderConcurrency is TestExactUnderConcurrency with leases:
// 4 processes × 32 goroutines on one subject whose limit binds. Leases
// must never let more through than burst + rate × elapsed (Redis TIME);
// what they under-admit is at most the tokens they held when the run
// stopped.
func TestLeaseExactUnderConcurrency(t *testing.T) {
	const (
		clients    = 4
		goroutines = 32
		run        = 2 * time.Second
	)
	// Every bucket refills Limit tokens a second.
	tests := []struct {
		name    string
		buckets []Bucket
		cost    int64
	}{
		// Binding from the start: few tokens, k stays 1.
		{"tight", []Bucket{{ID: "hot", Limit: 200, Burst: 20}}, 1},
		// A large burst leased in lumps, then binding.
		{"large burst", []Bucket{{ID: "hot", Limit: 1000, Burst: 4000}}, 1},
		// Stacked rules and cost 3: the route bucket binds.
		{"stacked, cost 3", []Bucket{{ID: "api", Limit: 3000, Burst: 9000}, {ID: "route", Limit: 1500, Burst: 6000}}, 3},
		// A rate bucket and a monthly quota that binds: after Close every
		// unused leased token is back in the quota.
		{"rate and quota, quota binds", []Bucket{{ID: "api", Limit: 3000, Burst: 6000}, {ID: "month", Limit: 5000, Window: Monthly}}, 1},
		{"rate and quota, rate binds", []Bucket{{ID: "api", Limit: 2000, Burst: 4000}, {ID: "month", Limit: 1_000_000, Window: Monthly}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := slices.Clone(tt.buckets)
			for i := range bs {
				bs[i].Period = time.Second
			}
			// The bound in requests: the tightest bucket's tokens ÷ cost.
			bound := func(elapsed time.Duration) float64 {
				b := math.Inf(1)
				for _, x := range bs {
					if x.Window != NoWindow {
						b = min(b, float64(x.Limit)/float64(tt.cost))
						continue
					}
					b = min(b, (float64(x.Burst)+float64(x.Limit)*elapsed.Seconds())/float64(tt.cost))
				}
				return b
			}
			timeClient := newClient(t, 1)
			prefix := testPrefix(t, timeClient)
			ls := make([]*Limiter, clients)
			for i := range ls {
				ls[i] = newLeasing(t, newClient(t, goroutines), prefix, Options{LeaseMax: 64, DenyCacheSize: -1})
			}
			req := Request{Subject: "hot-subject", Buckets: bs, Cost: tt.cost}

			var calls tally
			var peak atomic.Int64
			// The longest stretch in which no call completed: a loaded
			// machine can starve every worker for longer than a bucket
			// takes to fill, and the refill past its burst is then lost
			// by design (not by the limiter), which the under-admission
			// check below cannot tell from a lost token.
			var lastDone, maxGap atomic.Int64
			var stop atomic.Bool
			t0, i0, i1 := crowd(t, timeClient, ls, goroutines, run, &stop, func(l *Limiter, n int) {
				calls.allow(l, req)
				if n%16 == 0 {
					// Sample the tokens held by all leases, for the record.
					var out int64
					for _, l := range ls {
						out += l.Stats().LeaseOutstanding
					}
					for p := peak.Load(); out > p && !peak.CompareAndSwap(p, out); p = peak.Load() {
					}
				}
				now := time.Now().UnixNano()
				if prev := lastDone.Swap(now); prev != 0 && !stop.Load() {
					for g := maxGap.Load(); now-prev > g && !maxGap.CompareAndSwap(g, now-prev); g = maxGap.Load() {
					}
				}
			})
			if hasQuota(bs) {
				// A cool-down: once the rate bucket has refilled some, each
				// Limiter in turn calls until it holds a lease (unless the
				// quota, spent, denies), so that leases hold tokens when
				// Close gives them back to the quota.
				testenv.Await(t, 5*time.Second, 5*time.Millisecond, "the rate bucket refilled", func() bool {
					st, err := ls[0].Peek(context.Background(), req.Subject, bs[:1])
					if err != nil {
						t.Fatal(err)
					}
					return st[0].Remaining >= 64*tt.cost
				})
				for _, l := range ls {
					for range 100 {
						if l.Stats().LeaseOutstanding > 0 {
							break
						}
						d, err := l.Allow(context.Background(), req)
						if err != nil {
							calls.failed.Add(1)
						}
						if err != nil || !d.Allowed {
							break
						}
						calls.admitted.Add(1)
					}
				}
			}
			t1 := redisNow(t, timeClient)
			// What the workers left in the bucket when they stopped (a
			// loaded machine can starve them of CPU near the end).
			st, err := ls[0].Peek(context.Background(), req.Subject, bs)
			if err != nil {
				t.Fatal(err)
			}
			left := int64(math.MaxInt64) // requests the buckets still had
			for _, x := range st {
				left = min(left, x.Remaining/tt.cost)
			}

			var held, lost int64
			var s Stats
			for _, l := range ls {
				st := l.Stats()
				held += st.LeaseOutstanding
				lost += int64(st.LeaseLost)
				s.Leases += st.Leases
				s.Leased += st.Leased
				s.LeaseTokens += st.LeaseTokens
				s.LeaseReturned += st.LeaseReturned
				s.RedisCalls += st.RedisCalls
			}
			if n := calls.failed.Load(); n > 0 {
				t.Fatalf("%d calls failed", n)
			}
			// Leases hold tokens, cost per request.
			held, lost = held/tt.cost, lost/tt.cost
			most, least := bound(t1.Sub(t0)), bound(i1.Sub(i0))
			got := calls.admitted.Load()
			t.Logf("admitted %d, denied %d; burst + rate×elapsed = %.2f (outer, %v) / %.2f (inner, %v)",
				got, calls.denied.Load(), most, t1.Sub(t0), least, i1.Sub(i0))
			t.Logf("leases %d (%d tokens), leased admissions %d, script calls %d, returned %d; held at the stop %d, peak held %d, lost %d; left in the bucket %d",
				s.Leases, s.LeaseTokens, s.Leased, s.RedisCalls, s.LeaseReturned, held, peak.Load(), lost, left)
			if float64(got) > most {
				t.Errorf("admitted %d > burst + rate×elapsed = %.2f: over-admitted", got, most)
			}
			// Under-admission: every token is admitted, but the one being
			// refilled at the stop, those the leases held then (given back
			// by Close), and those still in the bucket.
			fill := time.Duration(math.MaxInt64) // the soonest a rate bucket fills from empty
			for _, x := range bs {
				if x.Window == NoWindow {
					fill = min(fill, time.Duration(float64(x.Burst)/float64(x.Limit)*float64(x.Period)))
				}
			}
			if gap := time.Duration(maxGap.Load()); gap >= fill {
				t.Logf("no call completed for %v, longer than a bucket takes to fill (%v): the machine starved the workers, under-admission not checked", gap, fill)
			} else if float64(got) < least-1-float64(held+lost+left) {
				t.Errorf("admitted %d < burst + rate×elapsed - 1 - held %d - lost %d - left %d = %.2f: tokens lost",
					got, held, lost, left, least-1-float64(held+lost+left))
			}
			if calls.denied.Load() == 0 {
				t.Errorf("no call was denied: the test did not contend")
			}
			if bs[0].Burst > 1000 && s.Leased == 0 {
				t.Errorf("no leased admission: the test did not lease")
			}
			for i, x := range bs {
				if x.Window == NoWindow {
					continue
				}
				for _, l := range ls {
					if err := l.Close(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				var lost uint64
				for _, l := range ls {
					lost += l.Stats().LeaseLost
				}
				used, _ := quotaUsed(t, timeClient, bucketKey(prefix, req.Subject, bs[i]))
				if lost == 0 && used != got*tt.cost {
					t.Errorf("quota %s: used %d after Close, want exactly the admitted %d: leased tokens not given back", x.ID, used, got*tt.cost)
				}
				t.Logf("quota %s: used %d after Close, admitted %d, lost %d", x.ID, used, got, lost)
			}
		})
	}
}

// TestLeaseDemand checks the demand table (leases.count): a key's requests
// in its current window, or the previous one when that had more; a window
// is one TTL from the key's first request after the last; a key whose
// entry another key took over counts from 0; counts saturate.
func TestLeaseDemand(t *testing.T) {
	const ttl = int64(250 * time.Millisecond)
	tl := newLeases(Options{LeaseMax: 64, LeaseTTL: time.Duration(ttl)})
	slot := uint64(12345)
	a, b := slot|7<<60, slot|9<<60 // one entry, two tags
	at := func(f float64) int64 { return int64(f*float64(ttl)) + 1000*ttl }
	steps := []struct {
		key  uint64
		now  int64
		want int64
	}{
		{a, at(0), 1},
		{a, at(0.2), 2},
		{a, at(0.9), 3},
		// A new window: the previous one's 3 count until this one has more.
		{a, at(1.05), 3},
		{a, at(1.1), 3},
		{a, at(1.2), 3},
		{a, at(1.3), 4},
		// Two windows idle: from 0.
		{a, at(3.5), 1},
		// Another key in the same entry takes it over; a then counts anew.
		{a, at(3.6), 2},
		{b, at(3.6), 1},
		{a, at(3.7), 1},
	}
	for i, st := range steps {
		if got := tl.count(st.key, st.now); got != st.want {
			t.Errorf("step %d: count(%#x, %v) = %d, want %d", i, st.key, time.Duration(st.now), got, st.want)
		}
	}
	// Saturation, and the clock's 16 bits wrapping: a long-gone window is
	// not mistaken for the current one's neighbour.
	c := slot | 3<<60
	for range demandMax + 10 {
		tl.count(c, at(0))
	}
	if got := tl.count(c, at(0.5)); got != demandMax {
		t.Errorf("after %d requests count = %d, want %d (saturated)", demandMax+11, got, demandMax)
	}
	if got := tl.count(c, at(0.5)+(1<<16)*tl.unit+5*tl.unit*demandUnits); got != 1 {
		t.Errorf("count after the clock wrapped = %d, want 1", got)
	}
}
