// Package otelmetrics records the decisions of package ratelimit's
// net/http middleware and Lambda integration wrappers as OpenTelemetry
// metrics, the way prommetrics records them for Prometheus. It depends
// on the OpenTelemetry metric API alone: the service picks the SDK and
// the exporter (OTLP over HTTP, configured by the standard OTEL_*
// variables, in examples/service).
//
//	m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: provider, Health: rl.Health})
//	if err != nil { … }
//	h := rl.Handler(mux, ratelimit.HandlerOptions{API: "orders", Observer: m})
//
// The instruments and their attributes mirror the IETF RateLimit fields
// (RateLimit-Policy's q and w, RateLimit's r) and the decision; they are a
// proposal for OpenTelemetry's semantic conventions (issue 3361), written
// down in docs/clients.md next to ASP.NET Core's stable names:
//
//	ratelimit.decisions          counter {decision}: ratelimit.policy, ratelimit.policy.quota,
//	                             ratelimit.policy.window, ratelimit.policy.kind, ratelimit.decision,
//	                             ratelimit.fail_open, ratelimit.rejected_by (denials), sluice.api
//	ratelimit.remaining          histogram {token}: r after the request; the policy attributes
//	ratelimit.decision.duration  histogram s: the whole decision; ratelimit.decision
//	ratelimit.limiter.duration   histogram s: the limiter's Redis round trip
//	sluice.breaker.open          gauge: 1 while the Redis circuit breaker is not closed (with Health)
//	sluice.rules.snapshot.age    gauge s: the age of the rules in use (with Health)
//	sluice.in_flight             gauge {slot}: in-flight slots this process's requests hold now (with Health)
//
// Cardinality is bounded, and no attribute ever holds a subject: the first
// Options.MaxAttributeValues distinct policies, and apis, are kept, any
// later one is "other"; a decision no rule applied to has no policy
// attributes.
package otelmetrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/internal/cardinality"
	"github.com/sluicehq/sluice/ratelimit"
)

// ScopeName is the instrumentation scope of the instruments.
const ScopeName = "github.com/sluicehq/sluice/ratelimit"

// The attribute keys (see the package comment).
const (
	KeyPolicy     = attribute.Key("ratelimit.policy")
	KeyQuota      = attribute.Key("ratelimit.policy.quota")
	KeyWindow     = attribute.Key("ratelimit.policy.window")
	KeyKind       = attribute.Key("ratelimit.policy.kind") // rate, quota or concurrency (ratelimit.Kind…)
	KeyDecision   = attribute.Key("ratelimit.decision")
	KeyFailOpen   = attribute.Key("ratelimit.fail_open")
	KeyRejectedBy = attribute.Key("ratelimit.rejected_by")
	KeyAPI        = attribute.Key("sluice.api")
)

// Values of ratelimit.decision.
const (
	DecisionAllow        = "allow"
	DecisionDeny         = "deny"
	DecisionShadowDeny   = "shadow_deny" // a shadow rule would have denied; allowed
	DecisionUnauthorized = "unauthorized"
)

// Values of ratelimit.rejected_by, set on denials only.
const (
	RejectedByLimit      = "limit"       // the bucket had too few tokens
	RejectedByDenyCache  = "deny_cache"  // a recent denial, answered in process
	RejectedByFailClosed = "fail_closed" // Redis failed; the rule fails closed
)

// Other is the value of a policy or api past Options.MaxAttributeValues.
const Other = "other"

// Options configure Metrics.
type Options struct {
	// MeterProvider makes the meter; nil is otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// MaxAttributeValues is the most distinct values ratelimit.policy,
	// and sluice.api, take; later ones are "other". 0 is 100.
	MaxAttributeValues int
	// Health, when set, is read at each collection for the breaker and
	// snapshot gauges: a *ratelimit.Limiter's Health method.
	Health func() ratelimit.Health
}

// Metrics is a ratelimit.Observer recording into OpenTelemetry
// instruments. It is safe for concurrent use.
type Metrics struct {
	remaining         metric.Int64Histogram
	count             metric.Int64Counter
	duration, limiter metric.Float64Histogram
	apis, policies    cardinality.Set

	// sets caches each decision shape's attribute options, so that a
	// decision seen before allocates none: at most maxSets of them.
	sets  sync.Map // key → *options
	nsets atomic.Int64
}

// maxSets bounds the cache of attribute sets; past it a decision builds
// its set each time.
const maxSets = 10_000

type key struct {
	api, policy          string
	quota                int64
	window               time.Duration
	kind                 string
	outcome              string
	failOpen, rejectedBy string
}

type options struct {
	remaining, duration []metric.RecordOption
	add                 []metric.AddOption
}

