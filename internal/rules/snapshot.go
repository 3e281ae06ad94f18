package rules

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultID is the ID of the configured default when it has none of its own:
// the limiter keys its buckets with it.
const DefaultID = "default"

// Effective is a rule as the authorizer applies it: plan resolved, defaults
// filled, numbers checked. Every Effective a Snapshot hands out has a
// non-empty ID, Period of 1 s to 1 year, Burst >= Limit (0 only when Limit
// is 0), 1 <= Cost <= Burst (unless Limit is 0) and a refill horizon,
// Burst·Period/Limit, of at most MaxHorizon.
//
// Effective values returned by pointer belong to the Snapshot and must not
// be modified.
type Effective struct {
	// ID is the rule's id (the limiter's bucket id), or DefaultID.
	ID string
	// API, Route and Subject are the rule's scope, Wildcard included.
	API, Route, Subject string
	// Plan is the plan the numbers come from, or empty for inline numbers.
	Plan string
	// Limit is the number of tokens refilled per Period; 0 blocks: the
	// limiter denies without asking Redis.
	Limit int64
	// Burst is the bucket capacity: the rule's or plan's burst, else Limit.
	Burst int64
	// Cost is the number of tokens a request spends: the rule's, else 1.
	Cost int64
	// Period is the refill period, 1 s to 1 year.
	Period time.Duration
	// FailureMode applies when Redis cannot answer: FailOpen or FailClosed.
	FailureMode FailureMode
	// Mode is Enforce or Shadow.
	Mode Mode
	// Kind is Rate or Quota. A quota's Period is its calendar window (Day,
	// Week, Month or Year), its Burst its Limit, and Anchor (zero: UTC
	// alignment) where its windows repeat from.
	Kind   Kind
	Anchor time.Time
	// MinRemaining is the admission floor: a request passes only when the
	// bucket holds at least Cost + MinRemaining tokens.
	MinRemaining int64
	// Durable quotas acknowledge a charge only once a replica has it.
	Durable bool
	// GlobalKey, set only for a global rule (Rule.Global, or its plan's),
	// names the rule's budget in the ledger every Region shares: a digest
	// of its scope (API, route, subject, kind, dimension), which the same
	// rule has in every Region, unlike its ID. Empty: regional.
	GlobalKey string
	// Expires is the instant the rule stops applying (Rule.ExpiresAt);
	// zero never.
	Expires time.Time
	// PolicyName is the IETF RateLimit policy name: ID as a Structured
	// Field string, quotes included, such as "\"default\"".
	PolicyName string
	// Policy is the IETF RateLimit-Policy item for this rule:
	// PolicyName;q=<Burst>;w=<Period in seconds>, such as
	// "\"default\";q=100;w=60" (a quota's month counts as Month's seconds,
	// a year as 365 days). Precomputed so the authorizer does not build it
	// per request.
	Policy string
}

// Blocked reports whether e denies every request (Limit 0).
func (e *Effective) Blocked() bool { return e.Limit == 0 }

// AppendRateLimit appends the IETF RateLimit field item for e to dst:
// PolicyName;r=<remaining>;t=<reset in seconds, rounded up>, such as
// "\"default\";r=42;t=7". With room in dst it does not allocate.
func (e *Effective) AppendRateLimit(dst []byte, remaining int64, reset time.Duration) []byte {
	dst = append(dst, e.PolicyName...)
	dst = append(dst, ";r="...)
	dst = strconv.AppendInt(dst, max(remaining, 0), 10)
	dst = append(dst, ";t="...)
	return strconv.AppendInt(dst, max(int64((reset+time.Second-1)/time.Second), 0), 10)
}

// finish fills the precomputed header strings.
func (e *Effective) finish() {
	e.PolicyName = sfString(e.ID)
	e.Policy = e.PolicyName + ";q=" + strconv.FormatInt(e.Burst, 10) + ";w=" + strconv.FormatInt(int64(e.Period/time.Second), 10)
}

// sfString quotes s as an RFC 8941 String: printable ASCII only (anything
// else is dropped), with '"' and '\' escaped.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			continue
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

