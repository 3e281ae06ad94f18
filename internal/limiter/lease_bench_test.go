package limiter

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLease measures token leases as the issue asks: 4 Limiters (4
// processes, each its own client) × 16 goroutines, with leasing off and on
// in the same run: the two sets of Limiters take turns, phases of 2,000
// decisions each, each going first every other phase, so both see the
// same machine (two cores shared with Redis and whatever else runs).
//
//	hot      one subject whose limit (100M/s) far exceeds demand
//	uniform  10,000 subjects round robin, one bucket each (1M/s)
//
// Metrics, for each of off and on: decisions/s, redis-calls/decision
// (script calls, lease calls and lease returns included, per admitted
// decision), p50/p99 latency; x-unleased is on's decisions/s over off's.
//
// Run it with: scripts/testenv.sh go test -run '^$' -bench Lease ./internal/limiter/
func BenchmarkLease(b *testing.B) {
	const instances, goroutines = 4, 16
	subjects := make([]string, 10000)
	for i := range subjects {
		subjects[i] = "lease-bench-" + strconv.Itoa(i)
	}
	hot := []Bucket{{ID: "hot", Limit: 100_000_000, Period: time.Second}}
	one := []Bucket{{ID: "api", Limit: 1_000_000, Period: time.Second}}
	rows := []struct {
		name string
		req  func(i int) Request
	}{
		{"hot", func(int) Request { return Request{Subject: "hot", Buckets: hot, Cost: 1} }},
		{"uniform", func(i int) Request { return Request{Subject: subjects[i%len(subjects)], Buckets: one, Cost: 1} }},
	}
	for _, row := range rows {
		b.Run(row.name, func(b *testing.B) {
			var sets [2][]*Limiter // off, on
			for m := range sets {
				for range instances {
					c := newClient(b, goroutines)
					sets[m] = append(sets[m], New(c, Options{Prefix: testPrefix(b, c), Timeout: time.Second, LeaseMax: 64 * m}))
				}
			}
			res := runLeaseBench(b, sets, goroutines, row.req)
			for _, set := range sets {
				for _, l := range set {
					if err := l.Close(context.Background()); err != nil {
						b.Error(err)
					}
				}
			}
			for m, name := range []string{"off", "on"} {
				b.ReportMetric(res[m].rate, name+"-decisions/s")
				b.ReportMetric(res[m].calls, name+"-redis-calls/decision")
				b.ReportMetric(res[m].p50, name+"-p50-µs")
				b.ReportMetric(res[m].p99, name+"-p99-µs")
			}
			b.ReportMetric(res[1].rate/res[0].rate, "x-unleased")
		})
	}
}

// leaseBenchResult is one mode's figures.
type leaseBenchResult struct {
	rate, calls, p50, p99 float64
}

// runLeaseBench runs b.N decisions of req(i) on each set of Limiters
// (goroutines per Limiter), the sets taking turns by phases, after a
// warm-up, and returns each set's figures. Every decision must be allowed.
func runLeaseBench(b *testing.B, sets [2][]*Limiter, goroutines int, req func(i int) Request) [2]leaseBenchResult {
	const phase = 2000
	b.ReportAllocs()
	ctx := context.Background()
	var failed, denied atomic.Int64
	run := func(ls []*Limiter, from, to int, lat []time.Duration) time.Duration {
		var next atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		start := time.Now()
		for _, l := range ls {
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= to {
							return
						}
						t := time.Now()
						d, err := l.Allow(ctx, req(i))
						if lat != nil {
							lat[i] = time.Since(t)
						}
						switch {
						case err != nil:
							failed.Add(1)
						case !d.Allowed:
							denied.Add(1)
						}
					}
				}()
			}
		}
		wg.Wait()
		return time.Since(start)
	}
	calls := func(ls []*Limiter) (n uint64) {
		for _, l := range ls {
			n += l.Stats().RedisCalls
		}
		return n
	}
	// Warm up: connections, the script, the demand leases follow.
	for _, ls := range sets {
		run(ls, 0, len(ls)*goroutines*50, nil)
	}
	var before [2]uint64
	for m, ls := range sets {
		before[m] = calls(ls)
	}
	lat := [2][]time.Duration{make([]time.Duration, b.N), make([]time.Duration, b.N)}
	var took [2]time.Duration
	b.ResetTimer()
	for from := 0; from < b.N; from += phase {
		to := min(from+phase, b.N)
		// The sets take turns going first: the second of a pair runs on
		// the subjects the first just made keys for, and after its
		// garbage.
		first := from / phase % 2
		for k := range sets {
			m := k ^ first
			took[m] += run(sets[m], from, to, lat[m])
		}
	}
	b.StopTimer()
	if f, d := failed.Load(), denied.Load(); f > 0 || d > 0 {
		b.Errorf("%d decisions failed and %d denied: the limit should exceed demand", f, d)
	}
	var out [2]leaseBenchResult
	for m, ls := range sets {
		slices.Sort(lat[m])
		out[m] = leaseBenchResult{
			rate:  float64(b.N) / took[m].Seconds(),
			calls: float64(calls(ls)-before[m]) / float64(b.N),
			p50:   float64(lat[m][b.N/2]) / 1e3,
			p99:   float64(lat[m][b.N*99/100]) / 1e3,
		}
	}
	return out
}
