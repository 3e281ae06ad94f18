// Package authorizer is Sluice's decision, the core every transport asks:
// it takes a Request (API, method, resource template, headers, query, API
// key, source IP), finds its subject, looks up the rules that apply in the
// current snapshot, charges the subject's buckets with one limiter call,
// and records the Result once (log line, metrics, stats, observer).
//
// It knows nothing of Lambda, HTTP or AWS: internal/edge turns each
// transport's request into a Request and a Result into its answer, and
// internal/edge/apigw answers API Gateway's events with it, so the
// Lambdas, the ratelimit middleware, sluice local and the benchmarks all
// run this same code.
package authorizer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/stats"
)

// ErrNoSubject is returned by Decide when no source yields a subject. The
// Lambda adapter answers it with "Unauthorized" (401).
var ErrNoSubject = errors.New("no subject in request")

// Request is one request to decide on.
type Request struct {
	// API is the API Gateway API id (requestContext.apiId).
	API string
	// Method is the HTTP method in any case: Decide canonicalizes it
	// (rules.CanonicalMethod), so every edge matches "get" as GET.
	Method string
	// Resource is the resource template as API Gateway names it,
	// "/orders/{id}", not the concrete path.
	Resource string
	// Headers, Query, APIKey and SourceIP are what the subject sources
	// read. Header names may have any case.
	Headers  map[string]string
	Query    map[string]string
	APIKey   string
	SourceIP string
	// Upstream is what the upstream authorizer said of the caller, when it
	// allowed the request (apigw: invoked as UPSTREAM_AUTHORIZER, or run
	// in process by the ratelimit package): the principal and
	// context:<key> sources read it. Nil without one.
	Upstream *identity.UpstreamIdentity
	// MultiHeaders and MultiQuery are REST APIs' multi-value maps: a
	// subject header or parameter sent twice is refused (nil for HTTP
	// APIs, which join repeated values with commas).
	MultiHeaders map[string][]string
	MultiQuery   map[string][]string
	// Subject, when not empty, is the subject as is: the sources are not
	// consulted (the check API, where the caller names the subject).
	Subject string
	// Cost, when > 0, is the number of tokens to spend, overriding the
	// rules' cost (the check API).
	Cost int64
}

// Result is a decision and the numbers behind it, for the limiting rule
// (see limiter.Decision for which bucket limits).
type Result struct {
	// Allowed says whether the request may pass. Shadow rules never make
	// it false; fail-open makes it true.
	Allowed bool
	// Subject is the subject the request was charged to. It may be a
	// secret (an API key): hash it (Authorizer.SubjectHash) before it is
	// logged or returned.
	Subject string
	// Effective is the limiting rule as applied (its Policy is the
	// RateLimit-Policy item). It is nil when no rule applied and there is
	// no default rule: the request is then allowed without a limiter call,
	// and the numbers below are zero. It belongs to the rules snapshot:
	// do not modify it.
	Effective *rules.Effective
	// Default is set when the configured default rule applied.
	Default bool
	// Rule is the id of the limiting rule (Effective.ID).
	Rule string
	// Dimension is the limiting rule's dimension: identity.DefaultDimension,
	// or the DIMENSIONS name whose bucket limits ("ip" for a per-IP floor);
	// "" when no rule applied.
	Dimension string
	// DimensionSubject is the subject the limiting rule counts: Subject in
	// the default dimension, else that dimension's (the caller's IP for a
	// per-IP floor). A denial is that subject's doing: log lines and stats
	// name its hash. Like Subject, it may be a secret. "" when no rule
	// applied.
	DimensionSubject string
	// DimensionSource is the kind of source DimensionSubject was read
	// from, so that the log and the stats may show an identity (a JWT
	// claim, an upstream's answer) as sent and hash a credential; 0 when
	// the subject was given as is (the check API) or no rule applied.
	DimensionSource identity.SourceKind
	// Limit is the limiting rule's tokens per period.
	Limit int64
	// Remaining is the whole tokens left in the limiting bucket.
	Remaining int64
	// Reset is the time until the limiting bucket is full again.
	Reset time.Duration
	// RetryAfter is 0 when allowed, else the time until the request could
	// pass.
	RetryAfter time.Duration
	// Cost is the number of tokens the request asked for.
	Cost int64
	// ShadowDenied is set when a shadow rule would have denied.
	ShadowDenied bool
	// Shadow is the shadow rule that would have denied, as applied, when
	// ShadowDenied (the first such, in the order Effective's list keeps);
	// nil otherwise. A shadow outcome belongs to it, not to the rule that
	// bound the answer: ShadowRule, ShadowDimension, ShadowSubject and
	// ShadowSource are its id, its dimension, the subject it counts and
	// that subject's source kind, as Rule, Dimension, DimensionSubject and
	// DimensionSource are the limiting rule's.
	Shadow          *rules.Effective
	ShadowRule      string
	ShadowDimension string
	ShadowSubject   string
	ShadowSource    identity.SourceKind
	// FailOpen is set when Redis failed and the failure mode allowed.
	FailOpen bool
	// FailClosed is set when Redis failed and the failure mode denied
	// (Decide then returns the error too).
	FailClosed bool
	// Cached is set when the limiter's local deny cache denied without a
	// Redis call.
	Cached bool
	// Context holds the verified claims the jwt:<claim> sources read, by
	// their context keys (ClaimContextKey), for the backend. Nil when there
	// are none. An upstream authorizer's context is not here: the adapter
	// answers with it as the upstream gave it (apigw).
	Context map[string]string
	// LimiterTime is how long the limiter call took (Redis round trip
	// included); 0 when there was none (the deny cache denied, or a token
	// lease admitted).
	LimiterTime time.Duration
	// Slots are the in-flight slots an allowed request holds, one per
	// concurrency rule that applied: Release them when the request's work
	// ends. Where nothing can (an API Gateway authorizer sees no
	// response) they free themselves at their rule's period, its TTL.
	Slots limiter.Slots

	// applied are every rule charged, the named dimensions' first, then
	// the default dimension's; within each the rate rules (API, route),
	// then the quotas; nil-free up to the first nil: RateLimit-Policy lists
	// them all.
	applied [limiter.MaxBuckets]*rules.Effective
}

