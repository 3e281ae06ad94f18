package rules

import (
	"cmp"
	"errors"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds that Validate enforces. They keep every number well inside what the
// limiter's Lua arithmetic (doubles, exact to 2^53) and PostgreSQL's bigint
// hold, and every string short enough to index and to log.
const (
	// MaxLimit bounds Limit: tokens refilled per period.
	MaxLimit = 1_000_000_000
	// MaxBurst bounds Burst: the bucket capacity.
	MaxBurst = 1_000_000_000
	// MaxCost bounds Cost: the tokens one request spends. Cost is also at
	// most the rule's burst, or no request could ever pass.
	MaxCost = 1_000_000
	// MaxHorizon bounds a bucket's refill horizon: burst·period/limit, the
	// time an empty bucket takes to fill up again, and cost·period/limit,
	// the time one request's tokens take to come back. Ten years (of 365
	// days) keeps every time the limiter's script computes, in microseconds
	// since 2024, far below 2^53 (about 285 years), where its float
	// arithmetic stops being exact, and every key TTL an integer Redis
	// accepts. limiter.MaxHorizon is the same bound.
	MaxHorizon = 10 * Year
	// MaxAPILen bounds API: an API Gateway id is 10 characters; 128 leaves
	// room for other gateways' names.
	MaxAPILen = 128
	// MaxRouteLen bounds Route, method and path together, in bytes.
	MaxRouteLen = 1024
	// MaxSubjectLen bounds Subject in bytes: room for API keys, JWT
	// subjects, ARNs and IPv6 addresses.
	MaxSubjectLen = 256
	// MaxPlanNameLen bounds a plan's Name.
	MaxPlanNameLen = 64
	// MaxDescriptionLen bounds Description in bytes.
	MaxDescriptionLen = 1024
)

// AnyMethod in a route matches every HTTP method, as in API Gateway.
const AnyMethod = "ANY"

// CanonicalMethod returns the HTTP method m as the rules name methods, its
// ASCII letters upper-cased: "get", "Get" and "GET" are one method, and a
// HEAD request spelled "head" is matched as GET as "HEAD" is. RFC 9110
// makes methods case-sensitive, but a server whose route takes any method
// (a ServeMux pattern without one, an ANY route, a handler comparing with
// strings.EqualFold) serves "get" as it serves "GET", so a rule on GET
// must charge every spelling. Bytes outside ASCII are kept (a method is an
// ASCII token; Unicode folding would make "poſt" POST). Every edge reaches
// the rules through this one function (Snapshot.MatchAt, NormalizeRoute),
// which allocates only when m has a lower-case letter.
func CanonicalMethod(m string) string {
	for i := 0; i < len(m); i++ {
		if 'a' <= m[i] && m[i] <= 'z' {
			b := []byte(m)
			for j := i; j < len(b); j++ {
				if 'a' <= b[j] && b[j] <= 'z' {
					b[j] -= 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return m
}

// Target is what a request names when it is decided, charged or looked
// at: whose buckets (Subject), on which API and which route. Where a rule
// may name "*" for every subject or every API, a Target names one.
type Target struct {
	// Subject is the subject as the caller names it: an API key, a user
	// id, an IP address. "*" is a subject like any other.
	Subject string
	// API is an API Gateway API id.
	API string
	// Route is "METHOD /resource/{param}" as a rule names it, or "*" for
	// the API-wide rules only.
	Route string
}

// Part names parts of a Target, for NormalizeTarget.
type Part uint8

// The parts of a Target.
const (
	PartSubject Part = 1 << iota
	PartAPI
	PartRoute
)

// NormalizeTarget validates and normalizes the parts of t that are given,
// the one check every entry puts what it is told through: the authorizer
// and the ratelimit package (the subject their sources find; API Gateway
// names the API and the route), POST /check and POST /usage (all three)
// and the subjects routes (the subject, and the API and route when the
// query names them). The parts not given are returned as they are. So a
// subject, an API or a route means the same buckets whichever entry
// names it:
//
//   - Subject: white space around it is trimmed (as the authorizer trims
//     a header or query value: " S " is S); then it must not be empty, be
//     at most MaxSubjectLen bytes of valid UTF-8, without control
//     characters (a subject no rule could name is hostile input, not a
//     new bucket).
//   - API: trimmed; one API id of at most MaxAPILen letters, digits, '-'
//     and '_' ("*", every API, is for rules).
//   - Route: NormalizeRoute ("get /x/" is "GET /x"), then a route a rule
//     can name: "*", or one of API Gateway's methods (ANY included) and a
//     resource path; "FROB /x" is refused, not charged to the API-wide
//     buckets.
//
// The error is a *ValidationError naming every part that is wrong. It
// allocates only to report a problem.
func NormalizeTarget(t Target, given Part) (Target, error) {
	var v validator
	if given&PartSubject != 0 {
		t.Subject = strings.TrimSpace(t.Subject)
		v.check("subject", requestSubjectProblem(t.Subject))
	}
	if given&PartAPI != 0 {
		t.API = strings.TrimSpace(t.API)
		v.check("api", requestAPIProblem(t.API))
	}
	if given&PartRoute != 0 {
		t.Route = NormalizeRoute(t.Route)
		v.check("route", routeProblem(t.Route))
	}
	return t, v.err()
}

// requestSubjectProblem is subjectProblem for a subject a request names,
// already trimmed. Printable ASCII, what nearly every API key and user id
// is, is checked in one pass over the bytes: the authorizer calls this for
// every request.
func requestSubjectProblem(subject string) string {
	if subject == "" {
		return "is required"
	}
	if len(subject) <= MaxSubjectLen {
		i := 0
		for i < len(subject) && subject[i] >= ' ' && subject[i] < 0x7f {
			i++
		}
		if i == len(subject) {
			return ""
		}
	}
	return subjectProblem(subject)
}

// requestAPIProblem is apiProblem for the one API a request names.
func requestAPIProblem(api string) string {
	switch api {
	case "":
		return "is required: an API Gateway API id"
	case Wildcard:
		return `must name one API: "*" (every API) is for rules`
	}
	if p := apiProblem(api); p != "" {
		return "must be an API id of at most " + strconv.Itoa(MaxAPILen) + " letters, digits, '-' and '_'"
	}
	return ""
}

// methods are the route methods API Gateway knows.
var methods = map[string]bool{
	"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true,
	"HEAD": true, "OPTIONS": true, AnyMethod: true,
}

// Normalize puts r in canonical form before validation and storage: it trims
// white space around every string field, upper-cases the route's method and
// separates it from the path by one space, drops a trailing slash from the
// path (not from "/"), lower-cases FailureMode and Mode, and fills the
// defaults FailureMode FailOpen, Mode Enforce and Enabled true. Burst and
// Cost stay nil when unset: nil already means Limit and 1.
func (r *Rule) Normalize() {
	r.API = strings.TrimSpace(r.API)
	r.Route = NormalizeRoute(r.Route)
	r.Subject = strings.TrimSpace(r.Subject)
	r.Plan = strings.TrimSpace(r.Plan)
	r.Description = strings.TrimSpace(r.Description)
	r.Dimension = NormalizeDimension(r.Dimension)
	r.FailureMode = lowerOr(r.FailureMode, FailOpen)
	r.Mode = lowerOr(r.Mode, Enforce)
	r.Kind = normalizeKind(r.Kind)
	r.Anchor = strings.TrimSpace(r.Anchor)
	if t, err := time.Parse(time.RFC3339, r.Anchor); err == nil {
		r.Anchor = t.UTC().Format(time.RFC3339Nano)
	}
	if r.Enabled == nil {
		r.Enabled = new(true)
	}
	r.Set = strings.TrimSpace(r.Set)
	if r.ExpiresAt != nil {
		r.ExpiresAt = new(r.ExpiresAt.UTC())
	}
}

// NormalizeRoute trims route and its path, upper-cases the method
// (CanonicalMethod) and drops a trailing slash, as rules store routes:
// "post /chat/ " names the rules of "POST /chat".
func NormalizeRoute(route string) string {
	route = strings.TrimSpace(route)
	method, path, ok := strings.Cut(route, " ")
	if !ok {
		return route
	}
	path = strings.TrimSpace(path)
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	return CanonicalMethod(method) + " " + path
}

// normalizeKind lower-cases k and fills the default, Rate.
func normalizeKind(k Kind) Kind { return lowerOr(k, Rate) }

// valueOr returns *p, or def when p is nil.
func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// lowerOr trims and lower-cases s, or returns def when nothing is left.
func lowerOr[T ~string](s, def T) T {
	return cmp.Or(T(strings.ToLower(strings.TrimSpace(string(s)))), def)
}

// Normalize trims white space around p's Name and Description and fills
// the default Kind, Rate.
func (p *Plan) Normalize() {
	p.Name = strings.TrimSpace(p.Name)
	p.Description = strings.TrimSpace(p.Description)
	p.Kind = normalizeKind(p.Kind)
	p.Set = strings.TrimSpace(p.Set)
}

// Validate reports every problem with r as a *ValidationError whose fields
// carry the JSON names, in the order of the JSON document; it returns nil
// when r is valid. It checks r as given: call Normalize first to accept
// lower-case methods, stray spaces and empty defaults. ID, Version and the
// timestamps belong to the store and are not checked, nor is whether a named
// plan exists.
//
// A rule names a Plan or carries Limit and Period (and optionally Burst)
// inline, never both. Empty FailureMode and Mode are valid (they mean the
// defaults).
func (r Rule) Validate() error {
	var v validator
	v.check("api", apiProblem(r.API))
	v.check("route", routeProblem(r.Route))
	v.check("subject", subjectProblem(r.Subject))
	v.check("kind", kindProblem(r.Kind))
	quota := r.Kind == Quota
	burst := int64(0) // the capacity cost must fit in; 0 when unknown here
	// inline: the rule's own limit and period are valid, so horizons can be
	// checked against them.
	inline := r.Plan == "" && r.Limit != nil && limitProblem(*r.Limit) == "" && r.Period != 0 && periodProblem(r.Period) == "" && kindPeriodProblem(r.Kind, r.Period) == ""
	if r.Plan != "" {
		v.check("plan", planNameProblem(r.Plan))
		if r.Limit != nil {
			v.add("limit", "must be empty when plan is set")
		}
		if r.Period != 0 {
			v.add("period", "must be empty when plan is set")
		}
		if r.Burst != nil {
			v.add("burst", "must be empty when plan is set: the plan's burst applies")
		}
	} else {
		if r.Limit == nil {
			v.add("limit", "is required unless plan is set")
		} else {
			v.check("limit", limitProblem(*r.Limit))
		}
		v.period(r.Period, r.Kind, "is required unless plan is set")
		burst = valueOr(r.Limit, burst)
		if v.burst(r.Burst, r.Limit, r.Kind, r.Period, inline) {
			burst = *r.Burst
		}
	}
	cost := int64(1)
	if r.Kind == Concurrency {
		concurrencyProblems(&v, r.Cost, r.MinRemaining)
	} else if r.Cost != nil {
		cost = *r.Cost
		if p := costProblem(*r.Cost, burst); p != "" {
			v.add("cost", p)
		} else if inline && !quota {
			v.check("cost", horizonProblem(*r.Cost, *r.Limit, r.Period, costHorizon))
		}
	}
	if r.MinRemaining != nil && r.Kind != Concurrency {
		v.check("min_remaining", minRemainingProblem(*r.MinRemaining, cost, burst, ""))
	}
	if r.Anchor != "" && !quota && kindProblem(r.Kind) == "" {
		v.add("anchor", "is for quota rules only")
	} else {
		v.check("anchor", anchorProblem(r.Anchor))
	}
	switch r.FailureMode {
	case "", FailOpen, FailClosed:
	default:
		v.add("failure_mode", `must be "open" or "closed"`)
	}
	if r.Durable && !quota && kindProblem(r.Kind) == "" {
		v.add("durable", "is for quota rules only")
	}
	switch r.Mode {
	case "", Enforce, Shadow:
	default:
		v.add("mode", `must be "enforce" or "shadow"`)
	}
	v.check("description", descriptionProblem(r.Description))
	if r.Dimension != "" && !ValidDimension(r.Dimension) {
		v.add("dimension", "must be 1 to 32 lower-case letters, digits, '_' or '-', starting with a letter")
	}
	if r.ExpiresAt != nil {
		v.check("expires_at", expiresProblem(*r.ExpiresAt))
	}
	if r.Set != "" {
		v.check("set", planNameProblem(r.Set)) // a set name has a plan name's form
	}
	if r.Global {
		globalProblems(&v, r.Mode, r.MinRemaining, r.Durable, r.Kind, r.Period)
	}
	return v.err()
}

// expiresProblem checks a rule's ExpiresAt: whole seconds, 1970 to 2100.
func expiresProblem(t time.Time) string {
	if t.Nanosecond() != 0 {
		return "must be whole seconds, such as 2026-12-31T23:59:59Z"
	}
	if t.Before(time.Unix(0, 0)) || !t.Before(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)) {
		return "must be between 1970 and 2100"
	}
	return ""
}

// DefaultDimension is the name of the dimension SUBJECT_SOURCES finds; a
// rule stores it as "".
const DefaultDimension = "default"

// NormalizeDimension trims name, lower-cases it, and maps "default" to "".
func NormalizeDimension(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == DefaultDimension {
		return ""
	}
	return name
}

// ValidDimension reports whether name can name a dimension:
// ^[a-z][a-z0-9_-]{0,31}$.
func ValidDimension(name string) bool {
	return len(name) <= 32 && planNameProblem(name) == ""
}

// Validate reports every problem with p as a *ValidationError with JSON
// field names, or returns nil. Version and the timestamps are not checked.
func (p Plan) Validate() error {
	var v validator
	v.check("name", planNameProblem(p.Name))
	v.check("kind", kindProblem(p.Kind))
	v.check("limit", limitProblem(p.Limit))
	v.period(p.Period, p.Kind, "is required")
	v.burst(p.Burst, &p.Limit, p.Kind, p.Period, limitProblem(p.Limit) == "" && p.Period != 0 && periodProblem(p.Period) == "")
	v.check("description", descriptionProblem(p.Description))
	if p.Set != "" {
		v.check("set", planNameProblem(p.Set))
	}
	if p.Global {
		globalProblems(&v, Enforce, nil, false, p.Kind, p.Period)
	}
	return v.err()
}

// ValidateWithPlan reports what is wrong with r taking p's numbers, as a
// *ValidationError, or returns nil; r names p, and each passed Validate.
// Validate cannot see the plan a rule names, so this is the rest: r's cost
// must be at most p's burst, or no request could ever pass, and within
// MaxHorizon at p's rate. A blocking plan (limit 0) takes any cost. A p
// whose own burst is beyond MaxHorizon (a row stored before the bound
// existed, or written to a store without Plan.Validate) is reported on
// "plan": the rule's bucket would be too.
func (r Rule) ValidateWithPlan(p Plan) error {
	var v validator
	cost := valueOr(r.Cost, 1)
	burst := valueOr(p.Burst, p.Limit)
	if normalizeKind(r.Kind) != normalizeKind(p.Kind) {
		v.add("kind", "must be the kind ("+string(normalizeKind(p.Kind))+") of plan "+strconv.Quote(p.Name))
		return v.err()
	}
	if r.MinRemaining != nil && p.Limit > 0 && normalizeKind(p.Kind) != Concurrency {
		v.check("min_remaining", minRemainingProblem(*r.MinRemaining, cost, burst, " of plan "+strconv.Quote(p.Name)))
	}
	if p.Global && !r.Global {
		// The rule is global through its plan: what a global rule cannot
		// combine with applies to it too.
		globalProblems(&v, r.Mode, r.MinRemaining, r.Durable, p.Kind, p.Period)
	}
	switch {
	case p.Limit <= 0 || p.Period <= 0 || normalizeKind(p.Kind) == Concurrency:
	case normalizeKind(p.Kind) == Quota:
		if cost > burst {
			v.add("cost", "must be at most the limit ("+strconv.FormatInt(burst, 10)+") of plan "+strconv.Quote(p.Name)+", or no request could pass")
		}
	case !WithinHorizon(burst, p.Limit, p.Period.Duration()):
		v.add("plan", "the burst of plan "+strconv.Quote(p.Name)+" "+horizonProblem(burst, p.Limit, p.Period, burstHorizon))
	case cost > burst:
		v.add("cost", "must be at most the burst ("+strconv.FormatInt(burst, 10)+") of plan "+strconv.Quote(p.Name)+", or no request could pass")
	default:
		v.check("cost", horizonProblem(cost, p.Limit, p.Period, costHorizon))
	}
	return v.err()
}

// burstConcurrency is why a concurrency rule or plan has no burst.
const burstConcurrency = "must be empty for a concurrency rule: its limit is the requests in flight at once"

// concurrencyProblems reports what a concurrency rule cannot carry: a
// cost (every request holds one slot, whatever it costs the rates) and
// an admission floor.
func concurrencyProblems(v *validator, cost, minRemaining *int64) {
	if cost != nil && *cost != 1 {
		v.add("cost", "must be empty for a concurrency rule: every request holds one slot")
	}
	if minRemaining != nil && *minRemaining != 0 {
		v.add("min_remaining", "must be empty for a concurrency rule")
	}
}

// BrokenRule is a rule that a plan's new numbers would break, and why.
type BrokenRule struct {
	// ID is the rule's id.
	ID string `json:"id"`
	// Reason is what ValidateWithPlan says, for a person.
	Reason string `json:"reason"`
}

// PlanConflictError refuses a plan write that would break rules naming
// the plan (ValidateWithPlan fails for each of Rules). errors.Is(err,
// ErrConflict) holds.
type PlanConflictError struct {
	// Plan is the plan's name.
	Plan string
	// Rules are the rules that would break, in the order checked.
	Rules []BrokenRule
}

func (e *PlanConflictError) Error() string {
	var b strings.Builder
	b.WriteString("plan " + strconv.Quote(e.Plan) + " would break " + strconv.Itoa(len(e.Rules)) + " rule(s) that name it")
	for i, r := range e.Rules {
		if i == 3 {
			b.WriteString("; and " + strconv.Itoa(len(e.Rules)-i) + " more")
			break
		}
		b.WriteString("; rule " + r.ID + ": " + r.Reason)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *PlanConflictError) Unwrap() error { return ErrConflict }

// CheckPlanRules checks that every rule of rs that names p still passes
// ValidateWithPlan with p's numbers: a plan write must not leave a rule out
// of bounds. It returns nil or a *PlanConflictError listing the rules that
// would break. Disabled rules count: enabling one must not be what breaks
// it.
func CheckPlanRules(p Plan, rs []Rule) error {
	var broken []BrokenRule
	for _, r := range rs {
		if r.Plan != p.Name {
			continue
		}
		if err := r.ValidateWithPlan(p); err != nil {
			var ve *ValidationError
			reason := err.Error()
			if errors.As(err, &ve) && len(ve.Fields) > 0 {
				reason = ve.Fields[0].Field + ": " + ve.Fields[0].Reason
			}
			broken = append(broken, BrokenRule{ID: r.ID, Reason: reason})
		}
	}
	if broken == nil {
		return nil
	}
	return &PlanConflictError{Plan: p.Name, Rules: broken}
}

// WithinHorizon reports whether tokens refilled at limit per period take at
// most MaxHorizon: tokens·period <= MaxHorizon·limit, compared exactly
// (128-bit products). A blocking bucket (limit <= 0) never refills and has
// no horizon; tokens or period <= 0 are within it.
func WithinHorizon(tokens, limit int64, period time.Duration) bool {
	if limit <= 0 || tokens <= 0 || period <= 0 {
		return true
	}
	hi, lo := bits.Mul64(uint64(tokens), uint64(period))
	maxHi, maxLo := bits.Mul64(uint64(MaxHorizon), uint64(limit))
	return hi < maxHi || hi == maxHi && lo <= maxLo
}

// What a horizon problem is about, for its reason.
const (
	burstHorizon = "an empty bucket refills in burst × period ÷ limit"
	costHorizon  = "one request's tokens come back in cost × period ÷ limit"
)

// horizonProblem checks tokens (a burst or a cost; what says which)
// against MaxHorizon at limit per p, both valid. The reason gives the
// largest value allowed and how far over it is.
func horizonProblem(tokens, limit int64, p Period, what string) string {
	if WithinHorizon(tokens, limit, p.Duration()) {
		return ""
	}
	// The largest tokens within the horizon: MaxHorizon·limit/period. The
	// quotient fits in 64 bits for every valid limit and period (>= 1s).
	hi, lo := bits.Mul64(uint64(MaxHorizon), uint64(limit))
	most := "0"
	if hi < uint64(p) {
		q, _ := bits.Div64(hi, lo, uint64(p))
		most = strconv.FormatUint(q, 10)
	}
	years := float64(tokens) / float64(limit) * (float64(p) / float64(Year))
	prec := 1
	if years >= 100 {
		prec = 0
	}
	return "must be at most " + most + " at " + strconv.FormatInt(limit, 10) + " per " + p.String() + ": " +
		what + ", at most " + Period(MaxHorizon).String() + ", and here in about " +
		strconv.FormatFloat(years, 'f', prec, 64) + " years"
}

// validator collects field problems.
type validator struct{ fields []FieldError }

func (v *validator) add(field, reason string) {
	v.fields = append(v.fields, FieldError{Field: field, Reason: reason})
}

// check adds reason unless it is empty.
func (v *validator) check(field, reason string) {
	if reason != "" {
		v.add(field, reason)
	}
}

// period adds what is wrong with the period p of a rule or plan of kind
// k: missing when it is 0, out of bounds, or not one the kind takes.
func (v *validator) period(p Period, k Kind, missing string) {
	if p == 0 {
		v.add("period", missing)
	} else if reason := periodProblem(p); reason != "" {
		v.add("period", reason)
	} else {
		v.check("period", kindPeriodProblem(k, p))
	}
}

// burst adds what is wrong with the burst b (nil when unset) of a rule or
// plan of kind k, limit and period: a quota and a concurrency rule take
// none; with horizon (limit and period valid) b must be within
// MaxHorizon. It reports whether b is a token bucket's burst to charge
// against.
func (v *validator) burst(b, limit *int64, k Kind, period Period, horizon bool) bool {
	switch {
	case b == nil:
		return false
	case k == Quota:
		v.add("burst", "must be empty for a quota: its limit is the window's capacity")
		return false
	case k == Concurrency:
		v.add("burst", burstConcurrency)
		return false
	}
	if reason := burstProblem(*b, limit); reason != "" {
		v.add("burst", reason)
	} else if horizon {
		v.check("burst", horizonProblem(*b, *limit, period, burstHorizon))
	}
	return true
}

// err returns nil (an untyped nil error) when nothing was added.
func (v *validator) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.fields}
}

// Each xxxProblem function returns why a value is invalid, or "".

func apiProblem(api string) string {
	switch {
	case api == "":
		return `is required: an API Gateway REST API id or "*"`
	case api == Wildcard:
		return ""
	case len(api) > MaxAPILen:
		return "must be at most " + strconv.Itoa(MaxAPILen) + " characters"
	case !allBytes(api, isIDByte):
		return `must be "*" or an API id of letters, digits, '-' and '_'`
	}
	return ""
}

func isIDByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// isPathByte reports whether c may appear in a literal path part. API Gateway
// allows "a-zA-Z0-9._-" there.
func isPathByte(c byte) bool { return isIDByte(c) || c == '.' }

func allBytes(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// routeProblem checks "*" or "METHOD /path", where the path is "/" or
// /part/part… with each part a literal of [A-Za-z0-9._-] or a parameter
// {name}, and {name+} (greedy) allowed as the last part only, as API Gateway
// names resources.
func routeProblem(route string) string {
	if route == "" {
		return `is required: "*" or "METHOD /resource", such as "GET /pets/{id}"`
	}
	if route == Wildcard {
		return ""
	}
	if len(route) > MaxRouteLen {
		return "must be at most " + strconv.Itoa(MaxRouteLen) + " bytes"
	}
	method, path, ok := strings.Cut(route, " ")
	if !ok {
		return `must be "*" or "METHOD /resource", such as "GET /pets/{id}"`
	}
	if !methods[method] {
		return "method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, ANY"
	}
	return pathProblem(path)
}

func pathProblem(path string) string {
	if path == "" || path[0] != '/' {
		return "path must start with '/'"
	}
	if path == "/" {
		return ""
	}
	parts := strings.Split(path[1:], "/")
	var params []string
	for i, part := range parts {
		last := i == len(parts)-1
		switch {
		case part == "":
			if last {
				return "path must not end with '/'"
			}
			return "path must not contain an empty part ('//')"
		case part == "." || part == "..":
			return "path must not contain '.' or '..' parts"
		case part[0] == '{' || part[len(part)-1] == '}':
			name, greedy, ok := param(part)
			if !ok {
				return "path parameter " + strconv.Quote(part) + ` must be "{name}" or "{name+}" with a name of letters, digits, '.', '-' and '_'`
			}
			if greedy && !last {
				return "greedy path parameter " + strconv.Quote(part) + " must be the last part"
			}
			for _, p := range params {
				if p == name {
					return "path parameter " + strconv.Quote(name) + " appears twice"
				}
			}
			params = append(params, name)
		case !allBytes(part, isPathByte):
			return "path part " + strconv.QuoteToASCII(part) + " may hold only letters, digits, '.', '-', '_' or be a {parameter}"
		}
	}
	return ""
}

// param parses "{name}" or "{name+}".
func param(part string) (name string, greedy, ok bool) {
	if len(part) < 3 || part[0] != '{' || part[len(part)-1] != '}' {
		return "", false, false
	}
	name = part[1 : len(part)-1]
	if strings.HasSuffix(name, "+") {
		name, greedy = name[:len(name)-1], true
	}
	if name == "" || !allBytes(name, isPathByte) {
		return "", false, false
	}
	return name, greedy, true
}

func subjectProblem(subject string) string {
	switch {
	case subject == "":
		return `is required: an exact subject or "*"`
	case len(subject) > MaxSubjectLen:
		return "must be at most " + strconv.Itoa(MaxSubjectLen) + " bytes"
	case !utf8.ValidString(subject):
		return "must be valid UTF-8"
	case strings.ContainsRune(subject, utf8.RuneError):
		// A JSON transport turns bytes that are not UTF-8 into U+FFFD
		// before Sluice sees them: a subject holding it may stand for any
		// of them, so it is refused as they are (identity.ValidText).
		return "must be valid UTF-8 (U+FFFD, which stands for bytes that are not, is refused too)"
	case strings.IndexFunc(subject, unicode.IsControl) >= 0:
		return "must not contain control characters"
	case strings.TrimSpace(subject) != subject:
		return "must not start or end with white space"
	}
	return ""
}

func planNameProblem(name string) string {
	switch {
	case name == "":
		return "is required"
	case len(name) > MaxPlanNameLen:
		return "must be at most " + strconv.Itoa(MaxPlanNameLen) + " characters"
	case name[0] < 'a' || name[0] > 'z' || !allBytes(name, isPlanByte):
		return "must start with a lower-case letter and hold only a-z, 0-9, '-' and '_'"
	}
	return ""
}

func isPlanByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

func limitProblem(limit int64) string {
	if limit < 0 || limit > MaxLimit {
		return "must be between 0 (block) and " + strconv.Itoa(MaxLimit)
	}
	return ""
}

func periodProblem(p Period) string {
	if err := p.check(); err != nil {
		return err.Error()
	}
	return ""
}

// burstProblem checks a burst against its limit (nil when the limit is
// missing, which is reported on its own).
func burstProblem(burst int64, limit *int64) string {
	switch {
	case limit != nil && *limit == 0:
		if burst != 0 {
			return "must be 0 or empty when limit is 0: the rule blocks"
		}
	case burst < 1 || burst > MaxBurst:
		return "must be between 1 and " + strconv.Itoa(MaxBurst)
	case limit != nil && burst < *limit:
		return "must be at least limit (" + strconv.FormatInt(*limit, 10) + ")"
	}
	return ""
}

// costProblem checks a cost against the rule's burst (0 when unknown: a
// plan's, or a blocking rule's).
func costProblem(cost, burst int64) string {
	switch {
	case cost < 1 || cost > MaxCost:
		return "must be between 1 and " + strconv.Itoa(MaxCost)
	case burst > 0 && burst <= MaxBurst && cost > burst:
		return "must be at most the burst (" + strconv.FormatInt(burst, 10) + "), or no request could pass"
	}
	return ""
}

func kindProblem(k Kind) string {
	switch k {
	case "", Rate, Quota, Concurrency:
		return ""
	}
	return `must be "rate", "quota" or "concurrency"`
}

// kindPeriodProblem checks a valid period against the kind: a quota's is a
// calendar window, and Month is a quota's only.
func kindPeriodProblem(k Kind, p Period) string {
	switch {
	case kindProblem(k) != "":
		return "" // reported on kind
	case k == Quota && !p.Calendar():
		return `a quota's period must be "1d", "1w", "1mo" or "1y"`
	case k == Concurrency && p > MaxLeaseTTL:
		return `a concurrency rule's period is its slots' lease TTL: at most "1d"`
	case k != Quota && p == Month:
		return `"1mo" is a calendar month, for quotas only: use "30d" or "4w" for a rate`
	}
	return ""
}

// Bounds of a quota's Anchor: any RFC 3339 time between them keeps the
// limiter's window arithmetic, in microseconds since 2024, exact.
var (
	minAnchor = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxAnchor = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

func anchorProblem(a string) string {
	if a == "" {
		return ""
	}
	t, err := time.Parse(time.RFC3339, a)
	switch {
	case err != nil:
		return `must be an RFC 3339 time such as "2026-01-31T00:00:00Z"`
	case t.Nanosecond() != 0:
		return "must be a whole second"
	case t.Before(minAnchor) || !t.Before(maxAnchor):
		return "must be between 1970 and 2100"
	}
	return ""
}

// AnchorTime returns r's Anchor as a time, and false when it has none (or
// an invalid one).
func (r Rule) AnchorTime() (time.Time, bool) {
	if r.Anchor == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, r.Anchor)
	return t.UTC(), err == nil
}

// minRemainingProblem checks an admission floor against the cost and the
// capacity it must leave room in (burst 0: unknown here, a plan's or a
// blocking rule's); of names where the capacity comes from.
func minRemainingProblem(mr, cost, burst int64, of string) string {
	switch {
	case mr < 0 || mr >= MaxBurst:
		return "must be between 0 and " + strconv.Itoa(MaxBurst-1)
	case burst > 0 && burst <= MaxBurst && cost >= 1 && mr > burst-cost:
		return "must be at most the burst" + of + " minus the cost (" + strconv.FormatInt(burst-cost, 10) + "), or no request could pass"
	}
	return ""
}

func descriptionProblem(d string) string {
	switch {
	case len(d) > MaxDescriptionLen:
		return "must be at most " + strconv.Itoa(MaxDescriptionLen) + " bytes"
	case !utf8.ValidString(d):
		return "must be valid UTF-8"
	case strings.IndexByte(d, 0) >= 0:
		return "must not contain NUL characters"
	}
	return ""
}
