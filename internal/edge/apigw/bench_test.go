package apigw_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// benchStack is the authorizer handler over real Redis with an API-wide and
// a route rule, generous enough never to deny.
type benchStack struct {
	h       *apigw.Handler
	lim     *limiter.Limiter
	buckets []limiter.Bucket // the same two buckets, for the bare limiter
	events  []events.APIGatewayCustomAuthorizerRequestTypeRequest
	keys    []string
}

func newBenchStack(tb testing.TB, limit int64, period time.Duration, subjects int) *benchStack {
	tb.Helper()
	lim := limiter.New(benchClient(tb), limiter.Options{Prefix: testenv.Prefix(tb, "bench"), Timeout: time.Second})
	snap := rules.NewSnapshot(shopRules(limit, limit, period), nil, rules.SnapshotOptions{})
	a := authorizer.New(snaps{snap}, lim, authorizer.Options{Logger: jsonLog(io.Discard), Metrics: metrics.New(metrics.Options{W: io.Discard})})
	s := &benchStack{
		h:   apigw.NewHandler(a, apigw.Options{}),
		lim: lim,
	}
	m := snap.Match("a1b2c3", "GET", "/orders/{id}", "x")
	for _, e := range []*rules.Effective{m.API, m.Route} {
		s.buckets = append(s.buckets, limiter.Bucket{ID: e.ID, Limit: e.Limit, Period: e.Period, Burst: e.Burst})
	}
	for i := range subjects {
		key := fmt.Sprintf("bench-key-%06d", i)
		ev := restEvent(key)
		s.events = append(s.events, ev)
		s.keys = append(s.keys, key)
	}
	warm(tb, s.h, s.events)
	return s
}

// run calls op b.N times spread over callers goroutines; op returns which
// series (0 or 1) the call belongs to, and run returns each series'
// latencies, sorted, and the wall time.
func run(b *testing.B, callers int, op func(caller, i int) int) (series [2][]time.Duration, elapsed time.Duration) {
	per := make([][2][]time.Duration, callers)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range callers {
		n := b.N / callers
		if c < b.N%callers {
			n++
		}
		wg.Go(func() {
			lat := [2][]time.Duration{make([]time.Duration, 0, n), make([]time.Duration, 0, n/2+1)}
			for i := range n {
				t0 := time.Now()
				k := op(c, i)
				lat[k] = append(lat[k], time.Since(t0))
			}
			per[c] = lat
		})
	}
	wg.Wait()
	elapsed = time.Since(start)
	b.StopTimer()
	for _, p := range per {
		series[0] = append(series[0], p[0]...)
		series[1] = append(series[1], p[1]...)
	}
	slices.Sort(series[0])
	slices.Sort(series[1])
	return series, elapsed
}

func pct(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func mean(s []time.Duration) time.Duration {
	if len(s) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range s {
		t += d
	}
	return t / time.Duration(len(s))
}

func µs(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// runAllowed sends evs (rotating) through h's REST handler from callers
// goroutines, each to be allowed, reports p50, p99 and decisions/s, and
// returns how many it timed.
func runAllowed(b *testing.B, h *apigw.Handler, evs []events.APIGatewayCustomAuthorizerRequestTypeRequest, callers int) int {
	lat, elapsed := run(b, callers, func(c, i int) int {
		resp, err := h.REST(context.Background(), evs[(c*7919+i)%len(evs)])
		if err != nil || resp.PolicyDocument.Statement[0].Effect != "Allow" {
			b.Fatalf("REST() = %+v, %v", resp, err)
		}
		return 0
	})
	b.ReportMetric(µs(pct(lat[0], 0.50)), "p50-µs")
	b.ReportMetric(µs(pct(lat[0], 0.99)), "p99-µs")
	b.ReportMetric(float64(len(lat[0]))/elapsed.Seconds(), "decisions/s")
	return len(lat[0])
}

// BenchmarkAuthorizer runs the REST authorizer handler in process (event
// in, IAM policy out) against real Redis at 1 and 16 callers: p50, p99 and
// decisions/s. Subjects rotate over 1000 keys; the limits never deny.
func BenchmarkAuthorizer(b *testing.B) {
	s := newBenchStack(b, 1_000_000_000, time.Second, 1000)
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			runAllowed(b, s.h, s.events, callers)
		})
	}
}