// snapshots gives the current rules snapshot; *rulesync.Cache is one.
type snapshots interface {
	Snapshot(ctx context.Context) *rules.Snapshot
}

// Options configure an Authorizer.
type Options struct {
	// Sources are where the subject is read from, in order; default
	// identity.DefaultSources (the x-api-key header).
	Sources []identity.Source
	// Dimensions are the named dimensions limited beside the default one
	// (Sources), each its own subject, matched against the rules of that
	// dimension (rules.Rule.Dimension). At most identity.MaxDimensions.
	Dimensions []identity.Dimension
	// JWT verifies the bearer token the jwt:<claim> sources read; required
	// when a source is one (New panics without it: app builds both from
	// one configuration).
	JWT *identity.Verifier

	// Every decision is recorded here, once, whichever edge asked:

	// Logger receives the decision log line of every decision that is not
	// a plain allow (see DecisionDeny); default slog.Default().
	Logger *slog.Logger
	// Metrics, when set, aggregates decisions into CloudWatch EMF lines.
	Metrics *metrics.Metrics
	// Stats, when set, counts every decision per rule and each denied
	// subject (by hash), for the admin API's GET /stats (sluice local).
	Stats *stats.Stats
	// ShowSubjects are the kinds of source whose subjects the decision log
	// line and the stats carry as sent (SUBJECT_SHOW), beside the hash:
	// identities only (Showable). A credential kind (header, query,
	// apikey) is ignored whatever the caller passes. Default none.
	ShowSubjects []identity.SourceKind
	// Observe, when set, is told of every decision, unauthorized ones
	// included (see WithObserver for one per edge).
	Observe Observe
	// Denied, when set, is told of every denial a rule made (not a
	// failed-closed one), with the request's API, after it is recorded:
	// the CDN edge's recorder (internal/cdn). On the request's goroutine:
	// it must not block.
	Denied func(api string, res *Result)
	// Now is the clock rules expire by (rules.Rule.ExpiresAt): a rule
	// past its expiry is passed over at decision time, with no new
	// snapshot needed. Default time.Now.
	Now func() time.Time
	// FailLogInterval is how often a storm of fail-open (or fail-closed)
	// decisions writes a line, each with the count of those it left out;
	// default DefaultFailLogInterval (1s); negative writes every one.
	FailLogInterval time.Duration
}

// Authorizer decides on requests. It is safe for concurrent use.
type Authorizer struct {
	snaps   snapshots
	lim     *limiter.Limiter
	sources []identity.Source
	jwt     *identity.Verifier
	dims    []identity.Dimension
	// claims are the jwt:<claim> sources' claims, and the context keys
	// their verified values are returned under.
	claims []claimKey
	rec    recorder
	now    func() time.Time
	denied func(api string, res *Result)
}

