package limiter

import (
	"context"
	"crypto/sha256"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAllow measures decisions against the test Redis at 1, 16 and 64
// concurrent callers. Every row interleaves its decisions with as many PING
// round trips, in alternating phases of all callers, so that both see the
// same machine (two cores shared with Redis and whatever else runs): x-ping
// is the row's decisions/s over the PING round trips/s of the same run.
//
//	ping        the floor alone: one bare PING round trip per op
//	1-bucket    10,000 subjects, one bucket each, allowed
//	2-bucket    10,000 subjects, two buckets each (API + route), allowed
//	rate+inflight  10,000 subjects, a rate bucket and a concurrency
//	            bucket, allowed, then released: each op is the decision
//	            and the release that ends the request; its x-1-bucket is
//	            its ops/s over the 1-bucket decision's, in alternating
//	            phases of the same run
//	2-rate-2-quota  10,000 subjects, two rate buckets and two quotas (a
//	            daily one anchored at 06:00 UTC, a calendar month), allowed;
//	            its x-2-bucket is its decisions/s over the 2-bucket
//	            decision's, in alternating phases of the same run. Every
//	            subject's windows are opened before the timing: a quota's
//	            first call in a window, once per subject and window,
//	            computes the calendar (the next row measures that)
//	2-rate-2-quota-new  the same, every decision a subject never seen: each
//	            opens its two windows (x-2-bucket against new subjects too)
//	hot         one subject, allowed (every caller on one key)
//	hot-denied  one exhausted subject: the local deny cache answers
//
// Run it with: scripts/testenv.sh go test -run '^$' -bench . -benchmem ./internal/limiter/
func BenchmarkAllow(b *testing.B) {
	subjects := make([]string, 10000)
	for i := range subjects {
		subjects[i] = "bench-subject-" + strconv.Itoa(i)
	}
	api := Bucket{ID: "api", Limit: 1_000_000, Period: time.Second}
	route := Bucket{ID: "route", Limit: 1_000_000, Period: time.Second}
	one, two := []Bucket{api}, []Bucket{api, route}
	four := []Bucket{api, route,
		{ID: "q-day", Limit: 1_000_000_000, Period: 24 * time.Hour, Window: Daily, Anchor: time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)},
		{ID: "q-month", Limit: 1_000_000_000, Period: 24 * time.Hour, Window: Monthly}}
	exhausted := []Bucket{{ID: "x", Limit: 1, Period: time.Hour}}
	inflight := []Bucket{api, {ID: "exports", Limit: 1_000_000, Period: time.Minute, Concurrency: true}}

	for _, callers := range []int{1, 16, 64} {
		c := newClient(b, callers)
		prefix := testPrefix(b, c)
		ping := baseline{"x-ping", func(ctx context.Context, _ int) error { return c.Ping(ctx).Err() }}
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			b.Run("ping", func(b *testing.B) {
				run(b, callers, ping.op, nil, baseline{})
			})
			// The -new row's subjects, made before the timing (b.N of
			// them, each never seen before).
			var fresh []string
			newSubject := func(i int) string { return fresh[i] }
			rows := []struct {
				name string
				req  func(i int) Request
			}{
				{"1-bucket", func(i int) Request { return Request{Subject: subjects[i%len(subjects)], Buckets: one, Cost: 1} }},
				{"2-bucket", func(i int) Request { return Request{Subject: subjects[i%len(subjects)], Buckets: two, Cost: 1} }},
				{"rate+inflight", func(i int) Request { return Request{Subject: subjects[i%len(subjects)], Buckets: inflight, Cost: 1} }},
				{"hot", func(int) Request { return Request{Subject: "hot", Buckets: one, Cost: 1} }},
				{"hot-denied", func(int) Request { return Request{Subject: "hot", Buckets: exhausted, Cost: 1} }},
				{"2-rate-2-quota", func(i int) Request { return Request{Subject: subjects[i%len(subjects)], Buckets: four, Cost: 1} }},
				{"2-rate-2-quota-new", func(i int) Request { return Request{Subject: newSubject(i), Buckets: four, Cost: 1} }},
			}
			opened := false
			for _, row := range rows {
				b.Run(row.name, func(b *testing.B) {
					l := New(c, Options{Prefix: prefix, Timeout: time.Second})
					if row.name == "hot-denied" {
						for range 2 {
							_, _ = l.Allow(context.Background(), row.req(0))
						}
					}
					base := ping
					if row.name == "rate+inflight" {
						l1 := New(c, Options{Prefix: prefix + "one:", Timeout: time.Second})
						base = baseline{"x-1-bucket", func(ctx context.Context, i int) error {
							_, err := l1.Allow(ctx, Request{Subject: subjects[i%len(subjects)], Buckets: one, Cost: 1})
							return err
						}}
					}
					if strings.HasPrefix(row.name, "2-rate-2-quota") {
						// Against the 2-bucket decision, its own limiter
						// and keys, phase by phase.
						l2 := New(c, Options{Prefix: prefix + "base:", Timeout: time.Second})
						subj := func(i int) string { return subjects[i%len(subjects)] }
						if row.name == "2-rate-2-quota-new" {
							// The same names are new keys under l2's prefix.
							subj = newSubject
							fresh = freshSubjects(b.N)
						}
						base = baseline{"x-2-bucket", func(ctx context.Context, i int) error {
							_, err := l2.Allow(ctx, Request{Subject: subj(i), Buckets: two, Cost: 1})
							return err
						}}
					}
					if row.name == "2-rate-2-quota" && !opened {
						// Open every subject's windows, once: their keys
						// last the day and the month.
						opened = true
						var wg sync.WaitGroup
						for w := range callers {
							wg.Go(func() {
								for i := w; i < len(subjects); i += callers {
									if _, err := l.Allow(context.Background(), row.req(i)); err != nil {
										b.Error(err)
										return
									}
								}
							})
						}
						wg.Wait()
					}
					run(b, callers, func(ctx context.Context, i int) error {
						d, err := l.Allow(ctx, row.req(i))
						if err == nil && d.Slots.Held() {
							err = l.Release(ctx, d.Slots)
						}
						return err
					}, l, base)
				})
			}
		})
	}
}

