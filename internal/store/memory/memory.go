// Package memory is the embedded rules store behind `make run`: rules, plans
// and their audit log held in process memory behind one mutex.
//
// It keeps the PostgreSQL store's semantics exactly — scope uniqueness,
// optimistic versions, audit rows, keyset pagination by id, the plan foreign
// key and plan-in-use — and both pass the contract suite in
// internal/store/storetest. Nothing is persisted: a restart starts empty.
package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/input"
)

// scope is the key two rules may not share.
type scope struct {
	api, route, subject string
	kind                rules.Kind
	dimension           string
}

// Store is an in-memory rules store, safe for concurrent use. The zero value
// is not usable; call New.
type Store struct {
	store.Single // the single writes, by writeOne
	maxRules     int

	mu      sync.Mutex
	rules   map[string]rules.Rule // by id
	scopes  map[scope]string      // scope → rule id
	plans   map[string]rules.Plan // by name
	audit   []rules.AuditEntry    // ids are index+1
	version int64                 // rules.Set.Version
}

var _ store.Store = (*Store)(nil)

// New returns an empty store with the default Options.
func New() *Store { return NewWithOptions(store.Options{}) }

// NewWithOptions returns an empty store configured by o. Its version starts
// at the time of the call, so a store made after a restart is newer than
// anything the previous one published.
func NewWithOptions(o store.Options) *Store {
	if o.MaxRules <= 0 {
		o.MaxRules = store.DefaultMaxRules
	}
	s := &Store{
		maxRules: o.MaxRules,
		rules:    make(map[string]rules.Rule),
		scopes:   make(map[scope]string),
		plans:    make(map[string]rules.Plan),
		version:  time.Now().UnixMicro(),
	}
	s.Single = s.writeOne
	return s
}

