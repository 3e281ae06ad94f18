// Package prommetrics exposes the decisions of package ratelimit's
// net/http middleware and Lambda integration wrappers as Prometheus
// metrics, for services on ECS, EKS or EC2 that are scraped rather than
// read from CloudWatch (Sluice's Lambdas write the same counts as EMF):
//
//	m, err := prommetrics.New(prometheus.DefaultRegisterer, prommetrics.Options{Health: rl.Health})
//	if err != nil { … }
//	h := rl.Handler(mux, ratelimit.HandlerOptions{API: "orders", Observer: m})
//	http.Handle("/metrics", promhttp.Handler())
//
// The metrics, under Options.Namespace ("sluice"):
//
//	sluice_decisions_total{api,rule,kind,outcome}  counter: outcome allow, deny, shadowDeny, unauthorized;
//	                                               kind rate, quota, concurrency (none: no rule)
//	sluice_fail_open_total{api,rule}               counter: Redis failed, the rule's failure mode allowed
//	sluice_fail_closed_total{api,rule}             counter: Redis failed, the rule's failure mode denied (429)
//	sluice_deny_cache_hits_total                   counter: denials from the local deny cache, no Redis call
//	sluice_decision_duration_seconds               histogram: the whole decision
//	sluice_redis_latency_seconds                   histogram: the limiter's Redis round trip
//	sluice_breaker_open                            gauge: 1 while the Redis circuit breaker is not closed (with Health)
//	sluice_rules_snapshot_age_seconds              gauge: the age of the rules in use (with Health)
//	sluice_in_flight                               gauge: in-flight slots this process's requests hold now (with Health)
//
// The api and rule labels are bounded: the first Options.MaxLabelValues
// distinct values of each are kept, and any later one is counted under
// "other", so a deployment with many rules (or a caller's routing that
// names many apis) cannot grow the series without bound. The rule and kind
// labels of a decision no rule applied to are "none". A rule has one kind,
// so kind adds no series beyond a rule's.
package prommetrics

import (
	"cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/cardinality"
	"github.com/sluicehq/sluice/ratelimit"
)

// Options configure Metrics.
type Options struct {
	// Namespace prefixes every metric name; "" is "sluice".
	Namespace string
	// MaxLabelValues is the most distinct values the api label, and the
	// rule label, take; later ones are "other". 0 is 100.
	MaxLabelValues int
	// Health, when set, is read at each scrape for the breaker and
	// snapshot gauges: a *ratelimit.Limiter's Health method.
	Health func() ratelimit.Health
	// Buckets are the latency histograms' upper bounds in seconds; nil is
	// 100 µs to 1 s, roughly doubling (a decision on a nearby Redis takes
	// a few hundred µs).
	Buckets []float64
}

// Metrics is a ratelimit.Observer recording into Prometheus collectors.
// It is safe for concurrent use.
type Metrics struct {
	decisions, failOpen, failClosed *prometheus.CounterVec
	cacheHits                       prometheus.Counter
	duration, redis                 prometheus.Histogram
	apis, rules                     cardinality.Set
}

// defaultBuckets are the latency histograms' default bounds, in seconds.
var defaultBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// New returns Metrics with its collectors registered with reg; the error
// is reg's (a collector of the same name registered already).
func New(reg prometheus.Registerer, o Options) (*Metrics, error) {
	o.Namespace = cmp.Or(o.Namespace, "sluice")
	if o.MaxLabelValues <= 0 {
		o.MaxLabelValues = 100
	}
	if o.Buckets == nil {
		o.Buckets = defaultBuckets
	}
	ns := o.Namespace
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "decisions_total",
			Help: "Rate-limit decisions by api, limiting rule, its kind (rate, quota, concurrency) and outcome (allow, deny, shadowDeny, unauthorized)."},
			[]string{"api", "rule", "kind", "outcome"}),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "fail_open_total",
			Help: "Decisions allowed because Redis failed and the rule fails open."}, []string{"api", "rule"}),
		failClosed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "fail_closed_total",
			Help: "Decisions denied because Redis failed and the rule fails closed."}, []string{"api", "rule"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "deny_cache_hits_total",
			Help: "Denials answered from the local deny cache without a Redis call."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "decision_duration_seconds",
			Help: "Time of a whole decision: subject, rules and limiter.", Buckets: o.Buckets}),
		redis: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "redis_latency_seconds",
			Help: "Time of the limiter's Redis call, round trip included.", Buckets: o.Buckets}),
		apis:  cardinality.Set{Max: int64(o.MaxLabelValues)},
		rules: cardinality.Set{Max: int64(o.MaxLabelValues)},
	}
	cs := []prometheus.Collector{m.decisions, m.failOpen, m.failClosed, m.cacheHits, m.duration, m.redis}
	if h := o.Health; h != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "breaker_open",
				Help: "1 while the Redis circuit breaker is open or half open: decisions take the rules' failure modes."}, func() float64 {
				if h().BreakerOpen {
					return 1
				}
				return 0
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "rules_snapshot_age_seconds",
				Help: "Age of the rules snapshot in use."}, func() float64 { return h().SnapshotAge.Seconds() }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "in_flight",
				Help: "In-flight slots this process's requests hold now: taken by concurrency rules, not yet released."},
				func() float64 { return float64(h().InFlight) }),
		)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveDecision records d. It does not allocate once d's labels were
// seen.
func (m *Metrics) ObserveDecision(d ratelimit.Decision) {
	api, rule := label(&m.apis, d.API), label(&m.rules, d.Rule)
	kind := d.Kind
	switch kind {
	case ratelimit.KindRate, ratelimit.KindQuota, ratelimit.KindConcurrency:
	case "":
		kind = None
		if d.Rule != "" {
			kind = ratelimit.KindRate
		}
	default:
		kind = Other
	}
	m.decisions.WithLabelValues(api, rule, kind, d.Outcome).Inc()
	if d.FailOpen {
		m.failOpen.WithLabelValues(api, rule).Inc()
	}
	if d.FailClosed {
		m.failClosed.WithLabelValues(api, rule).Inc()
	}
	if d.Cached {
		m.cacheHits.Inc()
	}
	m.duration.Observe(d.Duration.Seconds())
	if d.LimiterTime > 0 {
		m.redis.Observe(d.LimiterTime.Seconds())
	}
}

// Labels of values not kept.
const (
	Other = "other" // a value past MaxLabelValues
	None  = "none"  // no value: no rule applied
)

// label bounds v to the set's values; None for no value.
func label(b *cardinality.Set, v string) string {
	if v == "" {
		return None
	}
	return b.Keep(v, Other)
}
