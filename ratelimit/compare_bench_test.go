package ratelimit_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	ulule "github.com/ulule/limiter/v3"
	ululehttp "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/prommetrics"
)

// latencies times each call of f and reports its p50 and p99 beside
// Go's mean.
func latencies(b *testing.B, f func()) {
	b.Helper()
	b.ReportAllocs()
	ds := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		f()
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	if len(ds) > 0 {
		b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds()), "p99-ns")
	}
}

// BenchmarkMiddleware compares, in one run on the tests' Redis, one
// allowed request of one caller:
//
//   - limiter: the bare limiter call Sluice's decision makes (one token
//     bucket of 10⁹ a second, the same Lua script and Redis round trip),
//     token leases off;
//   - sluice: that request through ratelimit's net/http middleware around
//     a ServeMux (pattern lookup, subject source, hygiene, rules, the same
//     limiter call), with no rule but DEFAULT_LIMIT 10⁹/1s, leases off
//     (LeaseMax 1);
//   - sluice+prometheus: the same with the Prometheus observer;
//   - sluice-leases: the middleware with token leases of 64, the default:
//     a caller this process sees often is admitted from a lease, most
//     requests without a Redis call;
//   - httprate: go-chi/httprate v0.16.1's in-memory sliding window, no
//     Redis (its local counter, for scale);
//   - ulule: ulule/limiter v3.11.2's stdlib middleware with its Redis
//     store, a fixed window, on the same Redis.
//
// Every request is allowed, so each makes its store call. Sequential
// calls, so p50 is one request's latency:
//
//	scripts/testenv.sh go test -run '^$' -bench Middleware -benchtime 20000x ./ratelimit/
func BenchmarkMiddleware(b *testing.B) {
	ctx := context.Background()
	prefix := os.Getenv("REDIS_PREFIX") + "bench:"
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opt) // every Redis contender's
	defer rdb.Close()
	newLimiter := func(leaseMax int) *ratelimit.Limiter {
		rl, err := ratelimit.New(ctx, ratelimit.Options{
			Redis: rdb, Prefix: prefix,
			DefaultLimit: "1000000000/1s", Out: io.Discard, LeaseMax: leaseMax, Timeout: time.Second,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(rl.Close)
		return rl
	}
	rl, leased := newLimiter(1), newLimiter(0) // leases off; the default, 64

	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("GET /orders/{id}", ok)
	req := ratelimit.BenchRequest()
	req.RemoteAddr = "203.0.113.7:4242"
	serve := func(h http.Handler) func() {
		w := &ratelimit.Discard{H: http.Header{}}
		return func() {
			clear(w.H)
			h.ServeHTTP(w, req)
		}
	}

	bare := limiter.New(rdb, limiter.Options{Prefix: prefix + "bare:", Timeout: time.Second})
	buckets := []limiter.Bucket{{ID: "bench", Limit: 1_000_000_000, Period: time.Second}}
	prom, err := prommetrics.New(prometheus.NewRegistry(), prommetrics.Options{Health: rl.Health})
	if err != nil {
		b.Fatal(err)
	}
	store, err := ululeredis.NewStoreWithOptions(rdb, ulule.StoreOptions{Prefix: prefix + "ulule", MaxRetry: 1})
	if err != nil {
		b.Fatal(err)
	}
	byKey := func(r *http.Request) string { return r.Header.Get("X-Api-Key") }
	ululeMW := ululehttp.NewMiddleware(ulule.New(store, ulule.Rate{Period: time.Second, Limit: 1_000_000_000}), ululehttp.WithKeyGetter(byKey))
	httprateMW := httprate.LimitBy(1_000_000_000, time.Second, func(r *http.Request) (string, error) { return byKey(r), nil })

	contenders := []struct {
		name string
		f    func()
	}{
		{"limiter", func() {
			// Cost 1, as the middleware's: a Request without a Cost is a
			// peek (peek.lua, which writes nothing), and measured as one
			// it made the middleware look 12–14 % slower than this call.
			if d, err := bare.Allow(ctx, limiter.Request{Subject: "bench-user", Buckets: buckets, Cost: 1}); err != nil || !d.Allowed {
				b.Fatalf("Allow = %+v, %v", d, err)
			}
		}},
		{"sluice", serve(rl.Handler(mux, ratelimit.HandlerOptions{API: "shop"}))},
		{"sluice+prometheus", serve(rl.Handler(mux, ratelimit.HandlerOptions{API: "shop", Observer: prom}))},
		{"sluice-leases", serve(leased.Handler(mux, ratelimit.HandlerOptions{API: "shop"}))},
		{"httprate", serve(httprateMW(mux))},
		{"ulule", serve(ululeMW.Handler(mux))},
	}
	for _, bm := range contenders {
		b.Run(bm.name, func(b *testing.B) { latencies(b, bm.f) })
	}
	// The same calls interleaved, one of each per iteration in a rotating
	// order, so every contender sees the same machine and Redis load: the
	// p50s to compare on a shared machine.
	b.Run("interleaved", func(b *testing.B) {
		ds := make([][]time.Duration, len(contenders))
		i := 0
		for b.Loop() {
			i++
			for j := range contenders {
				k := (i + j) % len(contenders)
				t0 := time.Now()
				contenders[k].f()
				ds[k] = append(ds[k], time.Since(t0))
			}
		}
		for k, c := range contenders {
			slices.Sort(ds[k])
			b.ReportMetric(float64(ds[k][len(ds[k])/2].Nanoseconds()), c.name+"-p50-ns")
		}
	})
}