// Match is what Snapshot.Match found for one request. The request is charged
// against every non-nil rule.
type Match struct {
	// API is the rule of the API-wide scope (route Wildcard), or the default
	// when Default is set; nil when none applies.
	API *Effective
	// Route is the rule of the request's route scope; nil when none applies.
	Route *Effective
	// APIQuota and RouteQuota are the quota rules of the two scopes; nil
	// when none applies. They stack on the rate rules: the request is
	// charged against all four.
	APIQuota, RouteQuota *Effective
	// APIConcurrency and RouteConcurrency are the concurrency rules of the
	// two scopes; nil when none applies. The request holds a slot of each
	// (not its cost), decided with the others all or nothing.
	APIConcurrency, RouteConcurrency *Effective
	// Default is set when no rate rule matched in either scope and the
	// configured default (in API) applies; quotas stack on it. With no
	// default configured and no rule, Match is empty and the request is
	// allowed without limit.
	Default bool
}

// Cost returns the tokens the request spends: the route rule's Cost when one
// matched (the rate rule's before the quota's), else the API-wide rule's or
// the default's, else 1.
func (m Match) Cost() int64 {
	switch {
	case m.Route != nil:
		return m.Route.Cost
	case m.RouteQuota != nil:
		return m.RouteQuota.Cost
	case m.API != nil:
		return m.API.Cost
	case m.APIQuota != nil:
		return m.APIQuota.Cost
	}
	return 1
}

// Any reports whether a rule (or the default) applies.
func (m Match) Any() bool {
	return m.All() != [MatchRules]*Effective{}
}

// MatchRules is the most rules one Match holds: three kinds in two scopes.
const MatchRules = 6

// All returns the rules of m, rate rules first: API, Route, APIQuota,
// RouteQuota, APIConcurrency, RouteConcurrency, nil where absent.
func (m Match) All() [MatchRules]*Effective {
	return [MatchRules]*Effective{m.API, m.Route, m.APIQuota, m.RouteQuota, m.APIConcurrency, m.RouteConcurrency}
}

// SnapshotOptions configure NewSnapshot.
type SnapshotOptions struct {
	// Default applies to a request no rule matches in either scope. Nil (the
	// default) allows such requests without limit. An empty ID becomes
	// DefaultID, empty API, Route and Subject become Wildcard, Burst 0
	// becomes Limit, Cost 0 becomes 1, and empty FailureMode and Mode become
	// FailOpen and Enforce. A default with a Period outside 1 s to 1 year, a
	// negative Limit, a Burst below Limit, a Cost above Burst or a refill
	// horizon above MaxHorizon is ignored and reported by Skipped.
	Default *Effective
}

// Skip is a rule, plan or default that NewSnapshot left out, and why.
type Skip struct {
	// Kind is KindRule, KindPlan or "default".
	Kind string
	// ID is the rule's id or the plan's name (empty for the default).
	ID string
	// Reason says why, for a person.
	Reason string
}

// scopeKey names a scope (api, route, subject, kind); the route split into
// method and resource, both empty in the API-wide scope.
type scopeKey struct {
	api, method, resource, subject string
	kind                           Kind
}

// routeKey names a route scope without its subject.
type routeKey struct {
	api, method, resource string
}

// group holds the rules of one (api, route) that differ only by subject.
type group struct {
	exact map[string]*Effective // by exact subject; nil when none
	wild  *Effective            // subject Wildcard; nil when none
}

// add files e, which holds no scope another rule of g holds.
func (g *group) add(e *Effective) {
	if e.Subject == Wildcard {
		g.wild = e
		return
	}
	if g.exact == nil {
		g.exact = make(map[string]*Effective)
	}
	g.exact[e.Subject] = e
}

// groupOf returns m's group for k, made when m has none.
func groupOf[K comparable](m map[K]*group, k K) *group {
	if m[k] == nil {
		m[k] = new(group)
	}
	return m[k]
}

// Snapshot is an immutable, indexed set of rules and plans. Match costs a
// bounded number of hash lookups whatever the number of rules, and does not
// allocate. A Snapshot is safe for concurrent use; replace it as a whole
// (atomic.Pointer) to change the rules.
type Snapshot struct {
	// The rate rules' index, the quota rules' and the concurrency rules'.
	index
	quota, conc index

	rules   []Effective // sorted by ID; the maps point into it
	skipped []Skip
	def     *Effective

	// routesByAPI lists, per api (Wildcard included), the distinct
	// route-scope (method, resource) pairs, sorted: ForSubject walks them.
	routesByAPI map[string][]routeKey
	apis        []string // every api named by a rule, sorted

	// expiring: some rule has an expiry, so matching reads the clock;
	// anyExpiring: here or in a dimension's snapshot.
	expiring, anyExpiring bool

	// dims holds the rules of each named dimension (Rule.Dimension), each
	// a Snapshot of its own without a default rule; nil when there are
	// none. The receiver holds the default dimension's.
	dims map[string]*Snapshot
}

