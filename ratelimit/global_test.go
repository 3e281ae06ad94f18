package ratelimit_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
	"github.com/sluicehq/sluice/ratelimit"
)

// globalLedger creates a ledger table of the test's own on the test
// dynalite and returns a Ledger over it per Region (each Region has its
// own client, as each has its own Lambda role).
func globalLedger(t testing.TB, regions int) []ratelimit.Ledger {
	t.Helper()
	endpoint, name := ledgertest.Table(t)
	var out []ratelimit.Ledger
	for range regions {
		out = append(out, ledger.New(ledgertest.Client(t, endpoint), ledger.Options{Table: name, Timeout: 2 * time.Second}))
	}
	return out
}

// TestGlobalMiddleware: two Regions, each with its own rules database and
// key prefix and the same rules file applied (so the same global rule
// under two ids), serve requests through the middleware; between them
// they admit exactly the global quota, and each one's 429 is the usual
// one.
func TestGlobalMiddleware(t *testing.T) {
	const limit = 20
	leds := globalLedger(t, 2)
	var hs []http.Handler
	for i := range 2 {
		s := newSetup(t)
		s.addRules(t, map[string]any{"api": "shop", "route": "*", "subject": "*", "kind": "quota", "limit": limit, "period": "1d", "global": true})
		rl := s.limiterWith(t, ratelimit.Options{Ledger: leds[i], Regions: 2})
		mux := http.NewServeMux()
		mux.HandleFunc("GET /items/{id}", func(http.ResponseWriter, *http.Request) {})
		hs = append(hs, rl.Handler(mux, ratelimit.HandlerOptions{API: "shop"}))
	}
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 2 * limit {
		wg.Go(func() {
			r := httptest.NewRequest("GET", "/items/1", nil)
			r.Header.Set("X-Api-Key", "tenant-global")
			w := httptest.NewRecorder()
			hs[i%2].ServeHTTP(w, r)
			if w.Code == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
				t.Error("a 429 without Retry-After")
			}
			mu.Lock()
			codes[w.Code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusOK] > limit {
		t.Fatalf("codes %v: more than the global limit %d admitted", codes, limit)
	}
	// Demand was twice the limit: every token not admitted sits in a
	// Region's pool (the ledger gave out the whole budget).
	if codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 2*limit {
		t.Errorf("codes %v: want only 200 and 429", codes)
	}
	t.Logf("codes %v", codes)
}

// BenchmarkGlobalMiddleware measures a decision through the middleware for
// a regional quota and for the same quota global (one Region's share of a
// ledger on dynalite), taking turns request by request in one run, so
// that both see the same machine: the p50 and p99 of each, and their
// ratios. The global quota is large, so its pool refills in the
// background and no request waits on the ledger.
//
//	scripts/testenv.sh go test -run '^$' -bench GlobalMiddleware -benchtime 20000x -count 6 ./ratelimit/
func BenchmarkGlobalMiddleware(b *testing.B) {
	leds := globalLedger(b, 1)
	var hs [2]http.Handler
	for k, global := range []bool{false, true} {
		s := newSetup(b)
		s.addRules(b, map[string]any{"api": "shop", "route": "*", "subject": "*", "kind": "quota", "limit": 1_000_000_000, "period": "1mo", "global": global})
		o := ratelimit.Options{LeaseMax: 1}
		if global {
			o.Ledger, o.Regions = leds[0], 3
		}
		rl := s.limiterWith(b, o)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /items/{id}", func(http.ResponseWriter, *http.Request) {})
		hs[k] = rl.Handler(mux, ratelimit.HandlerOptions{API: "shop"})
	}
	lat := [2][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % 2
		r := httptest.NewRequest("GET", "/items/1", nil)
		r.Header.Set("X-Api-Key", "bench-tenant")
		w := httptest.NewRecorder()
		start := time.Now()
		hs[k].ServeHTTP(w, r)
		lat[k] = append(lat[k], time.Since(start))
		if w.Code != http.StatusOK {
			b.Fatalf("request %d = %d", i, w.Code)
		}
	}
	b.StopTimer()
	if b.N < 2 {
		return // the first, one-iteration run sizes b.N
	}
	var p50, p99 [2]float64
	for k := range lat {
		slices.Sort(lat[k])
		p50[k] = float64(lat[k][len(lat[k])/2].Nanoseconds()) / 1000
		p99[k] = float64(lat[k][len(lat[k])*99/100].Nanoseconds()) / 1000
	}
	b.ReportMetric(p50[0], "regional-p50-µs")
	b.ReportMetric(p99[0], "regional-p99-µs")
	b.ReportMetric(p50[1], "global-p50-µs")
	b.ReportMetric(p99[1], "global-p99-µs")
	b.ReportMetric(p50[1]/p50[0], "p50-ratio")
	b.ReportMetric(p99[1]/p99[0], "p99-ratio")
}