// New returns Metrics with its instruments created on the provider's
// meter for ScopeName.
func New(o Options) (*Metrics, error) {
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if o.MaxAttributeValues <= 0 {
		o.MaxAttributeValues = 100
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{apis: cardinality.Set{Max: int64(o.MaxAttributeValues)}, policies: cardinality.Set{Max: int64(o.MaxAttributeValues)}}
	var err error
	if m.count, err = meter.Int64Counter("ratelimit.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Rate-limit decisions by policy (rule), its quota and window, and the decision.")); err != nil {
		return nil, err
	}
	if m.remaining, err = meter.Int64Histogram("ratelimit.remaining", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens left in the limiting policy's bucket after the request (RateLimit's r)."),
		metric.WithExplicitBucketBoundaries(0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10000, 100000)); err != nil {
		return nil, err
	}
	bounds := metric.WithExplicitBucketBoundaries(.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1)
	if m.duration, err = meter.Float64Histogram("ratelimit.decision.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of a whole decision: subject, rules and limiter."), bounds); err != nil {
		return nil, err
	}
	if m.limiter, err = meter.Float64Histogram("ratelimit.limiter.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of the limiter's Redis call, round trip included."), bounds); err != nil {
		return nil, err
	}
	if h := o.Health; h != nil {
		breaker, err := meter.Int64ObservableGauge("sluice.breaker.open",
			metric.WithDescription("1 while the Redis circuit breaker is open or half open: decisions take the rules' failure modes."))
		if err != nil {
			return nil, err
		}
		age, err := meter.Float64ObservableGauge("sluice.rules.snapshot.age", metric.WithUnit("s"),
			metric.WithDescription("Age of the rules snapshot in use."))
		if err != nil {
			return nil, err
		}
		inFlight, err := meter.Int64ObservableGauge("sluice.in_flight", metric.WithUnit("{slot}"),
			metric.WithDescription("In-flight slots this process's requests hold now: taken by concurrency rules, not yet released."))
		if err != nil {
			return nil, err
		}
		if _, err := meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
			st := h()
			open := int64(0)
			if st.BreakerOpen {
				open = 1
			}
			obs.ObserveInt64(breaker, open)
			obs.ObserveFloat64(age, st.SnapshotAge.Seconds())
			obs.ObserveInt64(inFlight, st.InFlight)
			return nil
		}, breaker, age, inFlight); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveDecision records d. It does not allocate once a decision of the
// same shape (api, policy, numbers, outcome) was seen.
func (m *Metrics) ObserveDecision(d ratelimit.Decision) {
	k := key{api: value(&m.apis, d.API), outcome: decisionValue(d.Outcome), failOpen: "false"}
	if d.Rule != "" {
		k.policy, k.quota, k.window, k.kind = value(&m.policies, d.Rule), d.Limit, d.Window, kindValue(d.Kind)
	}
	if d.FailOpen {
		k.failOpen = "true"
	}
	if k.outcome == DecisionDeny {
		switch {
		case d.FailClosed:
			k.rejectedBy = RejectedByFailClosed
		case d.Cached:
			k.rejectedBy = RejectedByDenyCache
		default:
			k.rejectedBy = RejectedByLimit
		}
	}
	o := m.options(k)
	ctx := context.Background()
	m.count.Add(ctx, 1, o.add...)
	if k.policy != "" && k.outcome != DecisionShadowDeny && k.outcome != DecisionUnauthorized {
		m.remaining.Record(ctx, d.Remaining, o.remaining...)
	}
	m.duration.Record(ctx, d.Duration.Seconds(), o.duration...)
	if d.LimiterTime > 0 {
		m.limiter.Record(ctx, d.LimiterTime.Seconds())
	}
}

// options returns k's attribute options, cached.
func (m *Metrics) options(k key) *options {
	if o, ok := m.sets.Load(k); ok {
		return o.(*options)
	}
	var policy []attribute.KeyValue
	if k.policy != "" {
		policy = []attribute.KeyValue{KeyPolicy.String(k.policy), KeyQuota.Int64(k.quota), KeyWindow.Int64(int64(k.window / time.Second)), KeyKind.String(k.kind)}
	}
	all := append([]attribute.KeyValue{KeyAPI.String(k.api), KeyDecision.String(k.outcome), KeyFailOpen.Bool(k.failOpen == "true")}, policy...)
	if k.rejectedBy != "" {
		all = append(all, KeyRejectedBy.String(k.rejectedBy))
	}
	o := &options{
		add:       []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(all...))},
		remaining: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(policy...))},
		duration:  []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(KeyDecision.String(k.outcome)))},
	}
	if m.nsets.Load() < maxSets {
		if prev, loaded := m.sets.LoadOrStore(k, o); loaded {
			return prev.(*options)
		}
		m.nsets.Add(1)
	}
	return o
}

// decisionValue is ratelimit.decision's value of an Outcome.
func decisionValue(outcome string) string {
	switch outcome {
	case ratelimit.OutcomeDeny:
		return DecisionDeny
	case ratelimit.OutcomeShadowDeny:
		return DecisionShadowDeny
	case ratelimit.OutcomeUnauthorized:
		return DecisionUnauthorized
	}
	return DecisionAllow
}

// kindValue is ratelimit.policy.kind's value of a Decision's Kind: one of
// the three, else Other.
func kindValue(kind string) string {
	switch kind {
	case ratelimit.KindRate, ratelimit.KindQuota, ratelimit.KindConcurrency:
		return kind
	case "":
		return ratelimit.KindRate
	}
	return Other
}

// value bounds v to the set's values; empty for no value.
func value(b *cardinality.Set, v string) string {
	if v == "" {
		return ""
	}
	return b.Keep(v, Other)
}
