package ratelimit

import (
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
)

// Outcome values of a Decision: those of the Decisions metric Sluice's
// authorizer writes to CloudWatch (dimension Outcome).
const (
	OutcomeAllow        = authorizer.OutcomeAllow        // within the limits, or no rule applied, or failed open
	OutcomeDeny         = authorizer.OutcomeDeny         // over a limit, or failed closed: 429
	OutcomeShadowDeny   = authorizer.OutcomeShadowDeny   // a shadow rule would have denied; allowed
	OutcomeUnauthorized = authorizer.OutcomeUnauthorized // no usable subject: 401
)

// Kind values of a Decision: how its rule counts (docs/concurrency.md for
// the in-flight kind).
const (
	KindRate        = string(rules.Rate)        // a token bucket
	KindQuota       = string(rules.Quota)       // a calendar window
	KindConcurrency = string(rules.Concurrency) // requests in flight
)

// Decision is one decision of the middleware or an integration wrapper, as
// an Observer is told of it. It never holds the subject.
type Decision struct {
	// API is the api the rules were matched with.
	API string
	// Rule is the limiting rule's id, the shadow rule's for
	// OutcomeShadowDeny; "" when no rule applied, and for
	// OutcomeUnauthorized.
	Rule string
	// Outcome is one of the Outcome constants.
	Outcome string
	// Kind is Rule's kind, one of the Kind constants; "" when Rule is.
	Kind string
	// FailOpen: Redis failed and the rule's failure mode allowed.
	FailOpen bool
	// FailClosed: Redis failed and the rule's failure mode denied.
	FailClosed bool
	// Cached: the limiter's local deny cache denied without a Redis call.
	Cached bool
	// LimiterTime is the limiter call's time, its Redis round trip
	// included; 0 when there was none (a deny cache hit, a token lease, no
	// rule).
	LimiterTime time.Duration
	// Duration is the whole decision's time: subject, rules, limiter.
	Duration time.Duration
	// Limit and Window are Rule's RateLimit-Policy q and w: tokens per
	// window (a quota's calendar window as RateLimit-Policy states it).
	// Remaining is RateLimit's r: the whole tokens left after this
	// request. All 0 when no rule applied; Remaining is 0 for
	// OutcomeShadowDeny.
	Limit     int64
	Window    time.Duration
	Remaining int64
}

// Observer is told of every decision of the handlers whose options name
// it. ObserveDecision is called on the request's goroutine, before the
// answer is written: it must be quick and safe for concurrent use.
type Observer interface {
	ObserveDecision(Decision)
}

// Health is the state of a Limiter's backends, for gauges.
type Health struct {
	// BreakerOpen is set while the Redis circuit breaker is open or half
	// open: decisions take the rules' failure modes without calling Redis.
	BreakerOpen bool
	// SnapshotAge is the age of the rules snapshot in use.
	SnapshotAge time.Duration
	// InFlight is the in-flight slots this Limiter's requests hold now:
	// taken by concurrency rules and not yet released (their handlers
	// still run).
	InFlight int64
}

// Health returns the state of l's backends now.
func (l *Limiter) Health() Health {
	st := l.dec.Limiter.Stats()
	return Health{BreakerOpen: st.Breaker != limiter.BreakerClosed, SnapshotAge: l.dec.Cache.Age(),
		// Read one after the other, Released may have overtaken Slots.
		InFlight: max(int64(st.Slots)-int64(st.Released), 0)}
}

// CoreObserver returns the core's observer that tells obs each decision
// as a Decision, in the terms the Limiter gives its own: sluice local's
// REST gateway so reports to the metrics of its middleware. Like
// FromDecider, it is for this module: code outside it cannot use the
// result.
func CoreObserver(obs Observer) authorizer.Observe {
	// Decision has Observation's fields, in its order: a field added to
	// one and not the other fails this conversion at build time.
	return func(ob authorizer.Observation) { obs.ObserveDecision(Decision(ob)) }
}