// claimKey is a claim a rule limits by, and its authorizer context key.
type claimKey struct{ claim, key string }

// New returns an Authorizer matching requests against snaps' current
// snapshot and charging lim.
func New(snaps snapshots, lim *limiter.Limiter, o Options) *Authorizer {
	src := o.Sources
	if len(src) == 0 {
		src = identity.DefaultSources
	}
	src = append([]identity.Source(nil), src...)
	for i := range src {
		if src[i].Kind == identity.SourceHeader {
			src[i] = identity.HeaderSource(src[i].Name)
		}
	}
	a := &Authorizer{snaps: snaps, lim: lim, sources: src, jwt: o.JWT, rec: newRecorder(&o), now: o.Now, denied: o.Denied}
	if a.now == nil {
		a.now = time.Now
	}
	for _, d := range o.Dimensions {
		d.Sources = append([]identity.Source(nil), d.Sources...)
		for i := range d.Sources {
			if d.Sources[i].Kind == identity.SourceHeader {
				d.Sources[i] = identity.HeaderSource(d.Sources[i].Name)
			}
		}
		a.dims = append(a.dims, d)
		src = append(src[:len(src):len(src)], d.Sources...) // for the claims below
	}
	for _, s := range src {
		if s.Kind == identity.SourceJWT {
			if a.jwt == nil {
				panic("authorizer: a jwt: subject source without Options.JWT")
			}
			a.claims = append(a.claims, claimKey{s.Name, ClaimContextKey(s.Name)})
		}
	}
	return a
}

