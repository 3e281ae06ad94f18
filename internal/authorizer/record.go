package authorizer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/stats"
)

// Decision values of the decision log line (its "decision" key), what the
// stack's Contributor Insights rules filter on.
const (
	DecisionDeny       = "deny"        // a rule denied
	DecisionShadowDeny = "shadow-deny" // a shadow rule would have denied; allowed
	DecisionFailOpen   = "fail-open"   // Redis failed, the rule fails open; allowed
	DecisionFailClosed = "fail-closed" // Redis failed, the rule fails closed; denied
	// DecisionUpstreamDeny: the upstream authorizer did not allow, or
	// answered what Sluice cannot read; 401, no limiter call.
	DecisionUpstreamDeny = "upstream-deny"
)

// Outcome values of an Observation, those of the Decisions metric Sluice's
// authorizer writes to CloudWatch (dimension Outcome).
const (
	OutcomeAllow        = "allow"        // within the limits, or no rule applied, or failed open
	OutcomeDeny         = "deny"         // over a limit, or failed closed
	OutcomeShadowDeny   = "shadowDeny"   // a shadow rule would have denied; allowed
	OutcomeUnauthorized = "unauthorized" // no usable subject
)

// Observation is what an observer is told of one decision. It never holds
// the subject, and it is a value: observing keeps the request and its
// result off the heap.
type Observation struct {
	// API is the api the rules were matched with.
	API string
	// Rule is the id of the rule the outcome belongs to: the limiting
	// rule's, the shadow rule's for OutcomeShadowDeny; "" when no rule
	// applied, and for OutcomeUnauthorized.
	Rule string
	// Outcome is one of the Outcome constants.
	Outcome string
	// Kind is Rule's kind: "rate", "quota" or "concurrency" (rules.Kind;
	// a rule of no stated kind is "rate"); "" when Rule is.
	Kind string
	// FailOpen and FailClosed: Redis failed and the rule's failure mode
	// allowed, or denied.
	FailOpen, FailClosed bool
	// Cached: the limiter's local deny cache denied without a Redis call.
	Cached bool
	// LimiterTime is the limiter call's time, its Redis round trip
	// included; 0 when there was none.
	LimiterTime time.Duration
	// Duration is the whole decision's time: subject, rules, limiter.
	Duration time.Duration
	// Limit, Window and Remaining are the RateLimit fields of Rule (its
	// q and w, and r after this request): tokens per Window, and the
	// whole tokens left. All 0 when no rule applied; Remaining is 0 for a
	// shadow rule's outcome (its bucket is not the one reported).
	Limit     int64
	Window    time.Duration
	Remaining int64
}

// Observe is told of every decision, on the request's goroutine before the
// answer is made: it must be quick and safe for concurrent use.
type Observe func(Observation)

// observation is what an observer is told of res, err.
func observation(req *Request, res *Result, err error, took time.Duration) Observation {
	o := Observation{API: req.API, Rule: res.Rule, FailOpen: res.FailOpen, Cached: res.Cached, LimiterTime: res.LimiterTime, Duration: took,
		Limit: res.Limit, Remaining: res.Remaining}
	if res.Effective != nil {
		o.Window, o.Kind = res.Effective.Period, kindOf(res.Effective)
	}
	switch {
	case errors.Is(err, ErrNoSubject):
		o.Outcome, o.Rule, o.Kind, o.Limit, o.Window, o.Remaining = OutcomeUnauthorized, "", "", 0, 0, 0
	case !res.Allowed:
		o.Outcome, o.FailClosed = OutcomeDeny, err != nil
	case res.ShadowDenied:
		// The shadow rule's outcome, not the enforcing rule's.
		o.Outcome, o.Rule = OutcomeShadowDeny, res.ShadowRule
		o.Limit, o.Window, o.Remaining, o.Kind = 0, 0, 0, ""
		if res.Shadow != nil {
			o.Limit, o.Window, o.Kind = res.Shadow.Limit, res.Shadow.Period, kindOf(res.Shadow)
		}
	default:
		o.Outcome = OutcomeAllow
	}
	return o
}

// kindOf is the Observation's Kind of rule e.
func kindOf(e *rules.Effective) string {
	if e.Kind == "" {
		return string(rules.Rate)
	}
	return string(e.Kind)
}

// inFlightDenied reports whether res, err is a denial by a concurrency
// rule whose slots were all held (not its failure mode's: FailClosed).
func inFlightDenied(res *Result, err error) bool {
	return !res.Allowed && err == nil && res.Effective != nil && res.Effective.Kind == rules.Concurrency
}

// Showable reports whether subjects of kind may be shown as sent: they
// name someone (a verified claim, an upstream authorizer's answer, an
// address) rather than being a secret that lets one in (a header, a
// query parameter, an API key).
func Showable(kind identity.SourceKind) bool {
	return kind.Verified() || kind == identity.SourceIP
}

// recorder is where every decision is recorded, once, whichever edge asked
// for it: the log line, the EMF metrics, the in-process stats and the
// observer.
type recorder struct {
	log     *slog.Logger
	m       *metrics.Metrics
	stats   *stats.Stats
	show    uint32 // bit k: subjects of SourceKind k are shown (Showable kinds only)
	observe Observe
	// failLog samples the lines of a storm of fail-open or fail-closed
	// decisions (see failLog).
	fails *failLog
}

