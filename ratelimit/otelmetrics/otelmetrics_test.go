package otelmetrics_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/otelmetrics"
	"github.com/sluicehq/sluice/ratelimit/prommetrics"
)

// decisions are one of each kind: allowed with tokens left, denied by
// the limit, by the deny cache and failing closed, allowed failing open,
// a shadow denial, an unauthorized request, and an in-flight denial.
var decisions = []ratelimit.Decision{
	{API: "shop", Rule: "r1", Kind: ratelimit.KindRate, Outcome: ratelimit.OutcomeAllow, Limit: 10, Window: time.Minute, Remaining: 7, LimiterTime: 300 * time.Microsecond, Duration: 400 * time.Microsecond},
	{API: "shop", Rule: "r1", Kind: ratelimit.KindRate, Outcome: ratelimit.OutcomeDeny, Limit: 10, Window: time.Minute, Duration: time.Millisecond},
	{API: "shop", Rule: "r1", Kind: ratelimit.KindRate, Outcome: ratelimit.OutcomeDeny, Limit: 10, Window: time.Minute, Cached: true},
	{API: "shop", Rule: "r2", Kind: ratelimit.KindQuota, Outcome: ratelimit.OutcomeDeny, Limit: 5, Window: time.Hour, FailClosed: true},
	{API: "shop", Rule: "r2", Kind: ratelimit.KindQuota, Outcome: ratelimit.OutcomeAllow, Limit: 5, Window: time.Hour, FailOpen: true},
	{API: "shop", Rule: "r3", Kind: ratelimit.KindRate, Outcome: ratelimit.OutcomeShadowDeny, Limit: 1, Window: time.Second},
	{API: "shop", Outcome: ratelimit.OutcomeUnauthorized},
	{API: "shop", Rule: "r4", Kind: ratelimit.KindConcurrency, Outcome: ratelimit.OutcomeDeny, Limit: 2, Window: time.Hour, Duration: time.Millisecond},
}

// wantCounts are the ratelimit.decisions points of decisions, as
// "attribute=value ..." (sorted) → count.
var wantCounts = sortKeys(map[string]int64{
	"ratelimit.decision=allow ratelimit.fail_open=false ratelimit.policy=r1 ratelimit.policy.kind=rate ratelimit.policy.quota=10 ratelimit.policy.window=60 sluice.api=shop":                                    1,
	"ratelimit.decision=deny ratelimit.fail_open=false ratelimit.policy=r1 ratelimit.policy.kind=rate ratelimit.policy.quota=10 ratelimit.policy.window=60 ratelimit.rejected_by=limit sluice.api=shop":         1,
	"ratelimit.decision=deny ratelimit.fail_open=false ratelimit.policy=r1 ratelimit.policy.kind=rate ratelimit.policy.quota=10 ratelimit.policy.window=60 ratelimit.rejected_by=deny_cache sluice.api=shop":    1,
	"ratelimit.decision=deny ratelimit.fail_open=false ratelimit.policy=r2 ratelimit.policy.kind=quota ratelimit.policy.quota=5 ratelimit.policy.window=3600 ratelimit.rejected_by=fail_closed sluice.api=shop": 1,
	"ratelimit.decision=allow ratelimit.fail_open=true ratelimit.policy=r2 ratelimit.policy.kind=quota ratelimit.policy.quota=5 ratelimit.policy.window=3600 sluice.api=shop":                                   1,
	"ratelimit.decision=shadow_deny ratelimit.fail_open=false ratelimit.policy=r3 ratelimit.policy.kind=rate ratelimit.policy.quota=1 ratelimit.policy.window=1 sluice.api=shop":                                1,
	"ratelimit.decision=deny ratelimit.fail_open=false ratelimit.policy=r4 ratelimit.policy.kind=concurrency ratelimit.policy.quota=2 ratelimit.policy.window=3600 ratelimit.rejected_by=limit sluice.api=shop": 1,
	"ratelimit.decision=unauthorized ratelimit.fail_open=false sluice.api=shop":                                                                                                                                 1,
})

// sortKeys sorts the attributes of each key as attrs does.
func sortKeys(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		kvs := strings.Fields(k)
		slices.Sort(kvs)
		out[strings.Join(kvs, " ")] = v
	}
	return out
}