// BenchmarkOverhead alternates, in the same run, the authorizer handler and
// the bare limiter call with the same two buckets and subjects, and
// reports the handler's overhead over the limiter call: on the means and
// on the medians, in percent.
func BenchmarkOverhead(b *testing.B) {
	s := newBenchStack(b, 1_000_000_000, time.Second, 1000)
	ctx := context.Background()
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			lat, _ := run(b, callers, func(c, i int) int {
				k := (c*7919 + i) % len(s.keys)
				if i%2 == 0 {
					if _, err := s.h.REST(ctx, s.events[k]); err != nil {
						b.Fatal(err)
					}
					return 0
				}
				if d, err := s.lim.Allow(ctx, limiter.Request{Subject: s.keys[k], Buckets: s.buckets, Cost: 1}); err != nil || !d.Allowed {
					b.Fatalf("Allow() = %+v, %v", d, err)
				}
				return 1
			})
			h, l := lat[0], lat[1]
			b.ReportMetric(µs(pct(h, 0.50)), "handler-p50-µs")
			b.ReportMetric(µs(pct(l, 0.50)), "limiter-p50-µs")
			if mean(l) > 0 && pct(l, 0.5) > 0 {
				b.ReportMetric(float64(mean(h)-mean(l))/float64(mean(l))*100, "overhead-mean-%")
				b.ReportMetric(float64(pct(h, 0.5)-pct(l, 0.5))/float64(pct(l, 0.5))*100, "overhead-p50-%")
			}
		})
	}
}

// BenchmarkFlood is a repeat offender: one subject exhausts its 10 a minute,
// then sends 10,000 more requests through the handler. redis-% is the share
// of the flood that reached Redis (limiter Stats), the rest denied by the
// local deny cache.
func BenchmarkFlood(b *testing.B) {
	s := newBenchStack(b, 10, time.Minute, 1)
	ctx := context.Background()
	var reached, sent uint64
	n := 0
	for b.Loop() {
		n++
		ev := restEvent(fmt.Sprintf("flood-%d-%d", time.Now().UnixNano(), n))
		for range 10 {
			if _, err := s.h.REST(ctx, ev); err != nil {
				b.Fatal(err)
			}
		}
		before := s.lim.Stats().RedisCalls
		for range 10_000 {
			resp, err := s.h.REST(ctx, ev)
			if err != nil || resp.PolicyDocument.Statement[0].Effect != "Deny" {
				b.Fatalf("flood REST() = %+v, %v; want Deny", resp, err)
			}
		}
		reached += s.lim.Stats().RedisCalls - before
		sent += 10_000
	}
	b.ReportMetric(float64(reached)/float64(sent)*100, "redis-%")
	b.ReportMetric(float64(reached)/float64(n), "redis-calls/flood")
}

// BenchmarkInvoke is the whole Lambda path of one REST event at 1 caller:
// JSON payload in (the sample in events/), JSON policy out.
func BenchmarkInvoke(b *testing.B) {
	s := newBenchStack(b, 1_000_000_000, time.Second, 1)
	payload, err := os.ReadFile("../../../events/authorizer-rest.json")
	if err != nil {
		b.Fatal(err)
	}
	// The sample's API id, so the same two rules apply.
	payload = bytes.ReplaceAll(payload, []byte(`"a1b2c3d4e5"`), []byte(`"a1b2c3"`))
	ctx := context.Background()
	b.ReportAllocs()
	lat, elapsed := run(b, 1, func(int, int) int {
		if _, err := s.h.Invoke(ctx, payload); err != nil {
			b.Fatal(err)
		}
		return 0
	})
	b.ReportMetric(µs(pct(lat[0], 0.50)), "p50-µs")
	b.ReportMetric(µs(pct(lat[0], 0.99)), "p99-µs")
	b.ReportMetric(float64(len(lat[0]))/elapsed.Seconds(), "decisions/s")
}