// index holds the rules of one kind for Match: the API-wide scope by api,
// the route scope by (api, method, resource), then each by subject.
type index struct {
	apiScope   map[string]*group
	routeScope map[routeKey]*group
	// Whether any route rule has api Wildcard or method ANY: when not,
	// Match skips those lookups.
	routeWildAPI, routeAnyMethod bool
	// routeHead: some route rule names method HEAD (see matchRoute).
	routeHead bool
}

func newIndex() index {
	return index{apiScope: make(map[string]*group), routeScope: make(map[routeKey]*group)}
}

// NewSnapshot indexes rs and ps. It never fails: a rule or plan that cannot
// be applied is left out and reported by Skipped, so one bad row does not
// stop the others from being enforced. Disabled rules are left out silently.
//
// Each rule is normalised (on a copy) and validated; a rule is skipped when
// it is invalid, has no ID or the ID of an earlier rule, names a plan that is
// missing or invalid or that it does not fit (Rule.ValidateWithPlan: a cost
// above the plan's burst or beyond MaxHorizon), or claims a scope (api,
// route, subject) an earlier rule holds. So nothing out of bounds reaches
// the limiter, whatever rows the store holds. Rules are taken in ID order, so the rule with the smallest ID keeps
// a contested scope. Plans are skipped when invalid or when an earlier plan
// has the same name.
func NewSnapshot(rs []Rule, ps []Plan, opt SnapshotOptions) *Snapshot {
	s := &Snapshot{
		index:       newIndex(),
		quota:       newIndex(),
		conc:        newIndex(),
		routesByAPI: make(map[string][]routeKey),
	}

	plans := make(map[string]*Plan, len(ps))
	badPlans := make(map[string]string)
	for _, p := range ps {
		p.Normalize()
		if _, dup := plans[p.Name]; dup {
			s.skip(KindPlan, p.Name, "another plan has the same name")
			continue
		}
		if err := p.Validate(); err != nil {
			s.skip(KindPlan, p.Name, err.Error())
			badPlans[p.Name] = err.Error()
			continue
		}
		plans[p.Name] = &p
	}

	// Other dimensions' rules go to a snapshot of their own: scopes,
	// precedence and matching are per dimension.
	var byDim map[string][]Rule
	sorted := make([]Rule, 0, len(rs))
	for _, r := range rs {
		if d := NormalizeDimension(r.Dimension); d != "" {
			if byDim == nil {
				byDim = make(map[string][]Rule)
			}
			r.Dimension = "" // one level: the dimension's own snapshot
			byDim[d] = append(byDim[d], r)
			continue
		}
		sorted = append(sorted, r)
	}
	slices.SortStableFunc(sorted, func(a, b Rule) int { return cmp.Compare(a.ID, b.ID) })
	s.rules = make([]Effective, 0, len(sorted))
	ids := make(map[string]bool, len(sorted))
	claimed := make(map[scopeKey]bool, len(sorted))
	for _, r := range sorted {
		r.Normalize()
		if !*r.Enabled {
			continue
		}
		e, reason := effective(r, plans, badPlans)
		switch {
		case reason != "":
		case ids[r.ID]:
			reason = "another rule has the same id"
		case claimed[keyOf(&e)]:
			reason = "another rule with a smaller id holds the scope (api, route, subject, kind)"
		}
		if reason != "" {
			s.skip(KindRule, r.ID, reason)
			continue
		}
		ids[r.ID] = true
		claimed[keyOf(&e)] = true
		s.expiring = s.expiring || !e.Expires.IsZero()
		s.rules = append(s.rules, e)
	}

	// Index only once s.rules stops growing: the maps point into it.
	apis := make(map[string]bool)
	routes := make(map[routeKey]bool)
	for i := range s.rules {
		e := &s.rules[i]
		k := keyOf(e)
		apis[e.API] = true
		ix := &s.index
		switch e.Kind {
		case Quota:
			ix = &s.quota
		case Concurrency:
			ix = &s.conc
		}
		if e.Route == Wildcard {
			groupOf(ix.apiScope, e.API).add(e)
			continue
		}
		rk := routeKey{api: k.api, method: k.method, resource: k.resource}
		groupOf(ix.routeScope, rk).add(e)
		routes[rk] = true
		ix.routeWildAPI = ix.routeWildAPI || e.API == Wildcard
		ix.routeAnyMethod = ix.routeAnyMethod || k.method == AnyMethod
		ix.routeHead = ix.routeHead || k.method == "HEAD"
	}
	for _, rk := range slices.SortedFunc(maps.Keys(routes), func(a, b routeKey) int {
		return cmp.Or(cmp.Compare(a.resource, b.resource), cmp.Compare(a.method, b.method))
	}) {
		s.routesByAPI[rk.api] = append(s.routesByAPI[rk.api], rk)
	}
	s.apis = slices.Sorted(maps.Keys(apis))

	for d, drs := range byDim {
		sub := NewSnapshot(drs, ps, SnapshotOptions{})
		if s.dims == nil {
			s.dims = make(map[string]*Snapshot, len(byDim))
		}
		s.dims[d] = sub
		s.anyExpiring = s.anyExpiring || sub.expiring
		for _, sk := range sub.skipped {
			if sk.Kind == KindRule { // plans were reported above
				s.skipped = append(s.skipped, sk)
			}
		}
	}

	s.anyExpiring = s.anyExpiring || s.expiring
	if opt.Default != nil {
		d, reason := defaultEffective(*opt.Default)
		if reason != "" {
			s.skip("default", "", reason)
		} else {
			s.def = &d
		}
	}
	return s
}

