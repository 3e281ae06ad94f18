package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
)

// SubjectLimitsResponse is the body of GET /subjects/{subject}/limits.
type SubjectLimitsResponse struct {
	Subject string `json:"subject"`
	// API and Route repeat the query ("" when not given: every api, every
	// route).
	API   string `json:"api,omitempty"`
	Route string `json:"route,omitempty"`
	// Limits are the rules that would charge the subject's requests, each
	// with its bucket's live state.
	Limits []BucketLimit `json:"limits"`
}

// BucketLimit is one rule as applied to a subject, and its bucket now.
type BucketLimit struct {
	// Rule is the rule's id, or "default" for the configured default.
	Rule        string            `json:"rule"`
	API         string            `json:"api"`
	Route       string            `json:"route"`
	Subject     string            `json:"subject"`
	Plan        string            `json:"plan,omitempty"`
	Limit       int64             `json:"limit"`
	Period      rules.Period      `json:"period"`
	Burst       int64             `json:"burst"`
	Cost        int64             `json:"cost"`
	FailureMode rules.FailureMode `json:"failure_mode"`
	Mode        rules.Mode        `json:"mode"`
	// Kind is "rate", "quota" or "concurrency"; a quota's Period is its
	// calendar window and Anchor (empty: UTC calendar alignment) where its
	// windows repeat from; a concurrency rule's Period is its slots' TTL.
	Kind         rules.Kind `json:"kind"`
	Anchor       string     `json:"anchor,omitempty"`
	MinRemaining int64      `json:"min_remaining,omitempty"`
	// Remaining is the number of whole tokens in the bucket now (Burst for
	// a bucket never used or refilled; 0 for a blocked rule or one in
	// debt).
	Remaining int64 `json:"remaining"`
	// ResetMs is the time until the bucket is full again, in milliseconds
	// (a quota: until its window ends).
	ResetMs int64 `json:"reset_ms"`
	// Used is, for a quota, what its current window used: Limit -
	// Remaining (so at most Limit, also in debt). Nil for a rate rule.
	// For a global quota, this Region's share of it.
	Used *int64 `json:"used,omitempty"`
	// InFlight is, for a concurrency rule, the subject's requests holding
	// a slot now (at most Limit, more only after the limit was lowered);
	// Remaining is then the free slots. Nil for the other kinds.
	InFlight *int64 `json:"in_flight,omitempty"`
	// Global is set for a global rule (docs/global.md).
	Global *GlobalUse `json:"global,omitempty"`
	// ResetsAt is, for a quota, when its current window ends (the admin
	// host's clock plus ResetMs; the window itself is Redis's). Nil for a
	// rate rule.
	ResetsAt *time.Time `json:"resets_at,omitempty"`
	// ExpiresAt is when the rule stops applying (its expires_at): when a
	// block ends. Nil never.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Denies says this rule denies the subject's next request of Cost
	// now: it blocks (Limit 0), or holds fewer than Cost + MinRemaining
	// tokens (Remaining, the global budget's included). Never for a shadow
	// rule.
	Denies bool `json:"denies,omitempty"`
	// FreesAt is, when Denies, when the rule admits such a request again
	// (the admin host's clock): a block's end, the window's end of a
	// quota, when a rate bucket holds the tokens. Nil for a block with no
	// end, or a global budget spent until its window ends elsewhere
	// (Global.WindowEnd).
	FreesAt *time.Time `json:"frees_at,omitempty"`
}

// GlobalUse is a global rule's budget for a subject, as this Region sees
// it.
type GlobalUse struct {
	// Used is what every Region took from the window's budget, spent or
	// leased and unspent (the ledger's count); nil when this deployment
	// has no ledger or it did not answer (Error says why).
	Used *int64 `json:"used,omitempty"`
	// Leased is what this Region holds leased and unspent (its pool).
	Leased *int64 `json:"leased,omitempty"`
	// Remaining is what this Region can still admit in the window: the
	// ledger's unleased remainder and its pool (limit - used + leased).
	// The limit's Remaining is the lesser of it and the regional
	// bucket's.
	Remaining *int64 `json:"remaining,omitempty"`
	// WindowEnd is when the window's budget starts again.
	WindowEnd *time.Time `json:"window_end,omitempty"`
	// Error says why Used is missing: "no ledger" (the rule is decided as
	// a regional one here) or "ledger unavailable".
	Error string `json:"error,omitempty"`
}

