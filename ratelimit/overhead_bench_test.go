package ratelimit

import (
	"context"
	"io"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limiter"
)

// BenchmarkMiddlewareOverhead measures what the net/http middleware adds
// to the bare limiter call its decision makes: the same Limiter's
// limiter.Allow of the same bucket (DEFAULT_LIMIT 10⁹/1s, token leases
// off, so each makes its Redis round trip), against one request through
// Handler around a ServeMux (pattern lookup, subject source, hygiene,
// rules, that call, the decision's metrics, the mux serving the route).
// The two alternate in one loop, each first on every other iteration, so
// both see the same machine and Redis load (a shared machine's noise
// otherwise swamps a few microseconds). It reports both p50s and the
// middleware's overhead at p50, in %.
//
//	scripts/testenv.sh go test -run '^$' -bench MiddlewareOverhead -benchtime 20000x -count 3 ./ratelimit/
func BenchmarkMiddlewareOverhead(b *testing.B) {
	ctx := context.Background()
	l, err := New(ctx, Options{
		RedisURL: os.Getenv("REDIS_URL"), Prefix: os.Getenv("REDIS_PREFIX") + "overhead:",
		DefaultLimit: "1000000000/1s", Out: io.Discard, LeaseMax: 1, Timeout: time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	m := l.dec.Cache.Snapshot(ctx).Match("shop", "GET", "/orders/{id}", "bench-user")
	if m.API == nil {
		b.Fatal("no default rule")
	}
	bare := limiter.Request{Subject: "bench-user", Buckets: []limiter.Bucket{limiter.BucketFor(m.API)}, Cost: 1}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(http.ResponseWriter, *http.Request) {})
	h := l.Handler(mux, HandlerOptions{API: "shop"})
	req := BenchRequest()
	w := &Discard{H: http.Header{}}

	var lim, mw []time.Duration
	bareCall := func() {
		t0 := time.Now()
		if d, err := l.dec.Limiter.Allow(ctx, bare); err != nil || !d.Allowed {
			b.Fatalf("Allow = %+v, %v", d, err)
		}
		lim = append(lim, time.Since(t0))
	}
	mwCall := func() {
		clear(w.H)
		t0 := time.Now()
		h.ServeHTTP(w, req)
		mw = append(mw, time.Since(t0))
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i++; i%2 == 0 {
			bareCall()
			mwCall()
		} else {
			mwCall()
			bareCall()
		}
	}
	slices.Sort(lim)
	slices.Sort(mw)
	pl, pm := lim[len(lim)/2], mw[len(mw)/2]
	b.ReportMetric(float64(pl.Nanoseconds()), "limiter-p50-ns")
	b.ReportMetric(float64(pm.Nanoseconds()), "middleware-p50-ns")
	b.ReportMetric(100*float64(pm-pl)/float64(pl), "overhead-%")
}