func (s *Snapshot) skip(kind, id, reason string) {
	s.skipped = append(s.skipped, Skip{Kind: kind, ID: id, Reason: reason})
}

// keyOf returns the index key of e: in the route scope, method and resource
// split from the route.
func keyOf(e *Effective) scopeKey {
	k := scopeKey{api: e.API, subject: e.Subject, kind: e.Kind}
	if e.Route != Wildcard {
		k.method, k.resource, _ = strings.Cut(e.Route, " ")
	}
	return k
}

// effective resolves a normalised, enabled rule, or says why it cannot.
func effective(r Rule, plans map[string]*Plan, badPlans map[string]string) (Effective, string) {
	if r.ID == "" {
		return Effective{}, "has no id"
	}
	if err := r.Validate(); err != nil {
		return Effective{}, err.Error()
	}
	e := Effective{
		ID: r.ID, API: r.API, Route: r.Route, Subject: r.Subject, Plan: r.Plan,
		Cost: valueOr(r.Cost, 1), MinRemaining: valueOr(r.MinRemaining, 0), Expires: valueOr(r.ExpiresAt, time.Time{}),
		FailureMode: r.FailureMode, Mode: r.Mode, Kind: r.Kind, Durable: r.Durable,
	}
	e.Anchor, _ = r.AnchorTime() // zero when none: r is valid
	var burst *int64
	global := r.Global
	if r.Plan != "" {
		p, ok := plans[r.Plan]
		if !ok {
			if why, bad := badPlans[r.Plan]; bad {
				return Effective{}, "plan " + strconv.Quote(r.Plan) + " is invalid: " + why
			}
			return Effective{}, "unknown plan " + strconv.Quote(r.Plan)
		}
		// A plan may have changed under the rule, or a row may predate a
		// bound: a rule out of bounds with its plan never reaches the
		// limiter.
		if err := r.ValidateWithPlan(*p); err != nil {
			return Effective{}, err.Error()
		}
		e.Limit, e.Period, burst = p.Limit, p.Period.Duration(), p.Burst
		global = global || p.Global
	} else {
		e.Limit, e.Period, burst = *r.Limit, r.Period.Duration(), r.Burst
	}
	if global {
		e.GlobalKey = GlobalKey(r)
	}
	e.Burst = valueOr(burst, e.Limit)
	e.finish()
	return e, ""
}