// now returns the current time as PostgreSQL would store it: UTC,
// microsecond precision. Both stores then return equal timestamps.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// writeOne makes op outside a batch (store.Single): readied (ready), then
// under the lock, where a rule create first finds room for one more rule,
// as PostgreSQL counts before it inserts.
func (s *Store) writeOne(ctx context.Context, op store.Op, actor string) (store.Result, error) {
	if err := ctx.Err(); err != nil {
		return store.Result{}, err
	}
	if err := ready(&op, ""); err != nil {
		return store.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op.Action == rules.ActionCreate && op.Rule != nil && len(s.rules) >= s.maxRules {
		return store.Result{}, fmt.Errorf("the store holds %d rules, its maximum: %w", len(s.rules), rules.ErrTooManyRules)
	}
	return s.applyOp(op, "", actor)
}

// ready points op at a deep copy of its rule or plan, readied for a write
// for set as the PostgreSQL store readies it (input.RuleWrite,
// input.PlanWrite).
func ready(op *store.Op, set string) error {
	if op.Rule != nil {
		r := cloneRule(*op.Rule)
		op.Rule = &r
		return input.RuleWrite(&r, op.Action, set)
	}
	p := clonePlan(*op.Plan)
	op.Plan = &p
	return input.PlanWrite(&p, op.Action, set)
}

// createRule stores r, readied; s.mu is held.
func (s *Store) createRule(r rules.Rule, actor string) (rules.Rule, error) {
	if err := checkRule(r); err != nil {
		return rules.Rule{}, err
	}
	sc := scope{r.API, r.Route, r.Subject, r.Kind, r.Dimension}
	if holder, taken := s.scopes[sc]; taken {
		return rules.Rule{}, s.scopeTaken(holder)
	}
	if err := s.checkRulePlan(r); err != nil {
		return rules.Rule{}, err
	}
	t := now()
	r.ID = uuid.NewString()
	r.Version = 1
	r.CreatedAt, r.UpdatedAt = t, t
	s.rules[r.ID] = r
	s.scopes[sc] = r.ID
	s.record(rules.KindRule, r.ID, rules.ActionCreate, actor, t, nil, r)
	return cloneRule(r), nil
}

// GetRule returns the rule with that id, or rules.ErrNotFound (also for an
// id that is not a UUID).
func (s *Store) GetRule(ctx context.Context, id string) (rules.Rule, error) {
	if err := ctx.Err(); err != nil {
		return rules.Rule{}, err
	}
	id, ok := input.ID(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, found := s.rules[id]
	if !ok || !found {
		return rules.Rule{}, fmt.Errorf("get rule %q: %w", id, rules.ErrNotFound)
	}
	return cloneRule(r), nil
}

// updateRule is UpdateRule of r, readied, when store.CheckRow allows it;
// s.mu is held.
func (s *Store) updateRule(r rules.Rule, ifVersion int64, set, actor string) (rules.Rule, error) {
	id := r.ID
	old, found := s.rules[id]
	if !found {
		return rules.Rule{}, rules.ErrNotFound
	}
	if err := store.CheckRow("rule "+id, old.Version, ifVersion, old.Set, set); err != nil {
		return rules.Rule{}, err
	}
	if err := checkRule(r); err != nil {
		return rules.Rule{}, err
	}
	oldScope, newScope := scope{old.API, old.Route, old.Subject, old.Kind, old.Dimension}, scope{r.API, r.Route, r.Subject, r.Kind, r.Dimension}
	if holder, taken := s.scopes[newScope]; taken && holder != id {
		return rules.Rule{}, s.scopeTaken(holder)
	}
	if err := s.checkRulePlan(r); err != nil {
		return rules.Rule{}, err
	}
	if input.SameRule(old, r) {
		return cloneRule(old), nil // changes nothing: no new version, no audit entry
	}
	r.Version = old.Version + 1
	r.CreatedAt = old.CreatedAt
	r.UpdatedAt = now()
	delete(s.scopes, oldScope)
	s.scopes[newScope] = id
	s.rules[id] = r
	s.record(rules.KindRule, id, rules.ActionUpdate, actor, r.UpdatedAt, old, r)
	return cloneRule(r), nil
}

// deleteRule is DeleteRule of the rule id (canonical) when
// store.CheckRow allows it; s.mu is held.
func (s *Store) deleteRule(id string, ifVersion int64, set, actor string) error {
	old, found := s.rules[id]
	if !found {
		return rules.ErrNotFound
	}
	if err := store.CheckRow("rule "+id, old.Version, ifVersion, old.Set, set); err != nil {
		return err
	}
	delete(s.rules, id)
	delete(s.scopes, scope{old.API, old.Route, old.Subject, old.Kind, old.Dimension})
	s.record(rules.KindRule, id, rules.ActionDelete, actor, now(), old, nil)
	return nil
}

// ListRules returns one page of the rules matching f, ordered by api,
// route, subject and id (input.Key). A bad page size or cursor is a
// *rules.ValidationError.
func (s *Store) ListRules(ctx context.Context, f rules.Filter) (rules.Page, error) {
	if err := ctx.Err(); err != nil {
		return rules.Page{}, err
	}
	size, after, err := input.Page(f)
	if err != nil {
		return rules.Page{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := []rules.Rule{}
	for _, r := range s.rules {
		if (after == nil || input.KeyOf(r).Compare(*after) > 0) && matches(r, f) {
			rs = append(rs, cloneRule(r))
		}
	}
	slices.SortFunc(rs, func(a, b rules.Rule) int { return input.KeyOf(a).Compare(input.KeyOf(b)) })
	return input.PageOf(rs, size), nil
}

func matches(r rules.Rule, f rules.Filter) bool {
	return (f.API == "" || r.API == f.API) &&
		(f.Subject == "" || r.Subject == f.Subject) &&
		(f.Route == "" || r.Route == f.Route) &&
		(f.Plan == "" || r.Plan == f.Plan)
}

// RuleHistory returns the audit entries of the rule, oldest first, also
// after it was deleted; rules.ErrNotFound when it never existed.
func (s *Store) RuleHistory(ctx context.Context, id string) ([]rules.AuditEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cid, ok := input.ID(id)
	if !ok {
		return nil, fmt.Errorf("rule history %q: %w", id, rules.ErrNotFound)
	}
	return s.history(rules.KindRule, cid)
}

// createPlan is CreatePlan of p, readied; s.mu is held.
func (s *Store) createPlan(p rules.Plan, actor string) (rules.Plan, error) {
	if err := checkPlan(p); err != nil {
		return rules.Plan{}, err
	}
	if _, taken := s.plans[p.Name]; taken {
		return rules.Plan{}, fmt.Errorf("a plan named %q already exists: %w", p.Name, rules.ErrConflict)
	}
	t := now()
	p.Version = 1
	p.CreatedAt, p.UpdatedAt = t, t
	s.plans[p.Name] = p
	s.record(rules.KindPlan, p.Name, rules.ActionCreate, actor, t, nil, p)
	return clonePlan(p), nil
}

// GetPlan returns the plan with that name, or rules.ErrNotFound.
func (s *Store) GetPlan(ctx context.Context, name string) (rules.Plan, error) {
	if err := ctx.Err(); err != nil {
		return rules.Plan{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, found := s.plans[name]
	if !found {
		return rules.Plan{}, fmt.Errorf("get plan %q: %w", name, rules.ErrNotFound)
	}
	return clonePlan(p), nil
}

// updatePlan is UpdatePlan of p, readied, when store.CheckRow allows it;
// s.mu is held.
func (s *Store) updatePlan(p rules.Plan, ifVersion int64, set, actor string) (rules.Plan, error) {
	old, found := s.plans[p.Name]
	if !found {
		return rules.Plan{}, rules.ErrNotFound
	}
	if err := store.CheckRow(fmt.Sprintf("plan %q", p.Name), old.Version, ifVersion, old.Set, set); err != nil {
		return rules.Plan{}, err
	}
	if err := checkPlan(p); err != nil {
		return rules.Plan{}, err
	}
	if err := rules.CheckPlanRules(p, s.named(p.Name)); err != nil {
		return rules.Plan{}, err
	}
	if input.SamePlan(old, p) {
		return clonePlan(old), nil // changes nothing: no new version, no audit entry
	}
	p.Version = old.Version + 1
	p.CreatedAt = old.CreatedAt
	p.UpdatedAt = now()
	s.plans[p.Name] = p
	s.record(rules.KindPlan, p.Name, rules.ActionUpdate, actor, p.UpdatedAt, old, p)
	return clonePlan(p), nil
}

// deletePlan is DeletePlan when store.CheckRow allows it and no rule
// names the plan; s.mu is held.
func (s *Store) deletePlan(name string, ifVersion int64, set, actor string) error {
	old, found := s.plans[name]
	if !found {
		return rules.ErrNotFound
	}
	if err := store.CheckRow(fmt.Sprintf("plan %q", name), old.Version, ifVersion, old.Set, set); err != nil {
		return err
	}
	if named := s.named(name); len(named) > 0 {
		ids := make([]string, min(len(named), store.MaxListed))
		for i := range ids {
			ids[i] = named[i].ID
		}
		return &store.PlanInUseError{Plan: name, Count: len(named), Rules: ids}
	}
	delete(s.plans, name)
	s.record(rules.KindPlan, name, rules.ActionDelete, actor, now(), old, nil)
	return nil
}

// ListPlans returns every plan ordered by name.
func (s *Store) ListPlans(ctx context.Context) ([]rules.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return sorted(s.plans, clonePlan), nil
}

// PlanHistory returns the audit entries of the plan, oldest first, also
// after it was deleted; rules.ErrNotFound when it never existed.
func (s *Store) PlanHistory(ctx context.Context, name string) ([]rules.AuditEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.history(rules.KindPlan, name)
}

// LoadAll returns every rule, disabled ones too, ordered by id, and every
// plan ordered by name, with the rules version.
func (s *Store) LoadAll(ctx context.Context) (rules.Set, error) {
	if err := ctx.Err(); err != nil {
		return rules.Set{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return rules.Set{Version: s.version, Rules: sorted(s.rules, cloneRule), Plans: sorted(s.plans, clonePlan)}, nil
}

// sorted returns a copy (clone) of each value of m, ordered by key: rules
// by id, plans by name. Never nil.
func sorted[V any](m map[string]V, clone func(V) V) []V {
	out := make([]V, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, clone(m[k]))
	}
	return out
}

// named returns the rules naming the plan, ordered by id; s.mu is held.
func (s *Store) named(plan string) []rules.Rule {
	return slices.DeleteFunc(sorted(s.rules, cloneRule), func(r rules.Rule) bool { return r.Plan != plan })
}

// checkRulePlan reports an unknown plan the way PostgreSQL's foreign key
// does, and a rule that does not fit its plan's numbers
// (rules.Rule.ValidateWithPlan). s.mu is held.
func (s *Store) checkRulePlan(r rules.Rule) error {
	if r.Plan == "" {
		return nil
	}
	p, ok := s.plans[r.Plan]
	if !ok {
		return input.FieldError("plan", fmt.Sprintf("unknown plan %q", r.Plan))
	}
	return r.ValidateWithPlan(p)
}

// record appends an audit entry, and moves the version as every write
// does: to the time in microseconds, and at least by one. before and after
// are nil or a Rule or Plan. s.mu is held.
func (s *Store) record(kind, target, action, actor string, at time.Time, before, after any) {
	s.version = max(s.version+1, time.Now().UnixMicro())
	s.audit = append(s.audit, rules.AuditEntry{
		ID:       int64(len(s.audit) + 1),
		Kind:     kind,
		TargetID: target,
		Action:   action,
		Actor:    actor,
		At:       at,
		Before:   toJSON(before),
		After:    toJSON(after),
	})
}

func (s *Store) history(kind, target string) ([]rules.AuditEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []rules.AuditEntry
	for _, e := range s.audit {
		if e.Kind == kind && e.TargetID == target {
			e.Before = slices.Clone(e.Before)
			e.After = slices.Clone(e.After)
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s history %q: %w", kind, target, rules.ErrNotFound)
	}
	return out, nil
}

// toJSON marshals a Rule or Plan; nil stays nil (JSON null). Both types
// marshal without error by construction.
func toJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	return b
}

// scopeTaken names the rule holding a scope; called under s.mu.
func (s *Store) scopeTaken(holder string) error {
	h := s.rules[holder]
	return &store.ScopeTakenError{ID: h.ID, API: h.API, Route: h.Route, Kind: h.Kind, Dimension: h.Dimension, Wildcard: h.Subject == rules.Wildcard}
}

// checkRule mirrors the PostgreSQL schema's CHECK constraints, the last line
// of defence behind internal/rules validation, so a rule this store accepts
// is one PostgreSQL accepts too. Its text is checked by ready.
func checkRule(r rules.Rule) error {
	inline := r.Limit != nil && r.Period != 0
	return firstBroken([]constraint{
		{"api", r.API == "" || len(r.API) > rules.MaxAPILen},
		{"route", r.Route == "" || len(r.Route) > rules.MaxRouteLen},
		{"subject", r.Subject == "" || len(r.Subject) > rules.MaxSubjectLen},
		{"plan", !(r.Plan != "" && r.Limit == nil && r.Period == 0 && r.Burst == nil) && !(r.Plan == "" && inline)},
		{"limit", r.Limit != nil && (*r.Limit < 0 || *r.Limit > rules.MaxLimit)},
		{"period", r.Period != 0 && !validPeriod(r.Period)},
		{"burst", r.Burst != nil && (*r.Burst < 0 || *r.Burst > rules.MaxBurst)},
		{"cost", r.Cost != nil && (*r.Cost < 1 || *r.Cost > rules.MaxCost)},
		{"failure_mode", r.FailureMode != rules.FailOpen && r.FailureMode != rules.FailClosed},
		{"mode", r.Mode != rules.Enforce && r.Mode != rules.Shadow},
		{"description", len(r.Description) > rules.MaxDescriptionLen},
		{"kind", r.Kind != rules.Rate && r.Kind != rules.Quota && r.Kind != rules.Concurrency},
		{"anchor", r.Anchor != "" && (r.Kind != rules.Quota || !validAnchor(r))},
		{"min_remaining", r.MinRemaining != nil && (*r.MinRemaining < 0 || *r.MinRemaining >= rules.MaxBurst)},
		{"period_kind", r.Kind == rules.Quota && r.Plan == "" && (!r.Period.Calendar() || r.Burst != nil)},
		{"period_kind", r.Kind == rules.Concurrency && r.Plan == "" && (r.Period > rules.MaxLeaseTTL || r.Burst != nil)},
		{"global_kind", r.Kind == rules.Concurrency && r.Global},
		{"dimension", r.Dimension != "" && !rules.ValidDimension(r.Dimension)},
		{"set", r.Set != "" && !planName.MatchString(r.Set)},
		{"expires_at", r.ExpiresAt != nil && (r.ExpiresAt.Year() < 1970 || r.ExpiresAt.Year() >= 2100)},
		{"global", r.Global && (r.Mode == rules.Shadow || r.MinRemaining != nil && *r.MinRemaining != 0 || r.Durable)},
		{"global_period", r.Global && r.Kind != rules.Quota && r.Period != 0 && r.Period < rules.MinGlobalPeriod},
	})
}

// validAnchor is the anchor check of the schema: a time from 1970 to 2100.
func validAnchor(r rules.Rule) bool {
	t, ok := r.AnchorTime()
	return ok && t.Year() >= 1970 && t.Year() < 2100
}

// checkPlan mirrors the plans table's CHECK constraints; its text is
// checked by ready.
func checkPlan(p rules.Plan) error {
	return firstBroken([]constraint{
		{"name", !planName.MatchString(p.Name)},
		{"limit", p.Limit < 0 || p.Limit > rules.MaxLimit},
		{"period", !validPeriod(p.Period)},
		{"burst", p.Burst != nil && (*p.Burst < 0 || *p.Burst > rules.MaxBurst)},
		{"description", len(p.Description) > rules.MaxDescriptionLen},
		{"kind", p.Kind != rules.Rate && p.Kind != rules.Quota && p.Kind != rules.Concurrency},
		{"period_kind", p.Kind == rules.Quota && (!p.Period.Calendar() || p.Burst != nil)},
		{"period_kind", p.Kind == rules.Concurrency && (p.Period > rules.MaxLeaseTTL || p.Burst != nil)},
		{"global_kind", p.Kind == rules.Concurrency && p.Global},
		{"set", p.Set != "" && !planName.MatchString(p.Set)},
		{"global_period", p.Global && p.Kind != rules.Quota && p.Period < rules.MinGlobalPeriod},
	})
}

// constraint is a CHECK constraint of the schema, by the name
// input.Violation knows it, and whether a row breaks it.
type constraint struct {
	name   string
	broken bool
}

// firstBroken is the input.Violation of the first broken constraint of
// cs, in order; nil when none is.
func firstBroken(cs []constraint) error {
	for _, c := range cs {
		if c.broken {
			return input.Violation(c.name)
		}
	}
	return nil
}

var planName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// validPeriod is the period_ms check of the schema: whole seconds from 1 s
// to 1 year.
func validPeriod(p rules.Period) bool {
	return p >= rules.MinPeriod && p <= rules.MaxPeriod && p%rules.Period(time.Second) == 0
}

func cloneRule(r rules.Rule) rules.Rule {
	r.Limit = clonePtr(r.Limit)
	r.Burst = clonePtr(r.Burst)
	r.Cost = clonePtr(r.Cost)
	r.Enabled = clonePtr(r.Enabled)
	r.MinRemaining = clonePtr(r.MinRemaining)
	if r.ExpiresAt != nil {
		// A copy, as PostgreSQL stores it: microseconds.
		t := r.ExpiresAt.UTC().Truncate(time.Microsecond)
		r.ExpiresAt = &t
	}
	return r
}

func clonePlan(p rules.Plan) rules.Plan {
	p.Burst = clonePtr(p.Burst)
	return p
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Apply makes every write of b or none (store.Store.Apply): it runs the
// ops under the lock on the live maps, and on a failure puts back a copy
// taken first. The version moves once.
func (s *Store) Apply(ctx context.Context, b store.Batch, actor string) ([]store.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckBatch(b); err != nil {
		return nil, err
	}
	if len(b.Ops) == 0 {
		return []store.Result{}, nil // nothing to write: no transaction, no new version
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	saved := struct {
		rules   map[string]rules.Rule
		scopes  map[scope]string
		plans   map[string]rules.Plan
		audit   int
		version int64
	}{maps.Clone(s.rules), maps.Clone(s.scopes), maps.Clone(s.plans), len(s.audit), s.version}
	out := make([]store.Result, len(b.Ops))
	var err error
	for i, op := range b.Ops {
		if err = ready(&op, b.Set); err == nil {
			out[i], err = s.applyOp(op, b.Set, actor)
		}
		if err != nil {
			err = &store.BatchError{Index: i, Op: b.Ops[i].Describe(), Err: err}
			break
		}
	}
	if err == nil && len(s.rules) > s.maxRules {
		err = fmt.Errorf("the batch leaves %d rules, above the maximum %d: %w", len(s.rules), s.maxRules, rules.ErrTooManyRules)
	}
	if err != nil {
		s.rules, s.scopes, s.plans, s.audit = saved.rules, saved.scopes, saved.plans, s.audit[:saved.audit]
		s.version = saved.version
		return nil, fmt.Errorf("apply set %q: %w", b.Set, err)
	}
	// One version for the batch, as one transaction gets in PostgreSQL.
	s.version = max(saved.version+1, time.Now().UnixMicro())
	return out, nil
}

// applyOp makes op, readied (ready), for set (a batch's; "" for a single
// write); s.mu is held.
func (s *Store) applyOp(op store.Op, set, actor string) (store.Result, error) {
	if r := op.Rule; r != nil {
		switch op.Action {
		case rules.ActionCreate:
			got, err := s.createRule(*r, actor)
			return store.Result{Rule: &got}, err
		case rules.ActionUpdate:
			got, err := s.updateRule(*r, op.IfVersion, set, actor)
			return store.Result{Rule: &got}, err
		default:
			return store.Result{}, s.deleteRule(r.ID, op.IfVersion, set, actor)
		}
	}
	switch p := *op.Plan; op.Action {
	case rules.ActionCreate:
		got, err := s.createPlan(p, actor)
		return store.Result{Plan: &got}, err
	case rules.ActionUpdate:
		got, err := s.updatePlan(p, op.IfVersion, set, actor)
		return store.Result{Plan: &got}, err
	default:
		return store.Result{}, s.deletePlan(p.Name, op.IfVersion, set, actor)
	}
}