// ClaimContextKey is the authorizer context key of a verified claim:
// "jwt_" and the claim name with every character other than a letter,
// digit or underscore replaced by "_" ("custom:tenant" → "jwt_custom_tenant"),
// so a mapping template can name it as $context.authorizer.<key>.
func ClaimContextKey(claim string) string {
	b := []byte("jwt_" + claim)
	for i := 4; i < len(b); i++ {
		c := b[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Sources returns the subject sources in use.
func (a *Authorizer) Sources() []identity.Source {
	return append([]identity.Source(nil), a.sources...)
}

// SubjectHash returns the keyed hash of subject (limiter.Limiter's): what a
// principalId or a log line carries instead of the subject.
func (a *Authorizer) SubjectHash(subject string) string { return a.lim.SubjectHash(subject) }

// WithObserver returns a copy of a that tells fn of every decision instead
// of Options.Observe (nil: none), sharing everything else: an edge with an
// observer of its own (the middleware's HandlerOptions.Observer, sluice
// local's Prometheus metrics) decides through it.
func (a *Authorizer) WithObserver(fn Observe) *Authorizer {
	c := *a
	c.rec.observe = fn
	return &c
}

// Decide finds r's subject and rules and charges the subject's buckets: the
// API-wide rule and the route rule (or the default rule when neither
// matches) and the quota rules of both scopes, all or nothing, in one
// limiter call. It records the decision once, for every edge: the log
// line, the metrics, the stats and the observer (Options).
//
// It returns ErrNoSubject when no source yields a subject. When Redis fails
// it returns the decision the rules' failure mode makes (allow with
// FailOpen, or deny with FailClosed) together with the error, already
// logged (sampled in a storm: Options.FailLogInterval).
func (a *Authorizer) Decide(ctx context.Context, r *Request) (Result, error) {
	// Matching canonicalizes the method too; done here as well, the log
	// line and the stats name the route the rules matched.
	r.Method = rules.CanonicalMethod(r.Method)
	var start time.Time
	if a.rec.observe != nil { // only an observer reads the decision's time
		start = time.Now()
	}
	res, err := a.decide(ctx, r)
	var took time.Duration
	if a.rec.observe != nil {
		took = time.Since(start)
	}
	a.record(ctx, r, &res, err, took)
	if a.denied != nil && err == nil && !res.Allowed {
		a.denied(r.API, &res)
	}
	return res, err
}

func (a *Authorizer) decide(ctx context.Context, r *Request) (Result, error) {
	subj := r.Subject
	var (
		ctxv map[string]string
		ir   identity.Request
		from identity.SourceKind // 0: the subject was given
	)
	ir = identity.Request{Headers: r.Headers, MultiHeaders: r.MultiHeaders, Query: r.Query, MultiQuery: r.MultiQuery, APIKey: r.APIKey, SourceIP: r.SourceIP}
	if r.Upstream != nil {
		r.Upstream.Apply(&ir)
	}
	if subj == "" {
		if a.jwt != nil {
			// An Authorization header that is present must be one bearer
			// token that verifies: anything else is 401, never a fall back
			// to a later source (an anonymous IP bucket), never the second
			// of two tokens.
			tok, err := identity.BearerToken(&ir)
			if err == nil && tok != "" {
				ir.Claims, err = a.jwt.Verify(ctx, tok)
			}
			if err != nil {
				return Result{}, fmt.Errorf("%w: %w", ErrNoSubject, err)
			}
		}
		var f identity.Finding
		if subj, from, f = identity.Find(a.sources, &ir); f != identity.Found {
			if r.Upstream != nil {
				// The upstream vouched for the caller: say what its
				// answer lacks, for the log line of a 401 its owner reads.
				return Result{}, fmt.Errorf("%w: %w", ErrNoSubject, a.upstreamMiss(r.Upstream, from, f))
			}
			return Result{}, ErrNoSubject
		}
		ctxv = a.verifiedContext(&ir)
	}
	// The one subject hygiene of every entry (the check API and the
	// admin API's usage and subjects routes take theirs through it too):
	// trimmed, bounded, valid UTF-8, no control characters.
	t, err := rules.NormalizeTarget(rules.Target{Subject: subj}, rules.PartSubject)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrNoSubject, err)
	}
	subj = t.Subject
	snap := a.snaps.Snapshot(ctx)
	var now time.Time // rules expire by it; zero: none does
	if snap.Expiring() {
		now = a.now()
	}

	// Fixed arrays keep the buckets off the heap until the limiter needs
	// them. The named dimensions come first: on Redis Cluster the limiter
	// charges subjects in this order (see limiter's dimensions.go).
	var (
		bs   [limiter.MaxBuckets]limiter.Bucket
		effs [limiter.MaxBuckets]*rules.Effective
		dim  [limiter.MaxBuckets]int8 // each bucket's dimension: index in a.dims, -1 the default one
		dsub [identity.MaxDimensions]string
		dsrc [identity.MaxDimensions]identity.SourceKind
		n    int
		cost int64
	)
	add := func(m rules.Match, subject string, d int8) {
		for _, e := range m.All() {
			if e == nil {
				continue
			}
			bs[n] = limiter.BucketFor(e)
			bs[n].Subject = subject
			effs[n] = e
			dim[n] = d
			n++
		}
	}
	// The named dimensions read the request as the sources do, whoever
	// named the subject (an upstream authorizer, the check API): a per-IP
	// floor holds behind an upstream too. A source with nothing to read
	// (the check API has no headers) finds nothing, and its rules wait.
	for i := range a.dims {
		d := &a.dims[i]
		ds, kind, f := identity.Find(d.Sources, &ir)
		switch f {
		case identity.Refused:
			return Result{}, fmt.Errorf("%w: dimension %s", ErrNoSubject, d.Name)
		case identity.Found:
			t, err := rules.NormalizeTarget(rules.Target{Subject: ds}, rules.PartSubject)
			if err != nil {
				return Result{}, fmt.Errorf("%w: dimension %s: %w", ErrNoSubject, d.Name, err)
			}
			ds = t.Subject
			m := snap.Dimension(d.Name).MatchAt(r.API, r.Method, r.Resource, ds, now)
			if m.Any() {
				cost = m.Cost()
				dsub[i], dsrc[i] = ds, kind
				if ds == subj {
					ds = "" // the request's own subject: one digest less
				}
				add(m, ds, int8(i))
			}
		}
	}
	m := snap.MatchAt(r.API, r.Method, r.Resource, subj, now)
	if m.Any() {
		cost = m.Cost() // the default dimension's cost wins
	}
	own := n // bs[own:] are the default dimension's
	add(m, "", -1)
	if n == 0 {
		return Result{Allowed: true, Subject: subj, Context: ctxv}, nil
	}
	if r.Cost > 0 {
		cost = r.Cost
	}
	start := time.Now()
	d, err := a.lim.Allow(ctx, limiter.Request{Subject: subj, Buckets: bs[:n], Cost: cost})
	took := time.Since(start)

	i := d.Bucket
	if i < 0 || i >= n {
		i = 0
	}
	res := Result{
		Allowed:          d.Allowed,
		Subject:          subj,
		Effective:        effs[i],
		Default:          m.Default && i >= own,
		Rule:             effs[i].ID,
		Dimension:        identity.DefaultDimension,
		DimensionSubject: subj,
		DimensionSource:  from,
		Limit:            d.Limit,
		Remaining:        d.Remaining,
		Reset:            d.Reset,
		RetryAfter:       d.RetryAfter,
		Cost:             cost,
		ShadowDenied:     d.ShadowDenied != 0,
		FailOpen:         d.FailOpen,
		Cached:           d.Cached,
		Slots:            d.Slots,
		Context:          ctxv,
		applied:          effs,
	}
	if k := dim[i]; k >= 0 {
		res.Dimension, res.DimensionSubject, res.DimensionSource = a.dims[k].Name, dsub[k], dsrc[k]
	}
	if d.ShadowDenied != 0 {
		// The shadow outcome is its rule's, whichever rule bound the
		// answer: bit j is bucket j's.
		j := bits.TrailingZeros32(d.ShadowDenied)
		if j < n {
			res.Shadow, res.ShadowRule = effs[j], effs[j].ID
			res.ShadowDimension, res.ShadowSubject, res.ShadowSource = identity.DefaultDimension, subj, from
			if k := dim[j]; k >= 0 {
				res.ShadowDimension, res.ShadowSubject, res.ShadowSource = a.dims[k].Name, dsub[k], dsrc[k]
			}
		}
	}
	res.FailClosed = err != nil && !d.Allowed
	if !d.Cached && !d.Leased {
		res.LimiterTime = took
	}
	if err != nil {
		return res, fmt.Errorf("limit %s %s on api %s (rule %s): %w", r.Method, r.Resource, r.API, res.Rule, err)
	}
	return res, nil
}

// Release frees in-flight slots a Result held (Result.Slots): the
// request's work has ended. Zero Slots do nothing, and a second call
// nothing more. A failed release is logged; its slots free themselves at
// their TTL.
func (a *Authorizer) Release(ctx context.Context, s limiter.Slots) {
	if !s.Held() {
		return
	}
	if err := a.lim.Release(ctx, s); err != nil {
		a.rec.log.WarnContext(ctx, "release in-flight slots", "slots", s.Count(), "error", err)
	}
}

// ParseSlots reads a token of Result.Slots (limiter.Slots.Token), for a
// release asked in another call (the check API's).
func (a *Authorizer) ParseSlots(token string) (limiter.Slots, error) {
	return a.lim.ParseToken(token)
}

// verifiedContext returns the verified claims the sources read, by their
// context keys; nil when there are none.
func (a *Authorizer) verifiedContext(ir *identity.Request) map[string]string {
	var out map[string]string
	for _, c := range a.claims {
		if v, ok := ir.Claims.String(c.claim); ok {
			if out == nil {
				out = make(map[string]string, len(a.claims))
			}
			out[c.key] = v
		}
	}
	return out
}

// AppendRateLimit appends the IETF RateLimit field value for r, such as
// "\"<rule>\";r=42;t=17"; nothing when no rule applied.
func (r *Result) AppendRateLimit(dst []byte) []byte {
	if r.Effective == nil {
		return dst
	}
	return r.Effective.AppendRateLimit(dst, r.Remaining, r.Reset)
}

// Policy returns the IETF RateLimit-Policy field value for r: every
// enforcing rule that applied (a shadow rule only when it is the limiting
// one), as a draft-11 list, rate rules first, such as
// "\"<rule>\";q=100;w=60, \"<quota>\";q=100000;w=2629746"; "" when no
// rule applied. With one policy it does not allocate.
func (r *Result) Policy() string {
	if r.Effective == nil {
		return ""
	}
	n, size, one := 0, 0, r.Effective
	for _, e := range r.applied {
		if e != nil && (e == r.Effective || e.Mode != rules.Shadow) {
			n, size, one = n+1, size+len(e.Policy)+2, e
		}
	}
	if n <= 1 {
		// One policy, or a Result made without the list (a test, a
		// fail-safe path).
		return one.Policy
	}
	var b strings.Builder
	b.Grow(size)
	for _, e := range r.applied {
		if e != nil && (e == r.Effective || e.Mode != rules.Shadow) {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(e.Policy)
		}
	}
	return b.String()
}