// defaultEffective fills the defaults of a configured default rule.
func defaultEffective(d Effective) (Effective, string) {
	d.ID = cmp.Or(d.ID, DefaultID)
	d.API = cmp.Or(d.API, Wildcard)
	d.Route = cmp.Or(d.Route, Wildcard)
	d.Subject = cmp.Or(d.Subject, Wildcard)
	d.Burst = cmp.Or(d.Burst, d.Limit)
	d.Cost = cmp.Or(d.Cost, 1)
	d.FailureMode = cmp.Or(d.FailureMode, FailOpen)
	d.Mode = cmp.Or(d.Mode, Enforce)
	switch {
	case d.Kind != "" && d.Kind != Rate:
		return d, "kind must be rate: the default is a rate limit"
	case periodProblem(Period(d.Period)) != "":
		return d, "period " + periodProblem(Period(d.Period))
	case limitProblem(d.Limit) != "":
		return d, "limit " + limitProblem(d.Limit)
	case d.Burst < d.Limit || d.Burst > MaxBurst:
		return d, "burst must be between limit and " + strconv.Itoa(MaxBurst)
	case d.Cost < 1 || d.Cost > MaxCost:
		return d, "cost must be between 1 and " + strconv.Itoa(MaxCost)
	case d.Limit > 0 && d.Cost > d.Burst:
		return d, "cost must be at most the burst, or no request could pass"
	case !WithinHorizon(d.Burst, d.Limit, d.Period):
		return d, "burst " + horizonProblem(d.Burst, d.Limit, Period(d.Period), burstHorizon)
	case d.MinRemaining < 0 || d.Limit > 0 && d.MinRemaining > d.Burst-d.Cost:
		return d, "min_remaining must be between 0 and the burst minus the cost"
	}
	d.Kind = Rate
	d.finish()
	return d, ""
}

// Match returns the rules that charge a request: api is the API Gateway REST
// API id, method the HTTP method in any case (CanonicalMethod: "get" is
// GET, at every edge) and resource the resource path as API Gateway names
// it ("/pets/{id}"), both as the gateway's event gives them; subject is
// the caller's subject.
//
// In each scope the most specific rule wins: an exact subject over Wildcard,
// then an exact api over Wildcard, then an exact method over ANY. With no
// rule in either scope the default applies (Default set). Match makes at
// most 6 scope lookups and 6 subject lookups, whatever the number of rules,
// and no allocation.
//
// A rule whose Expires has passed is passed over as if absent, so the
// next most specific rule (or the default) applies: Match reads the clock
// (time.Now) only when some rule of the snapshot expires. MatchAt takes
// the time from the caller.
func (s *Snapshot) Match(api, method, resource, subject string) Match {
	var now time.Time
	if s.expiring {
		now = time.Now()
	}
	return s.MatchAt(api, method, resource, subject, now)
}

// Expiring reports whether some rule of s, or of one of its dimensions,
// has an expiry: only then does matching need the time.
func (s *Snapshot) Expiring() bool { return s.anyExpiring }

// MatchAt is Match at the instant now: rules expired at now are passed
// over. A zero now ignores expiry.
func (s *Snapshot) MatchAt(api, method, resource, subject string, now time.Time) Match {
	var m Match
	if !s.expiring {
		now = time.Time{} // no rule expires: skip the comparisons
	}
	method = CanonicalMethod(method)
	// Each match returns at once when its index holds no rule of its scope.
	m.API = s.matchAPI(api, subject, now)
	m.Route = s.matchRoute(api, method, resource, subject, now)
	m.APIQuota = s.quota.matchAPI(api, subject, now)
	m.RouteQuota = s.quota.matchRoute(api, method, resource, subject, now)
	m.APIConcurrency = s.conc.matchAPI(api, subject, now)
	m.RouteConcurrency = s.conc.matchRoute(api, method, resource, subject, now)
	if m.API == nil && m.Route == nil && s.def != nil {
		m.API, m.Default = s.def, true
	}
	return m
}

func (s *index) matchAPI(api, subject string, now time.Time) *Effective {
	if len(s.apiScope) == 0 {
		return nil
	}
	gs := [2]*group{s.apiScope[api], s.apiScope[Wildcard]}
	return pick(gs[:], subject, now)
}

func (s *index) matchRoute(api, method, resource, subject string, now time.Time) *Effective {
	if len(s.routeScope) == 0 {
		return nil
	}
	if method == "HEAD" && !s.namesHead(api, resource) {
		// HEAD is GET without the body: Go's ServeMux serves it with the
		// GET pattern, and a GET rule must not be escaped by asking for
		// the same answer's headers. One decision for every edge, made
		// here: a HEAD request is matched as GET unless a rule names HEAD
		// for its route, as a mux's HEAD pattern wins over its GET one.
		method = "GET"
	}
	// The groups that can hold the request's rule, most specific first:
	// exact api over Wildcard, then exact method over ANY.
	var gs [4]*group
	k := routeKey{api: api, method: method, resource: resource}
	gs[0] = s.routeScope[k]
	if s.routeAnyMethod {
		k.method = AnyMethod
		gs[1] = s.routeScope[k]
	}
	if s.routeWildAPI {
		k.api, k.method = Wildcard, method
		gs[2] = s.routeScope[k]
		if s.routeAnyMethod {
			k.method = AnyMethod
			gs[3] = s.routeScope[k]
		}
	}
	return pick(gs[:], subject, now)
}