func newRecorder(o *Options) recorder {
	r := recorder{log: o.Logger, m: o.Metrics, stats: o.Stats, observe: o.Observe}
	if r.log == nil {
		r.log = slog.Default()
	}
	for _, k := range o.ShowSubjects {
		if Showable(k) && k < 32 {
			r.show |= 1 << k
		}
	}
	r.fails = &failLog{every: o.FailLogInterval}
	return r
}

// shown is what the log and the stats carry as subject beside its hash:
// subject as sent when its source's kind was opted in and may be shown,
// else "".
func (r *recorder) shown(kind identity.SourceKind, subject string) string {
	if kind == 0 || kind >= 32 || r.show&(1<<kind) == 0 || !Showable(kind) {
		return ""
	}
	return subject
}

// record records one decision of Decide: req, what it returned, and took.
// A missing subject is counted as unauthorized and, behind an upstream
// authorizer, logged at warn (its answer or SUBJECT_SOURCES is wrong);
// anything else is logged when it was not a plain allow and counted in the
// metrics and the stats. The log line and the stats name the subject of
// the rule that bound the answer: a per-IP floor's denial is the IP's, a
// shadow denial the shadow rule's.
func (a *Authorizer) record(ctx context.Context, req *Request, res *Result, err error, took time.Duration) {
	r := &a.rec
	if r.observe != nil {
		r.observe(observation(req, res, err, took))
	}
	if errors.Is(err, ErrNoSubject) {
		r.m.Unauthorized()
		if req.Upstream != nil {
			r.log.LogAttrs(ctx, slog.LevelWarn, "no subject in the upstream authorizer's answer",
				slog.String("api", req.API), slog.String("route", req.Method+" "+req.Resource), slog.Any("error", err))
		}
		return
	}
	var hash, shown string
	if err != nil || res.FailOpen || !res.Allowed || res.ShadowDenied {
		// Only these are hashed: an allowed request pays nothing more.
		subject, kind := res.DimensionSubject, res.DimensionSource
		if res.Allowed && res.ShadowDenied {
			subject, kind = res.ShadowSubject, res.ShadowSource
		}
		if subject == "" { // no rule applied
			subject, kind = res.Subject, 0
		}
		hash, shown = a.SubjectHash(subject), r.shown(kind, subject)
		r.logDecision(ctx, req, res, hash, shown, err)
	}
	r.m.Record(metrics.Outcome{Allowed: res.Allowed, ShadowDenied: res.ShadowDenied, FailOpen: res.FailOpen,
		Cached: res.Cached, InFlight: inFlightDenied(res, err), LimiterTime: res.LimiterTime})
	if err != nil && !res.FailOpen {
		r.m.FailClosed()
	}
	r.stats.Record(stats.Decision{Rule: res.Rule, ShadowRule: res.ShadowRule, API: req.API, SubjectHash: hash, Subject: shown,
		Allowed: res.Allowed, ShadowDenied: res.ShadowDenied, FailOpen: res.FailOpen})
}

// logDecision writes the one line of a decision that was not a plain
// allow: a denial or shadow denial at info, a fail-open at warn, a failure
// at error. Every line carries api, ruleId, dimension (the rule that bound
// the answer: the shadow rule's for a shadow denial), principalId (hash:
// that rule's subject's) and decision, which is what the deployed stack's
// Contributor Insights rules count: it needs LOG_LEVEL info (the default)
// to see denials. A denial served from the local deny cache is logged too,
// so the counts are of denied requests, not of Redis calls. When shown is
// not "" (SUBJECT_SHOW named the subject's source, an identity) the line
// carries it as "subject" beside the hash; a credential never is.
//
// Redis failing, every request fails open or closed at once: those lines
// are sampled (failLog), one a FailLogInterval with the count it stands
// for, so an outage does not write a line per request.
func (r *recorder) logDecision(ctx context.Context, req *Request, res *Result, hash, shown string, err error) {
	level, msg, decision := slog.LevelInfo, "rate limit denied", DecisionDeny
	rule, dim := res.Rule, res.Dimension
	switch {
	case res.FailOpen:
		level, msg, decision = slog.LevelWarn, "rate limit failed open", DecisionFailOpen
	case err != nil:
		level, msg, decision = slog.LevelError, "rate limit decision failed", DecisionFailClosed
	case res.Allowed:
		msg, decision = "rate limit shadow denied", DecisionShadowDeny
		rule, dim = res.ShadowRule, res.ShadowDimension
	}
	if !r.log.Enabled(ctx, level) {
		return
	}
	var skipped int64
	if err != nil {
		var ok bool
		if skipped, ok = r.fails.take(decision == DecisionFailOpen); !ok {
			return
		}
	}
	attrs := []slog.Attr{
		slog.String("decision", decision),
		slog.String("api", req.API),
		slog.String("route", req.Method+" "+req.Resource),
		slog.String("principalId", hash),
		slog.String("ruleId", rule),
		slog.String("dimension", dim),
		slog.Bool("allowed", res.Allowed),
		slog.Bool("failOpen", res.FailOpen),
	}
	if shown != "" {
		attrs = append(attrs, slog.String("subject", shown))
	}
	if err != nil {
		attrs = append(attrs, slog.Int64("suppressed", skipped), slog.Any("error", err))
	}
	r.log.LogAttrs(ctx, level, msg, attrs...)
}
