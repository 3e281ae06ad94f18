package limiter

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgerproxy"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// BenchmarkGlobalSparse is the long tail of global budgets: SPARSE
// subjects (default 300) each making one request a simulated minute for
// MINUTES (default 60), in turn through three Regions 12, 30 and 70 ms from one
// dynalite ledger, under a global quota of 100,000 a month each. The
// clock of ledger windows is simulated (no sleep); Redis and the ledger
// are real. It reports ledger writes per decision, the p99 of a global
// decision against a regional one made beside it, and what the pools
// hold at the end as a share of what the ledger gave out. The first
// decision of a subject in a Region waits for a take: one in 20 in an
// hour (the p99's tail), one in 14,400 over a month.
//
//	scripts/testenv.sh go test -run '^$' -bench GlobalSparse -benchtime 1x ./internal/limiter/
func BenchmarkGlobalSparse(b *testing.B) {
	endpoint, table := ledgertest.Table(b)
	subjects := envInt("SPARSE", 300)
	minutes := envInt("MINUTES", 60)
	sparse(b, endpoint, table, subjects, minutes)
}

func sparse(b *testing.B, endpoint, table string, subjects, minutes int) {
	rdb := newClient(b, 16)
	for range b.N {
		now := time.Date(2027, 1, 4, 10, 0, 0, 0, time.UTC)
		var regions []*Limiter
		for i, d := range []time.Duration{12 * time.Millisecond, 30 * time.Millisecond, 70 * time.Millisecond} {
			p, err := ledgerproxy.New(ledgerproxy.Options{Target: endpoint, Delay: func() time.Duration { return d }})
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(p)
			defer srv.Close()
			prefix := testPrefix(b, rdb)
			l := New(rdb, Options{Prefix: prefix, Timeout: time.Second, DenyCacheSize: -1,
				Ledger:  ledger.New(ledgertest.Client(b, srv.URL), ledger.Options{Table: table}),
				Regions: 3, Region: fmt.Sprint("r", i), LedgerTimeout: 500 * time.Millisecond})
			l.global.clock = func() time.Time { return now }
			defer l.Close(context.Background())
			regions = append(regions, l)
		}
		run := testenv.Random(b)
		global := Bucket{ID: "q", Limit: 100_000, Period: 30 * 24 * time.Hour, Window: Monthly, Global: "sparse"}
		regional := Bucket{ID: "r", Limit: 100_000, Period: 30 * 24 * time.Hour, Window: Monthly}
		var gl, rl []time.Duration
		failed := 0
		b.ResetTimer()
		for m := range minutes {
			for s := range subjects {
				now = time.Date(2027, 1, 4, 10, m, 0, 0, time.UTC).Add(time.Duration(s) * time.Minute / time.Duration(subjects))
				l := regions[(s+m)%len(regions)]
				subject := fmt.Sprintf("sparse-%s-%d", run, s)
				t0 := time.Now()
				d, err := l.Allow(context.Background(), Request{Subject: subject, Buckets: []Bucket{global}, Cost: 1})
				gl = append(gl, time.Since(t0))
				if err != nil {
					failed++ // the ledger slower than LedgerTimeout: the failure mode
				} else if !d.Allowed {
					b.Fatalf("minute %d subject %d: %+v", m, s, d)
				}
				t0 = time.Now()
				if _, err := l.Allow(context.Background(), Request{Subject: subject, Buckets: []Bucket{regional}, Cost: 1}); err != nil {
					b.Fatal(err)
				}
				rl = append(rl, time.Since(t0))
			}
			// The idle sweep, on the simulated clock (its loop ticks on the
			// real one, which hardly moves here).
			for _, l := range regions {
				l.global.sweep(l, now)
			}
		}
		b.StopTimer()
		var writes, taken, given, waits uint64
		var pools int64
		for _, l := range regions {
			l.global.bg.Wait()
			st := l.GlobalStats()
			writes += st.Takes + st.Gives
			taken += st.Taken
			given += st.Given
			waits += st.Waits
			l.global.mu.Lock()
			for _, p := range l.global.pools {
				n, _ := rdb.Get(context.Background(), p.key).Int64()
				pools += n
			}
			l.global.mu.Unlock()
		}
		decisions := float64(minutes * subjects)
		p99 := func(xs []time.Duration) float64 {
			slices.Sort(xs)
			return float64(xs[len(xs)*99/100]) / float64(time.Millisecond)
		}
		b.ReportMetric(float64(writes)/decisions, "ledger-writes/decision")
		b.ReportMetric(float64(waits)/decisions, "waits/decision")
		b.ReportMetric(float64(failed)/decisions, "ledger-failed/decision")
		b.ReportMetric(p99(gl), "p99-global-ms")
		b.ReportMetric(p99(rl), "p99-regional-ms")
		b.ReportMetric(p99(gl)/p99(rl), "p99-ratio")
		b.ReportMetric(100*float64(pools)/float64(taken-given), "pooled-%")
		b.ReportMetric(float64(pools)/float64(subjects), "pooled/subject")
	}
}
