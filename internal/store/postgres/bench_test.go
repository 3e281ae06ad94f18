package postgres_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
)

// BenchmarkStore measures the admin path's database work per operation and
// reports p50/p99 latency. Run with
//
//	scripts/testenv.sh go test -run '^$' -bench Store ./internal/store/postgres/
func BenchmarkStore(b *testing.B) {
	s := pgtest.NewStore(b)
	ctx := b.Context()
	limit := int64(10)
	seed := make([]rules.Rule, 0, 1000)
	for i := range 1000 {
		r, err := s.CreateRule(ctx, rules.Rule{API: "api", Route: "*", Subject: fmt.Sprintf("seed-%d", i), Limit: &limit, Period: rules.Period(time.Minute)}, "bench")
		if err != nil {
			b.Fatal(err)
		}
		seed = append(seed, r)
	}
	report := func(b *testing.B, d []time.Duration) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, "p99-ms")
	}
	run := func(name string, op func(i int) error) {
		b.Run(name, func(b *testing.B) {
			var d []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				if err := op(i); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(start))
				i++
			}
			report(b, d)
		})
	}
	n := 0
	run("Create", func(int) error {
		n++
		_, err := s.CreateRule(ctx, rules.Rule{API: "api", Route: "GET /x", Subject: fmt.Sprintf("c-%d-%d", time.Now().UnixNano(), n), Limit: &limit, Period: rules.Period(time.Minute)}, "bench")
		return err
	})
	run("Get", func(i int) error { _, err := s.GetRule(ctx, seed[i%len(seed)].ID); return err })
	run("Update", func(i int) error {
		r := seed[i%len(seed)]
		r.Description = fmt.Sprint("v", i) // a change: an unchanged update writes nothing
		_, err := s.UpdateRule(ctx, r, 0, "bench")
		return err
	})
	run("List100", func(int) error { _, err := s.ListRules(ctx, rules.Filter{API: "api"}); return err })
	run("History", func(i int) error { _, err := s.RuleHistory(ctx, seed[i%len(seed)].ID); return err })
	run("LoadAll", func(int) error { _, err := s.LoadAll(ctx); return err })
}
