package prommetrics_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/prommetrics"
)

// scrape answers a GET /metrics of reg as Prometheus scrapes it.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(w.Body)
	return string(b)
}

// TestObserve records decisions of each kind and reads them back from a
// scrape: the counters by api, rule, kind and outcome, fail-open and
// fail-closed, deny cache hits, both histograms and the health gauges.
func TestObserve(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := prommetrics.New(reg, prommetrics.Options{Health: func() ratelimit.Health {
		return ratelimit.Health{BreakerOpen: true, SnapshotAge: 3 * time.Second, InFlight: 4}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []ratelimit.Decision{
		{API: "shop", Rule: "r1", Kind: "rate", Outcome: ratelimit.OutcomeAllow, LimiterTime: 300 * time.Microsecond, Duration: 400 * time.Microsecond},
		{API: "shop", Rule: "r1", Kind: "rate", Outcome: ratelimit.OutcomeAllow, LimiterTime: 300 * time.Microsecond, Duration: 400 * time.Microsecond},
		{API: "shop", Rule: "r1", Kind: "rate", Outcome: ratelimit.OutcomeDeny, Cached: true, Duration: 10 * time.Microsecond},
		{API: "shop", Rule: "r2", Kind: "quota", Outcome: ratelimit.OutcomeAllow, FailOpen: true, Duration: time.Millisecond},
		{API: "shop", Rule: "r3", Kind: "concurrency", Outcome: ratelimit.OutcomeDeny, FailClosed: true, Duration: time.Millisecond},
		{API: "shop", Rule: "r4", Kind: "sideways", Outcome: ratelimit.OutcomeAllow, Duration: time.Millisecond},
		{API: "shop", Outcome: ratelimit.OutcomeUnauthorized, Duration: time.Microsecond},
	} {
		m.ObserveDecision(d)
	}
	got := scrape(t, reg)
	for _, want := range []string{
		`sluice_decisions_total{api="shop",kind="rate",outcome="allow",rule="r1"} 2`,
		`sluice_decisions_total{api="shop",kind="rate",outcome="deny",rule="r1"} 1`,
		`sluice_decisions_total{api="shop",kind="quota",outcome="allow",rule="r2"} 1`,
		`sluice_decisions_total{api="shop",kind="concurrency",outcome="deny",rule="r3"} 1`,
		`sluice_decisions_total{api="shop",kind="other",outcome="allow",rule="r4"} 1`,
		`sluice_decisions_total{api="shop",kind="none",outcome="unauthorized",rule="none"} 1`,
		`sluice_fail_open_total{api="shop",rule="r2"} 1`,
		`sluice_fail_closed_total{api="shop",rule="r3"} 1`,
		`sluice_deny_cache_hits_total 1`,
		`sluice_decision_duration_seconds_count 7`,
		`sluice_redis_latency_seconds_count 2`,
		`sluice_redis_latency_seconds_bucket{le="0.0005"} 2`,
		`sluice_breaker_open 1`,
		`sluice_rules_snapshot_age_seconds 3`,
		`sluice_in_flight 4`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("scrape lacks %q:\n%s", want, got)
		}
	}
}

// TestLabelsBounded records decisions of 1000 rules and 1000 apis from 8
// goroutines: the rule and api labels take at most MaxLabelValues values
// each, the rest counted under "other", and no decision is lost.
func TestLabelsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := prommetrics.New(reg, prommetrics.Options{MaxLabelValues: 10})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				m.ObserveDecision(ratelimit.Decision{API: fmt.Sprint("api", (i+g)%1000), Rule: fmt.Sprint("rule", i), Outcome: ratelimit.OutcomeAllow})
			}
		})
	}
	wg.Wait()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_decisions_total" {
			continue
		}
		apis, rules := map[string]bool{}, map[string]bool{}
		var total float64
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				switch l.GetName() {
				case "api":
					apis[l.GetValue()] = true
				case "rule":
					rules[l.GetValue()] = true
				}
			}
			total += mt.GetCounter().GetValue()
		}
		if len(apis) > 11 || len(rules) > 11 || !apis[prommetrics.Other] || !rules[prommetrics.Other] {
			t.Errorf("%d api and %d rule label values, want at most 10 each and %q", len(apis), len(rules), prommetrics.Other)
		}
		if total != 8000 {
			t.Errorf("decisions counted %v, want 8000", total)
		}
		return
	}
	t.Fatal("no sluice_decisions_total in the scrape")
}

// BenchmarkObserve is the cost a decision pays for its metrics.
func BenchmarkObserve(b *testing.B) {
	m, err := prommetrics.New(prometheus.NewRegistry(), prommetrics.Options{})
	if err != nil {
		b.Fatal(err)
	}
	d := ratelimit.Decision{API: "shop", Rule: "r1", Outcome: ratelimit.OutcomeAllow, LimiterTime: 300 * time.Microsecond, Duration: 400 * time.Microsecond}
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveDecision(d)
	}
}