// globalReader reads a global bucket's budget (limiter.Limiter with a
// ledger).
type globalReader interface {
	Global(ctx context.Context, subject string, b limiter.Bucket) (limiter.GlobalState, error)
}

// globalUse returns the view of global bucket b of subject.
func (s *Service) globalUse(ctx context.Context, subject string, b limiter.Bucket) *GlobalUse {
	g, ok := s.buckets.(globalReader)
	if !ok {
		return &GlobalUse{Error: "no ledger"}
	}
	st, err := g.Global(ctx, subject, b)
	switch {
	case errors.Is(err, limiter.ErrNoLedger):
		return &GlobalUse{Error: "no ledger"}
	case err != nil:
		s.o.Logger.WarnContext(ctx, "global budget unread", slog.String("subjectHash", s.subjectHash(subject)), slog.Any("error", err))
		return &GlobalUse{Error: "ledger unavailable"}
	}
	end := st.WindowEnd.UTC()
	return &GlobalUse{Used: &st.Used, Leased: &st.Pool, Remaining: &st.Remaining, WindowEnd: &end}
}

// subjectLimits peeks (charges nothing) at the buckets of the rules that
// apply to a subject.
func (s *Service) subjectLimits(ctx context.Context, c *call) (reply, error) {
	t, err := subjectQuery(c, true)
	if err != nil {
		return reply{}, err
	}
	subject, api, route := t.Subject, t.API, t.Route
	es, err := s.applicable(ctx, subject, api, route, rules.NormalizeDimension(c.Query.Get("dimension")))
	if err != nil {
		return reply{}, err
	}
	out := SubjectLimitsResponse{Subject: subject, API: api, Route: route, Limits: make([]BucketLimit, len(es))}
	var peek []limiter.Bucket
	var at []int // index in out.Limits of each peeked bucket
	for i, e := range es {
		out.Limits[i] = BucketLimit{
			Rule: e.ID, API: e.API, Route: e.Route, Subject: e.Subject, Plan: e.Plan,
			Limit: e.Limit, Period: rules.Period(e.Period), Burst: e.Burst, Cost: e.Cost,
			FailureMode: e.FailureMode, Mode: e.Mode, Kind: e.Kind, MinRemaining: e.MinRemaining,
		}
		if !e.Anchor.IsZero() {
			out.Limits[i].Anchor = e.Anchor.Format(time.RFC3339)
		}
		if !e.Expires.IsZero() {
			out.Limits[i].ExpiresAt = new(e.Expires.UTC())
		}
		if e.Blocked() && e.Mode != rules.Shadow {
			out.Limits[i].Denies, out.Limits[i].FreesAt = true, out.Limits[i].ExpiresAt
		}
		if !e.Blocked() { // a blocked bucket has nothing in Redis
			peek, at = append(peek, limiter.BucketFor(e)), append(at, i)
			if e.GlobalKey != "" {
				out.Limits[i].Global = s.globalUse(ctx, subject, limiter.BucketFor(e))
			}
		}
	}
	for start := 0; start < len(peek); start += limiter.MaxBuckets {
		end := min(start+limiter.MaxBuckets, len(peek))
		// Taken before Redis's TIME: now + reset lands a few ms before a
		// window's end, which is a whole second (anchors are), and rounds
		// to it.
		now := time.Now().UTC()
		states, err := s.buckets.Peek(ctx, subject, peek[start:end])
		if err != nil {
			return reply{}, fmt.Errorf("peek buckets: %w", err)
		}
		for j, st := range states {
			l := &out.Limits[at[start+j]]
			l.Remaining, l.ResetMs = st.Remaining, st.Reset.Milliseconds()
			if g := l.Global; g != nil && g.Remaining != nil {
				// The budget every Region shares bounds what this one's
				// bucket holds.
				l.Remaining = min(l.Remaining, *g.Remaining)
			}
			switch l.Kind {
			case rules.Quota:
				used, end := max(l.Limit-st.Remaining, 0), now.Add(st.Reset).Round(time.Second)
				l.Used, l.ResetsAt = &used, &end
			case rules.Concurrency:
				n := l.Limit - st.Remaining
				if st.Remaining == 0 {
					// Full, or over a lowered limit: count them.
					if n, err = s.buckets.InFlight(ctx, subject, peek[start+j]); err != nil {
						return reply{}, fmt.Errorf("count in-flight slots: %w", err)
					}
				}
				l.InFlight = &n
			}
			l.Denies, l.FreesAt = frees(l, st.Remaining, now)
		}
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// frees says whether l, whose regional bucket holds regional tokens now,
// denies a request of its cost, and when it admits one again.
func frees(l *BucketLimit, regional int64, now time.Time) (bool, *time.Time) {
	need := l.Cost + l.MinRemaining
	if l.Mode == rules.Shadow || l.Remaining >= need {
		return false, nil
	}
	if regional >= need { // the global budget is what is short
		if g := l.Global; g != nil && g.WindowEnd != nil {
			return true, g.WindowEnd
		}
		return true, nil
	}
	switch l.Kind {
	case rules.Quota:
		return true, l.ResetsAt
	case rules.Concurrency:
		// A slot frees when a holder finishes: no clock says when.
		return true, nil
	}
	// A rate bucket refills Limit tokens per Period, continuously.
	wait := time.Duration(float64(need-regional) * float64(time.Duration(l.Period)) / float64(l.Limit))
	return true, new(now.Add(wait).Round(time.Second))
}

// globalResetter starts a global bucket's window again in every Region
// (limiter.Limiter with a ledger).
type globalResetter interface {
	ResetGlobal(ctx context.Context, subject string, b limiter.Bucket) (int64, error)
}

// resetSubject deletes the subject's buckets (an admin unblock): they start
// full again, and so does the window's budget of a global rule, in every
// Region (limiter.ResetGlobal). It is idempotent: 204 also when no rule
// applies.
func (s *Service) resetSubject(ctx context.Context, c *call) (reply, error) {
	t, err := subjectQuery(c, false)
	if err != nil {
		return reply{}, err
	}
	subject, api := t.Subject, t.API
	es, err := s.applicable(ctx, subject, api, "", rules.NormalizeDimension(c.Query.Get("dimension")))
	if err != nil {
		return reply{}, err
	}
	bs := make([]limiter.Bucket, 0, len(es))
	var globals []limiter.Bucket
	for _, e := range es {
		if !e.Blocked() {
			bs = append(bs, limiter.BucketFor(e))
			if e.GlobalKey != "" {
				globals = append(globals, limiter.BucketFor(e))
			}
		}
	}
	if gr, ok := s.buckets.(globalResetter); ok {
		for _, b := range globals {
			if _, err := gr.ResetGlobal(ctx, subject, b); err != nil && !errors.Is(err, limiter.ErrNoLedger) {
				return reply{}, fmt.Errorf("reset the global budget of rule %s: %w", b.ID, err)
			}
		}
	}
	for chunk := range slices.Chunk(bs, limiter.MaxBuckets) {
		if err := s.buckets.Reset(ctx, subject, chunk); err != nil {
			return reply{}, fmt.Errorf("reset buckets: %w", err)
		}
	}
	s.o.Logger.InfoContext(ctx, "subject buckets reset", slog.String("subjectHash", s.subjectHash(subject)),
		slog.String("api", api), slog.Int("buckets", len(bs)), slog.String("actor", c.actor()),
		slog.String("requestId", c.RequestID))
	return reply{status: http.StatusNoContent}, nil
}

// subjectQuery reads the path's subject, ?api= and, when allowed,
// ?route=, normalized and checked as every entry does
// (rules.NormalizeTarget: "/subjects/%20S%20/limits" is S's). An api or
// route left out is every api, every route; one given empty is a 400.
func subjectQuery(c *call, withRoute bool) (rules.Target, error) {
	names := []string{"api", "dimension"}
	if withRoute {
		names = append(names, "route")
	}
	if err := onlyQuery(c.Query, names...); err != nil {
		return rules.Target{}, err
	}
	given := rules.PartSubject
	if c.Query.Has("api") {
		given |= rules.PartAPI
	}
	if withRoute && c.Query.Has("route") {
		given |= rules.PartRoute
	}
	t, err := rules.NormalizeTarget(rules.Target{Subject: c.param("subject"), API: c.Query.Get("api"), Route: c.Query.Get("route")}, given)
	var fs []rules.FieldError
	if ve := (*rules.ValidationError)(nil); errors.As(err, &ve) {
		fs = ve.Fields
	}
	if d := rules.NormalizeDimension(c.Query.Get("dimension")); d != "" && !rules.ValidDimension(d) {
		fs = append(fs, httpapi.FieldError("dimension", "must be 1 to 32 lower-case letters, digits, '_' or '-', starting with a letter"))
	}
	if len(fs) > 0 {
		return rules.Target{}, httpapi.BadRequest(fs...)
	}
	return t, nil
}

// MaxSubjectRules bounds the rules one subjects call reads from the store:
// those naming the subject or every subject (*), on the api asked for (or
// any) or on every api. A subject more rules could apply to gets a 400
// asking to narrow the call with ?api=.
const MaxSubjectRules = 1000

// applicable returns the rules (and the default) that charge subject's
// requests on api and route. It reads only the rules that can apply, by
// subject (the subject and *) and api (the api and *, when given), through
// the store's indexed list, and the plans they name: its work is bounded
// by MaxSubjectRules whatever the number of rules in the store.
//
// dim names the dimension (rules.Rule.Dimension) whose rules are looked at:
// "" is the default one, which alone has the default rule.
func (s *Service) applicable(ctx context.Context, subject, api, route, dim string) ([]*rules.Effective, error) {
	if s.buckets == nil {
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Detail: "Bucket inspection is not configured.",
			Err: fmt.Errorf("admin service built without a limiter")}
	}
	// Every caller goes on to read, reset or charge the subject's buckets:
	// only under the key that names them.
	if err := s.claimKey(ctx); err != nil {
		return nil, err
	}
	rs, err := s.subjectRules(ctx, subject, api)
	if err != nil {
		return nil, err
	}
	var ps []rules.Plan
	seen := map[string]bool{}
	for _, r := range rs {
		if r.Plan == "" || seen[r.Plan] {
			continue
		}
		seen[r.Plan] = true
		p, err := s.store.GetPlan(ctx, r.Plan)
		if errors.Is(err, rules.ErrNotFound) {
			continue // deleted since: the snapshot skips the rule, as authorizers do
		}
		if err != nil {
			return nil, fmt.Errorf("get plan %q: %w", r.Plan, err)
		}
		ps = append(ps, p)
	}
	// Only these rules can charge the subject, so the snapshot answers as
	// the authorizers' full one does.
	all := rules.NewSnapshot(rs, ps, rules.SnapshotOptions{Default: s.o.Default})
	snap := all.Dimension(dim)
	es := snap.ForSubject(subject, api, route)
	// Every api: a request to an api no rule names gets what the rules on
	// every api (*) give it, else the default. ("\x00" is such an api: no
	// stored text holds a NUL.)
	if def := snap.Default(); api == "" && def != nil && !slices.Contains(es, def) &&
		slices.Contains(snap.ForSubject(subject, "\x00", route), def) {
		es = append(es, def)
	}
	return es, nil
}

// subjectRules lists the stored rules that may apply to subject on api
// ("" for every api): subject or *, api or *. It fails with a 400 when more
// than MaxSubjectRules do.
func (s *Service) subjectRules(ctx context.Context, subject, api string) ([]rules.Rule, error) {
	// A subject or api longer than a rule may hold can only meet wildcards.
	subjects := []string{rules.Wildcard}
	if subject != "" && subject != rules.Wildcard && len(subject) <= rules.MaxSubjectLen {
		subjects = append(subjects, subject)
	}
	apis := []string{""}
	if api != "" {
		apis = []string{rules.Wildcard}
		if api != rules.Wildcard && len(api) <= rules.MaxAPILen {
			apis = append(apis, api)
		}
	}
	var out []rules.Rule
	for _, sub := range subjects {
		for _, a := range apis {
			f := rules.Filter{Subject: sub, API: a, Limit: 1000} // the stores' largest page
			for {
				page, err := s.store.ListRules(ctx, f)
				if err != nil {
					return nil, fmt.Errorf("list rules of a subject: %w", err)
				}
				out = append(out, page.Rules...)
				if len(out) > MaxSubjectRules {
					return nil, &httpapi.Error{Status: http.StatusBadRequest,
						Detail: fmt.Sprintf("More than %d rules may apply to this subject; name one api with ?api=.", MaxSubjectRules),
						Err:    fmt.Errorf("subject %s: over %d rules apply", s.subjectHash(subject), MaxSubjectRules)}
				}
				if page.NextCursor == "" {
					break
				}
				f.Cursor = page.NextCursor
			}
		}
	}
	return out, nil
}

// subjectHash is the keyed hash a log line names a subject by: the
// limiter's, or the unkeyed one when the Service has no limiter (its
// /subjects routes then answer 503 before logging anything).
func (s *Service) subjectHash(subject string) string {
	if s.buckets == nil {
		return limiter.SubjectHash(subject)
	}
	return s.buckets.SubjectHash(subject)
}