func attrs(s attribute.Set) string {
	var out []string
	for _, kv := range s.ToSlice() {
		out = append(out, string(kv.Key)+"="+kv.Value.String())
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestReader records decisions and reads them back with the SDK's own
// ManualReader: the counter's points by attribute set, the remaining
// histogram, both durations and the health gauges.
func TestReader(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: mp, Health: func() ratelimit.Health {
		return ratelimit.Health{BreakerOpen: true, SnapshotAge: 3 * time.Second, InFlight: 4}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decisions {
		m.ObserveDecision(d)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || rm.ScopeMetrics[0].Scope.Name != otelmetrics.ScopeName {
		t.Fatalf("scopes = %+v, want one, %s", rm.ScopeMetrics, otelmetrics.ScopeName)
	}
	got := map[string]metricdata.Aggregation{}
	for _, mt := range rm.ScopeMetrics[0].Metrics {
		got[mt.Name] = mt.Data
	}
	counts := map[string]int64{}
	for _, p := range got["ratelimit.decisions"].(metricdata.Sum[int64]).DataPoints {
		counts[attrs(p.Attributes)] = p.Value
	}
	if diff := cmp.Diff(wantCounts, counts); diff != "" {
		t.Errorf("ratelimit.decisions points (-want +got):\n%s", diff)
	}
	// Remaining: the allowed and denied decisions of a rule, not the
	// shadow denial or the unauthorized one.
	var remaining []string
	for _, p := range got["ratelimit.remaining"].(metricdata.Histogram[int64]).DataPoints {
		remaining = append(remaining, fmt.Sprintf("%s count=%d sum=%d", attrs(p.Attributes), p.Count, p.Sum))
	}
	slices.Sort(remaining)
	wantRemaining := []string{
		"ratelimit.policy.kind=concurrency ratelimit.policy.quota=2 ratelimit.policy.window=3600 ratelimit.policy=r4 count=1 sum=0",
		"ratelimit.policy.kind=quota ratelimit.policy.quota=5 ratelimit.policy.window=3600 ratelimit.policy=r2 count=2 sum=0",
		"ratelimit.policy.kind=rate ratelimit.policy.quota=10 ratelimit.policy.window=60 ratelimit.policy=r1 count=3 sum=7",
	}
	if diff := cmp.Diff(wantRemaining, remaining); diff != "" {
		t.Errorf("ratelimit.remaining points (-want +got):\n%s", diff)
	}
	var durations uint64
	for _, p := range got["ratelimit.decision.duration"].(metricdata.Histogram[float64]).DataPoints {
		durations += p.Count
	}
	if durations != uint64(len(decisions)) {
		t.Errorf("ratelimit.decision.duration counted %d, want %d", durations, len(decisions))
	}
	if lt := got["ratelimit.limiter.duration"].(metricdata.Histogram[float64]).DataPoints; len(lt) != 1 || lt[0].Count != 1 || lt[0].Sum != 0.0003 {
		t.Errorf("ratelimit.limiter.duration = %+v, want one 300 µs call", lt)
	}
	if g := got["sluice.breaker.open"].(metricdata.Gauge[int64]).DataPoints; len(g) != 1 || g[0].Value != 1 {
		t.Errorf("sluice.breaker.open = %+v, want 1", g)
	}
	if g := got["sluice.rules.snapshot.age"].(metricdata.Gauge[float64]).DataPoints; len(g) != 1 || g[0].Value != 3 {
		t.Errorf("sluice.rules.snapshot.age = %+v, want 3", g)
	}
	if g := got["sluice.in_flight"].(metricdata.Gauge[int64]).DataPoints; len(g) != 1 || g[0].Value != 4 {
		t.Errorf("sluice.in_flight = %+v, want 4", g)
	}
}

// TestBounded keeps the policy and api attributes to MaxAttributeValues
// distinct values, under concurrent use.
func TestBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), MaxAttributeValues: 3})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				m.ObserveDecision(ratelimit.Decision{API: fmt.Sprint("api", (i+g)%10), Rule: fmt.Sprint("rule", i), Outcome: ratelimit.OutcomeAllow})
			}
		})
	}
	wg.Wait()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	apis, policies := map[string]bool{}, map[string]bool{}
	for _, p := range rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Sum[int64]).DataPoints {
		a, _ := p.Attributes.Value(otelmetrics.KeyAPI)
		pol, _ := p.Attributes.Value(otelmetrics.KeyPolicy)
		apis[a.AsString()], policies[pol.AsString()] = true, true
	}
	if len(apis) != 4 || !apis[otelmetrics.Other] || len(policies) != 4 || !policies[otelmetrics.Other] {
		t.Errorf("apis %v, policies %v: want 3 of each and %q", apis, policies, otelmetrics.Other)
	}
}

// TestOTLPHTTP exports through the OTLP/HTTP exporter, configured by the
// standard OTEL_* variables alone, to a receiver that decodes the real
// protobuf request.
func TestOTLPHTTP(t *testing.T) {
	rc := testenv.NewOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	ctx := context.Background()
	exp, err := otlpmetrichttp.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))))
	m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decisions {
		m.ObserveDecision(d)
	}
	if err := mp.Shutdown(ctx); err != nil { // flushes
		t.Fatal(err)
	}
	exports := rc.Exports() // the flush waited for the receiver's answer
	if len(exports) == 0 {
		t.Fatal("no export reached the receiver")
	}
	e := exports[0]
	if e.Path != "/v1/metrics" || e.ContentType != "application/x-protobuf" {
		t.Errorf("export to %s as %s, want /v1/metrics as application/x-protobuf", e.Path, e.ContentType)
	}
	counts := e.Sums(otelmetrics.ScopeName, "ratelimit.decisions")
	if diff := cmp.Diff(wantCounts, counts); diff != "" {
		t.Errorf("ratelimit.decisions as received (-want +got):\n%s", diff)
	}
}

// BenchmarkObserve compares the cost of one decision recorded by this
// observer and by prommetrics, in one run (docs/performance.md).
func BenchmarkObserve(b *testing.B) {
	d := decisions[0]
	b.Run("otel", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: mp})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			m.ObserveDecision(d)
		}
	})
	b.Run("prometheus", func(b *testing.B) {
		m, err := prommetrics.New(prometheus.NewRegistry(), prommetrics.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			m.ObserveDecision(d)
		}
	})
}