// namesHead reports whether a route rule names method HEAD for resource
// on api (or on every api).
func (s *index) namesHead(api, resource string) bool {
	if !s.routeHead {
		return false
	}
	return s.routeScope[routeKey{api: api, method: "HEAD", resource: resource}] != nil ||
		s.routeScope[routeKey{api: Wildcard, method: "HEAD", resource: resource}] != nil
}

// pick returns the rule for subject from gs, ordered most specific first
// and nil where absent: an exact subject in any group wins over Wildcard.
// A rule expired at now (unless zero) is passed over.
func pick(gs []*group, subject string, now time.Time) *Effective {
	for _, g := range gs {
		if g != nil && g.exact != nil {
			if e := g.exact[subject]; e != nil && e.live(now) {
				return e
			}
		}
	}
	for _, g := range gs {
		if g != nil && g.wild != nil && g.wild.live(now) {
			return g.wild
		}
	}
	return nil
}

// live reports whether e applies at now: it has no expiry, now is zero
// (expiry ignored), or now is before it.
func (e *Effective) live(now time.Time) bool {
	return e.Expires.IsZero() || now.IsZero() || now.Before(e.Expires)
}

// Len returns the number of rules in the snapshot: enabled, valid and not
// skipped.
func (s *Snapshot) Len() int {
	n := len(s.rules)
	for _, d := range s.dims {
		n += len(d.rules)
	}
	return n
}

// emptySnapshot is what Dimension returns for a dimension without rules.
var emptySnapshot = NewSnapshot(nil, nil, SnapshotOptions{})

// Dimension returns the rules of dimension name ("" or "default": s
// itself, with the default rule); a dimension without rules gives an empty
// snapshot, which matches nothing. It does not allocate.
func (s *Snapshot) Dimension(name string) *Snapshot {
	if name == "" || name == DefaultDimension {
		return s
	}
	if d, ok := s.dims[name]; ok {
		return d
	}
	return emptySnapshot
}

// Rules returns a copy of the snapshot's rules as applied, ordered by ID.
func (s *Snapshot) Rules() []Effective { return slices.Clone(s.rules) }

// Skipped returns what NewSnapshot left out and why, in the order found.
func (s *Snapshot) Skipped() []Skip { return slices.Clone(s.skipped) }

// Default returns the configured default, or nil when requests no rule
// matches are allowed without limit.
func (s *Snapshot) Default() *Effective { return s.def }

// ForSubject lists the rules that would charge subject's requests, for the
// admin "limits" view and for resetting a subject's buckets. Each rule
// appears once, in a stable order: per api, the API-wide rule, then the
// route rules by resource and method.
//
// api "" means every api a rule names. route "" means every route: the
// API-wide rule and, for every route some rule names, the rule that wins for
// it; route Wildcard means the API-wide scope only; "METHOD /resource" means
// what Match gives for that request (the route is normalised first, so
// "get /pets/" works). The default is listed when some request
// of subject's would fall to it.
func (s *Snapshot) ForSubject(subject, api, route string) []*Effective {
	apis := []string{api}
	if api == "" {
		apis = s.apis
		if len(apis) == 0 {
			apis = []string{Wildcard}
		}
	}
	var now time.Time
	if s.expiring {
		now = time.Now()
	}
	var out []*Effective
	seen := make(map[*Effective]bool)
	add := func(e *Effective) {
		if e != nil && !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	useDefault := false
	for _, a := range apis {
		switch route {
		case Wildcard, "":
			apiRule := s.matchAPI(a, subject, now)
			add(apiRule)
			add(s.quota.matchAPI(a, subject, now))
			add(s.conc.matchAPI(a, subject, now))
			useDefault = useDefault || apiRule == nil
			if route == Wildcard {
				continue
			}
			for _, list := range [2][]routeKey{s.routesByAPI[a], s.routesByAPI[Wildcard]} {
				for _, rk := range list {
					add(s.matchRoute(a, rk.method, rk.resource, subject, now))
					add(s.quota.matchRoute(a, rk.method, rk.resource, subject, now))
					add(s.conc.matchRoute(a, rk.method, rk.resource, subject, now))
				}
			}
		default:
			method, resource, _ := strings.Cut(NormalizeRoute(route), " ")
			m := s.MatchAt(a, method, resource, subject, now)
			for _, e := range m.All() {
				add(e)
			}
		}
	}
	if useDefault {
		add(s.def)
	}
	return out
}