// freshCount numbers the subjects of the -new row: never seen before in
// this process (the row's keys are deleted with the test's prefix).
var freshCount atomic.Int64

// freshSubjects returns n subjects never returned before.
func freshSubjects(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = "bench-new-" + strconv.FormatInt(freshCount.Add(1), 10)
	}
	return s
}

// phase is how many ops all callers run before switching between the row
// and PING.
const phase = 2000

// baseline is what a row is compared with: op runs in alternating
// phases, untimed, and the row reports its decisions/s over op's as name.
type baseline struct {
	name string
	op   func(ctx context.Context, i int) error
}

// run calls op b.N times from callers goroutines and reports decisions/s,
// p50/p99 latency, round trips per op (when l is set) and, when base is
// set, the ratio to as many base ops (PINGs, or another decision) run in
// alternating phases (untimed).
func run(b *testing.B, callers int, op func(ctx context.Context, i int) error, l *Limiter, base baseline) {
	ping := base.op
	b.ReportAllocs()
	ctx := context.Background()
	// Warm the pool: every caller its connection.
	var warm sync.WaitGroup
	for range callers {
		warm.Add(1)
		go func() { defer warm.Done(); _ = op(ctx, 0) }()
	}
	warm.Wait()
	var before Stats
	if l != nil {
		before = l.Stats()
	}
	lat := make([]time.Duration, b.N)
	var failed atomic.Int64
	var firstErr atomic.Value
	// runPhase runs ops [from, to) on callers goroutines, or stops them
	// early after budget (when > 0); it returns the ops done and the time.
	runPhase := func(f func(ctx context.Context, i int) error, from, to int, budget time.Duration, record bool) (int, time.Duration) {
		var next, done atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		start := time.Now()
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= to || (budget > 0 && time.Since(start) > budget) {
						return
					}
					t := time.Now()
					if err := f(ctx, i); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					if record {
						lat[i] = time.Since(t)
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		return int(done.Load()), time.Since(start)
	}
	var opTime, pingTime time.Duration
	var pings int
	b.ResetTimer()
	for from := 0; from < b.N; from += phase {
		to := min(from+phase, b.N)
		_, d := runPhase(op, from, to, 0, true)
		opTime += d
		if ping != nil {
			// As many PINGs, or as long as the phase took when the row
			// was quicker (the deny cache), at least 200µs.
			b.StopTimer()
			n, pd := runPhase(ping, from, to, max(d, 200*time.Microsecond), false)
			pings += n
			pingTime += pd
			b.StartTimer()
		}
	}
	b.StopTimer()

	slices.Sort(lat)
	rate := float64(b.N) / opTime.Seconds()
	b.ReportMetric(rate, "decisions/s")
	b.ReportMetric(float64(lat[b.N/2])/1e3, "p50-µs")
	b.ReportMetric(float64(lat[b.N*99/100])/1e3, "p99-µs")
	if ping != nil {
		b.ReportMetric(rate/(float64(pings)/pingTime.Seconds()), base.name)
	}
	if l != nil {
		s := l.Stats()
		b.ReportMetric(float64(s.RedisCalls-before.RedisCalls)/float64(b.N), "rtt/op")
	}
	if n := failed.Load(); n > 0 {
		b.Errorf("%d of %d ops failed, the first with: %v", n, b.N, firstErr.Load())
	}
}

// BenchmarkSubjectDigest compares the keyed subject digest (HMAC-SHA256,
// what the Limiter computes once per call) with the plain SHA-256 it
// replaced.
func BenchmarkSubjectDigest(b *testing.B) {
	h := NewHasher([]byte("0123456789abcdef0123456789abcdef"))
	const subject = "sk_live_0123456789abcdef"
	b.Run("hmac", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h.digest(subject)
		}
	})
	b.Run("sha256", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sha256.Sum256([]byte(subject))
		}
	})
}
