// Package storetest is the contract suite every rules store passes: the
// PostgreSQL store in production and the memory store behind `make run`.
// Both stores run the same Run, so the admin API behaves the same on a
// laptop as on AWS. The contract itself is store.Store.
package storetest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
)

// Run runs the contract suite against the stores newStore returns. Every
// subtest calls newStore once for an empty store of its own, configured
// by o (the zero Options but for the tests of Options), and runs in
// parallel with the others; newStore registers any cleanup with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T, o store.Options) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RuleCRUD", testRuleCRUD},
		{"RuleAllFields", testRuleAllFields},
		{"RuleNotFound", testRuleNotFound},
		{"RuleScopeConflict", testRuleScopeConflict},
		{"QuotaScopes", testQuotaScopes},
		{"QuotaPlans", testQuotaPlans},
		{"ConcurrencyScopes", testConcurrencyScopes},
		{"RuleDimension", testRuleDimension},
		{"Global", testGlobal},
		{"RuleStale", testRuleStale},
		{"RuleAudit", testRuleAudit},
		{"NoOpUpdates", testNoOpUpdates},
		{"RuleLastLineOfDefence", testRuleLastLineOfDefence},
		{"PlanCRUD", testPlanCRUD},
		{"PlanAudit", testPlanAudit},
		{"PlanForeignKey", testPlanForeignKey},
		{"PlanInUse", testPlanInUse},
		{"PlanUpdateRelimits", testPlanUpdateRelimits},
		{"RuleFitsPlan", testRuleFitsPlan},
		{"PlanUpdateKeepsRulesInBounds", testPlanUpdateKeepsRulesInBounds},
		{"ConcurrentPlanAndRuleWrites", testConcurrentPlanAndRuleWrites},
		{"LoadAll", testLoadAll},
		{"LoadAllVersion", testLoadAllVersion},
		{"ListFilters", testListFilters},
		{"ListOrder", testListOrder},
		{"ListBadParams", testListBadParams},
		{"Pagination", testPagination},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"ConcurrentCreates", testConcurrentCreates},
		{"NoAliasing", testNoAliasing},
		{"ApplyBatch", testApplyBatch},
		{"ApplyAllOrNothing", testApplyAllOrNothing},
		{"ApplyOwnership", testApplyOwnership},
		{"MaxRules", testMaxRules},
		{"MaxRulesConcurrent", testMaxRulesConcurrent},
	}
	options := map[string]store.Options{"MaxRules": {MaxRules: 3}, "MaxRulesConcurrent": {MaxRules: 5}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t, options[tc.name]))
		})
	}
}

const actor = "arn:aws:iam::123456789012:user/alice"

// inline returns a valid rule with inline numbers.
func inline(api, route, subject string, limit int64, period time.Duration) rules.Rule {
	return rules.Rule{API: api, Route: route, Subject: subject, Kind: rules.Rate, Limit: new(limit), Period: rules.Period(period)}
}

func gold() rules.Plan {
	return rules.Plan{Name: "gold", Kind: rules.Rate, Limit: 1000, Period: rules.Period(time.Minute), Burst: new(int64(2000)), Description: "gold tier"}
}

func mustCreateRule(t *testing.T, s store.Store, r rules.Rule) rules.Rule {
	t.Helper()
	got, err := s.CreateRule(t.Context(), r, actor)
	if err != nil {
		t.Fatalf("CreateRule(%s %s %s) error = %v", r.API, r.Route, r.Subject, err)
	}
	return got
}

func mustCreatePlan(t *testing.T, s store.Store, p rules.Plan) rules.Plan {
	t.Helper()
	got, err := s.CreatePlan(t.Context(), p, actor)
	if err != nil {
		t.Fatalf("CreatePlan(%s) error = %v", p.Name, err)
	}
	return got
}

func mustLoad(t *testing.T, s store.Store) rules.Set {
	t.Helper()
	set, err := s.LoadAll(t.Context())
	if err != nil {
		t.Fatalf("LoadAll() error = %v", err)
	}
	return set
}

// fieldOf returns the first field of a *rules.ValidationError, or "" when err
// is not one.
func fieldOf(err error) string {
	var ve *rules.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) == 0 {
		return ""
	}
	return ve.Fields[0].Field
}

// checkFields fails t unless err is a *rules.ValidationError with exactly
// the want fields and reasons.
func checkFields(t *testing.T, call string, err error, want []rules.FieldError) {
	t.Helper()
	var ve *rules.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%s error = %v, want a *ValidationError", call, err)
	}
	if diff := cmp.Diff(want, ve.Fields); diff != "" {
		t.Errorf("%s fields mismatch (-want +got):\n%s", call, diff)
	}
}

// ignoreStoreFields compares what the caller gave with what the store
// returned.
var ignoreStoreFields = cmp.FilterPath(func(p cmp.Path) bool {
	switch p.Last().String() {
	case ".ID", ".Version", ".CreatedAt", ".UpdatedAt":
		return true
	}
	return false
}, cmp.Ignore())

func testRuleCRUD(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := inline("a1b2c3d4e5", "GET /orders/{id}", "key-1", 10, time.Minute)
	before := time.Now().Add(-time.Second)
	created := mustCreateRule(t, s, in)

	if _, err := uuid.Parse(created.ID); err != nil {
		t.Errorf("CreateRule().ID = %q, want a UUID", created.ID)
	}
	if created.Version != 1 {
		t.Errorf("CreateRule().Version = %d, want 1", created.Version)
	}
	if created.CreatedAt.Before(before) || !created.UpdatedAt.Equal(created.CreatedAt) {
		t.Errorf("CreateRule() times = %v, %v; want now and equal", created.CreatedAt, created.UpdatedAt)
	}
	want := in
	want.FailureMode, want.Mode, want.Enabled = rules.FailOpen, rules.Enforce, new(true)
	if diff := cmp.Diff(want, created, ignoreStoreFields); diff != "" {
		t.Errorf("CreateRule() mismatch, defaults filled (-want +got):\n%s", diff)
	}

	got, err := s.GetRule(ctx, created.ID)
	if err != nil {
		t.Fatalf("GetRule(%s) error = %v", created.ID, err)
	}
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("GetRule() mismatch (-created +got):\n%s", diff)
	}
	// Upper case is the same UUID.
	if got, err := s.GetRule(ctx, strings.ToUpper(created.ID)); err != nil || got.ID != created.ID {
		t.Errorf("GetRule(upper-case id) = %q, %v; want %q", got.ID, err, created.ID)
	}

	upd := got
	upd.Limit = new(int64(20))
	upd.Subject = "key-2"
	upd.Description = "raised"
	updated, err := s.UpdateRule(ctx, upd, 1, actor)
	if err != nil {
		t.Fatalf("UpdateRule() error = %v", err)
	}
	if updated.Version != 2 || !updated.CreatedAt.Equal(created.CreatedAt) || updated.UpdatedAt.Before(created.UpdatedAt) {
		t.Errorf("UpdateRule() version, created, updated = %d, %v, %v; want 2, %v, >= %v",
			updated.Version, updated.CreatedAt, updated.UpdatedAt, created.CreatedAt, created.UpdatedAt)
	}
	if diff := cmp.Diff(upd, updated, ignoreStoreFields); diff != "" {
		t.Errorf("UpdateRule() mismatch (-want +got):\n%s", diff)
	}
	if got, _ := s.GetRule(ctx, created.ID); !cmp.Equal(got, updated) {
		t.Errorf("GetRule() after update = %+v, want %+v", got, updated)
	}
	// The old scope is free again.
	mustCreateRule(t, s, in)

	if err := s.DeleteRule(ctx, created.ID, 2, actor); err != nil {
		t.Fatalf("DeleteRule(version 2) error = %v", err)
	}
	if _, err := s.GetRule(ctx, created.ID); !errors.Is(err, rules.ErrNotFound) {
		t.Errorf("GetRule() after delete error = %v, want ErrNotFound", err)
	}
	if err := s.DeleteRule(ctx, created.ID, 0, actor); !errors.Is(err, rules.ErrNotFound) {
		t.Errorf("DeleteRule() twice error = %v, want ErrNotFound", err)
	}
	// Unconditional delete.
	other := mustCreateRule(t, s, inline("*", "*", "*", 5, time.Second))
	if err := s.DeleteRule(ctx, other.ID, 0, actor); err != nil {
		t.Errorf("DeleteRule(version 0) error = %v, want nil", err)
	}
}

func testRuleAllFields(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreatePlan(t, s, gold())
	for _, in := range []rules.Rule{
		{
			API: "*", Route: "POST /orders", Subject: "*", Limit: new(int64(0)), Period: rules.Period(365 * 24 * time.Hour),
			Burst: new(int64(0)), Cost: new(int64(1)), FailureMode: rules.FailClosed, Mode: rules.Shadow,
			Enabled: new(false), Description: "blocks everyone — ünïcode", Kind: rules.Rate,
		},
		{
			API: "api", Route: "ANY /{proxy+}", Subject: "user-7", Limit: new(int64(1_000_000_000)), Period: rules.Period(time.Second),
			Burst: new(int64(1_000_000_000)), Cost: new(int64(1_000_000)), FailureMode: rules.FailOpen, Mode: rules.Enforce, Enabled: new(true),
			Kind: rules.Rate, MinRemaining: new(int64(0)),
		},
		{API: "api", Route: "*", Subject: "gold-customer", Plan: "gold", Cost: new(int64(3)), FailureMode: rules.FailOpen, Mode: rules.Enforce, Enabled: new(true), Kind: rules.Rate},
		{
			API: "api", Route: "*", Subject: "gold-customer", Kind: rules.Quota, Limit: new(int64(100_000)), Period: rules.Month,
			Anchor: "2026-01-31T09:30:00Z", MinRemaining: new(int64(500)), Cost: new(int64(2)), FailureMode: rules.FailClosed, Mode: rules.Enforce, Enabled: new(true),
			Durable: true,
		},
		{API: "api", Route: "GET /x", Subject: "*", Kind: rules.Quota, Limit: new(int64(5)), Period: rules.Period(rules.Year), FailureMode: rules.FailOpen, Mode: rules.Shadow, Enabled: new(true)},
		{
			API: "api", Route: "GET /y", Subject: "customer-x", Kind: rules.Rate, Limit: new(int64(500)), Period: rules.Period(time.Minute),
			FailureMode: rules.FailOpen, Mode: rules.Enforce, Enabled: new(true), Set: "platform",
			ExpiresAt: new(time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)), Global: true,
		},
	} {
		created, err := s.CreateRule(ctx, in, actor)
		if err != nil {
			t.Fatalf("CreateRule(%+v) error = %v", in, err)
		}
		if diff := cmp.Diff(in, created, ignoreStoreFields); diff != "" {
			t.Errorf("CreateRule() mismatch (-want +got):\n%s", diff)
		}
		got, err := s.GetRule(ctx, created.ID)
		if err != nil {
			t.Fatalf("GetRule() error = %v", err)
		}
		if diff := cmp.Diff(created, got); diff != "" {
			t.Errorf("GetRule() mismatch (-created +got):\n%s", diff)
		}
	}
}

// testGlobal: global rules and plans keep the flag through create, get,
// update, list and LoadAll, and a rule made global by its plan must fit
// what a global rule may be.
func testGlobal(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := inline("api", "GET /g", "*", 100, time.Hour)
	r.Global = true
	created := mustCreateRule(t, s, r)
	if !created.Global {
		t.Errorf("CreateRule(global) = %+v, want global", created)
	}
	if got, err := s.GetRule(ctx, created.ID); err != nil || !got.Global {
		t.Errorf("GetRule(global) = %+v, %v; want global", got, err)
	}
	off := created
	off.Global = false
	updated, err := s.UpdateRule(ctx, off, created.Version, actor)
	if err != nil || updated.Global || updated.Version != created.Version+1 {
		t.Errorf("UpdateRule(global false) = %+v, %v; want regional at version %d", updated, err, created.Version+1)
	}
	updated.Global = true
	if updated, err = s.UpdateRule(ctx, updated, updated.Version, actor); err != nil || !updated.Global {
		t.Errorf("UpdateRule(global true) = %+v, %v; want global", updated, err)
	}
	if same, err := s.UpdateRule(ctx, updated, updated.Version, actor); err != nil || same.Version != updated.Version {
		t.Errorf("UpdateRule(unchanged global) = version %d, %v; want %d: no write", same.Version, err, updated.Version)
	}
	if es, err := s.RuleHistory(ctx, created.ID); err != nil || len(es) != 3 {
		t.Errorf("RuleHistory(global) = %d entries, %v; want create and two updates", len(es), err)
	} else if before := image[rules.Rule](t, es[2].Before); before != nil && before.Global {
		t.Errorf("RuleHistory(global)[2].before = %s, want regional", es[2].Before)
	} else if after := image[rules.Rule](t, es[2].After); after == nil || !after.Global {
		t.Errorf("RuleHistory(global)[2].after = %s, want global", es[2].After)
	}
	mustCreateRule(t, s, inline("api", "GET /r", "*", 100, time.Second))

	p := rules.Plan{Name: "shared", Kind: rules.Quota, Limit: 1_000_000, Period: rules.Month, Global: true}
	cp := mustCreatePlan(t, s, p)
	if diff := cmp.Diff(p, cp, ignoreStoreFields); diff != "" {
		t.Errorf("CreatePlan(global) mismatch (-want +got):\n%s", diff)
	}
	if got, err := s.GetPlan(ctx, "shared"); err != nil || !got.Global {
		t.Errorf("GetPlan(global) = %+v, %v; want global", got, err)
	}
	onPlan := mustCreateRule(t, s, rules.Rule{API: "api", Route: "*", Subject: "k", Kind: rules.Quota, Plan: "shared"})
	shadow := onPlan
	shadow.Mode = rules.Shadow
	if _, err := s.UpdateRule(ctx, shadow, 0, actor); fieldOf(err) != "global" {
		t.Errorf("UpdateRule(shadow on a global plan) error = %v, want a ValidationError on global", err)
	}
	regional := rules.Plan{Name: "regional", Limit: 10, Period: rules.Period(time.Minute)}
	mustCreatePlan(t, s, regional)
	sh := mustCreateRule(t, s, rules.Rule{API: "api", Route: "*", Subject: "s", Plan: "regional", Mode: rules.Shadow})
	regional.Global = true
	if _, err := s.UpdatePlan(ctx, regional, 0, actor); !errors.Is(err, rules.ErrConflict) || !strings.Contains(err.Error(), sh.ID) {
		t.Errorf("UpdatePlan(global, a shadow rule names it) error = %v, want ErrConflict naming %s", err, sh.ID)
	}
	cp.Global = false
	if up, err := s.UpdatePlan(ctx, cp, cp.Version, actor); err != nil || up.Global || up.Version != 2 {
		t.Errorf("UpdatePlan(global false) = %+v, %v; want regional at version 2", up, err)
	}

	page, err := s.ListRules(ctx, rules.Filter{API: "api"})
	if err != nil {
		t.Fatal(err)
	}
	routes := pluck(page.Rules, func(r rules.Rule) string { return fmt.Sprint(r.Route, " global=", r.Global) })
	if want := []string{"* global=false", "* global=false", "GET /g global=true", "GET /r global=false"}; !cmp.Equal(routes, want) {
		t.Errorf("ListRules() routes = %q, want %q", routes, want)
	}
	for _, r := range mustLoad(t, s).Rules {
		if r.ID == created.ID && !r.Global {
			t.Errorf("LoadAll() rule %s is regional, want global", r.ID)
		}
	}
	cp.Global = true
	if _, err := s.UpdatePlan(ctx, cp, 0, actor); err != nil {
		t.Fatal(err)
	}
	ps, err := s.ListPlans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := pluck(ps, func(p rules.Plan) string { return fmt.Sprint(p.Name, " global=", p.Global) })
	if want := []string{"regional global=false", "shared global=true"}; !cmp.Equal(names, want) {
		t.Errorf("ListPlans() names = %q, want %q", names, want)
	}
}

func testRuleNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	existing := mustCreateRule(t, s, inline("api", "*", "*", 1, time.Second))
	ids := []string{
		uuid.NewString(), "", "nope", "42", "'; DROP TABLE rules; --", existing.ID + "0",
		existing.ID[:35], "\x00", string([]byte{0xff, 0xfe}), strings.Repeat("a", 10000),
	}
	names := []string{"missing", "", "\x00", "'; DROP TABLE plans; --"}
	noRule := func(id string) rules.Rule {
		r := inline("api", "GET /x", "s", 1, time.Second)
		r.ID = id
		return r
	}
	noPlan := func(name string) rules.Plan {
		p := gold()
		p.Name = name
		return p
	}
	for _, tc := range []struct {
		call string
		keys []string // rule ids or plan names
		fn   func(key string) error
	}{
		{"GetRule", ids, func(id string) error { _, err := s.GetRule(ctx, id); return err }},
		{"UpdateRule", ids, func(id string) error { _, err := s.UpdateRule(ctx, noRule(id), 1, actor); return err }},
		{"DeleteRule", ids, func(id string) error { return s.DeleteRule(ctx, id, 0, actor) }},
		{"RuleHistory", ids, func(id string) error { _, err := s.RuleHistory(ctx, id); return err }},
		{"GetPlan", names, func(name string) error { _, err := s.GetPlan(ctx, name); return err }},
		{"UpdatePlan", names, func(name string) error { _, err := s.UpdatePlan(ctx, noPlan(name), 1, actor); return err }},
		{"DeletePlan", names, func(name string) error { return s.DeletePlan(ctx, name, 0, actor) }},
		{"PlanHistory", names, func(name string) error { _, err := s.PlanHistory(ctx, name); return err }},
	} {
		for _, key := range tc.keys {
			if err := tc.fn(key); !errors.Is(err, rules.ErrNotFound) {
				t.Errorf("%s(%q) error = %v, want ErrNotFound", tc.call, key, err)
			}
		}
	}
}

func testRuleScopeConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := mustCreateRule(t, s, inline("api", "GET /orders", "key", 10, time.Minute))
	// Same scope, other numbers.
	_, err := s.CreateRule(ctx, inline("api", "GET /orders", "key", 99, time.Hour), actor)
	if !errors.Is(err, rules.ErrConflict) {
		t.Fatalf("CreateRule(same scope) error = %v, want ErrConflict", err)
	}
	// The subject is often an API key and the error reaches logs: it names
	// the api and route, never the subject.
	if strings.Contains(err.Error(), "key") {
		t.Errorf("CreateRule(same scope) error = %q quotes the subject", err)
	}
	for _, part := range []string{a.ID, `"api"`, `"GET /orders"`} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("CreateRule(same scope) error = %q, want it to name the holder and the scope part %s", err, part)
		}
	}
	// The error names the rule in the way, for the 409 to show.
	wantTaken := &store.ScopeTakenError{ID: a.ID, API: "api", Route: "GET /orders", Kind: rules.Rate}
	var taken *store.ScopeTakenError
	if !errors.As(err, &taken) || !cmp.Equal(taken, wantTaken) {
		t.Errorf("CreateRule(same scope) error = %#v, want %#v", err, wantTaken)
	}
	// Scopes differing in one part are distinct.
	b := mustCreateRule(t, s, inline("api", "GET /orders", "other", 10, time.Minute))
	mustCreateRule(t, s, inline("api", "POST /orders", "key", 10, time.Minute))
	mustCreateRule(t, s, inline("*", "GET /orders", "key", 10, time.Minute))

	// Moving b onto a's scope conflicts and changes nothing.
	moved := b
	moved.Subject = "key"
	_, err = s.UpdateRule(ctx, moved, b.Version, actor)
	if !errors.As(err, &taken) || !cmp.Equal(taken, wantTaken) {
		t.Errorf("UpdateRule(onto a taken scope) error = %v, want a ScopeTakenError %+v", err, wantTaken)
	}
	if got, _ := s.GetRule(ctx, b.ID); !cmp.Equal(got, b) {
		t.Errorf("GetRule() after a refused update = %+v, want unchanged %+v", got, b)
	}
	// Keeping its own scope is no conflict.
	same := a
	same.Limit = new(int64(11))
	if _, err := s.UpdateRule(ctx, same, a.Version, actor); err != nil {
		t.Errorf("UpdateRule(own scope) error = %v, want nil", err)
	}
	// After a delete the scope is free.
	if err := s.DeleteRule(ctx, a.ID, 0, actor); err != nil {
		t.Fatalf("DeleteRule() error = %v", err)
	}
	mustCreateRule(t, s, inline("api", "GET /orders", "key", 10, time.Minute))
}

// testQuotaScopes: a rate rule and a quota rule claim one scope; two quotas
// cannot; a rule's kind moves its scope.
func testQuotaScopes(t *testing.T, s store.Store) {
	ctx := t.Context()
	rate := mustCreateRule(t, s, inline("api", "*", "key", 10, time.Second))
	q := inline("api", "*", "key", 100_000, 0)
	q.Kind, q.Period, q.Anchor = rules.Quota, rules.Month, "2026-01-31T00:00:00+02:00"
	quota := mustCreateRule(t, s, q)
	if quota.Anchor != "2026-01-30T22:00:00Z" {
		t.Errorf("CreateRule(quota).Anchor = %q, want it in UTC %q", quota.Anchor, "2026-01-30T22:00:00Z")
	}
	if _, err := s.CreateRule(ctx, q, actor); !errors.Is(err, rules.ErrConflict) || !strings.Contains(err.Error(), "quota") {
		t.Errorf("CreateRule(a second quota on the scope) error = %v, want ErrConflict naming the kind", err)
	}
	// The rate rule cannot become a second quota on the scope.
	moved := rate
	moved.Kind, moved.Period = rules.Quota, rules.Period(rules.Day)
	if _, err := s.UpdateRule(ctx, moved, rate.Version, actor); !errors.Is(err, rules.ErrConflict) {
		t.Errorf("UpdateRule(rate to quota on a held scope) error = %v, want ErrConflict", err)
	}
	// A quota's upgrade keeps its kind, anchor and floor.
	up := quota
	up.Limit, up.MinRemaining = new(int64(1_000_000)), new(int64(10))
	got, err := s.UpdateRule(ctx, up, quota.Version, actor)
	if err != nil {
		t.Fatalf("UpdateRule(quota upgrade) error = %v", err)
	}
	if got.Kind != rules.Quota || got.Anchor != quota.Anchor || *got.Limit != 1_000_000 || *got.MinRemaining != 10 {
		t.Errorf("UpdateRule(quota upgrade) = %+v, want kind quota, anchor %s, limit 1000000, min_remaining 10", got, quota.Anchor)
	}
	hist, err := s.RuleHistory(ctx, quota.ID)
	if err != nil || len(hist) != 2 {
		t.Fatalf("RuleHistory(quota) = %d entries, %v; want 2", len(hist), err)
	}
	if after := image[rules.Rule](t, hist[1].After); after == nil || after.Kind != rules.Quota || after.Anchor != quota.Anchor || after.Period != rules.Month {
		t.Errorf("RuleHistory(quota)[1].After = %+v, want the quota's kind, anchor and 1mo", after)
	}
	if rs := mustLoad(t, s).Rules; len(rs) != 2 {
		t.Fatalf("LoadAll() = %d rules, want 2", len(rs))
	}
}

// testConcurrencyScopes: a concurrency rule stacks on the rate and quota
// rules of its scope, keeps its kind and TTL, and may name a concurrency
// plan.
func testConcurrencyScopes(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateRule(t, s, inline("api", "POST /exports", "*", 10, time.Second))
	c := inline("api", "POST /exports", "*", 5, 15*time.Minute)
	c.Kind = rules.Concurrency
	got := mustCreateRule(t, s, c)
	if got.Kind != rules.Concurrency || got.Period != rules.Period(15*time.Minute) || *got.Limit != 5 {
		t.Errorf("CreateRule(concurrency) = %+v", got)
	}
	if _, err := s.CreateRule(ctx, c, actor); !errors.Is(err, rules.ErrConflict) {
		t.Errorf("a second concurrency rule on the scope: %v, want ErrConflict", err)
	}
	mustCreatePlan(t, s, rules.Plan{Name: "exports", Kind: rules.Concurrency, Limit: 3, Period: rules.Period(time.Hour)})
	onPlan := rules.Rule{API: "api", Route: "*", Subject: "acme", Kind: rules.Concurrency, Plan: "exports"}
	if r := mustCreateRule(t, s, onPlan); r.Kind != rules.Concurrency || r.Plan != "exports" {
		t.Errorf("CreateRule(on a concurrency plan) = %+v", r)
	}
	onPlan.Subject, onPlan.Kind = "other", rules.Rate
	if _, err := s.CreateRule(ctx, onPlan, actor); fieldOf(err) != "kind" {
		t.Errorf("a rate rule naming a concurrency plan: %v, want a ValidationError on kind", err)
	}
	if rs := mustLoad(t, s).Rules; len(rs) != 3 {
		t.Errorf("LoadAll() = %d rules, want 3", len(rs))
	}
}

// testQuotaPlans: a plan may be a quota; a rule naming it must be one; a
// plan cannot change kind under its rules.
func testQuotaPlans(t *testing.T, s store.Store) {
	ctx := t.Context()
	monthly := mustCreatePlan(t, s, rules.Plan{Name: "gold-monthly", Kind: rules.Quota, Limit: 100_000, Period: rules.Month})
	if monthly.Kind != rules.Quota || monthly.Period != rules.Month {
		t.Errorf("CreatePlan(quota) = %+v, want kind quota, period 1mo", monthly)
	}
	r := rules.Rule{API: "api", Route: "*", Subject: "key", Plan: "gold-monthly"}
	if _, err := s.CreateRule(ctx, r, actor); fieldOf(err) != "kind" {
		t.Errorf("CreateRule(a rate rule naming a quota plan) error = %v, want a ValidationError on kind", err)
	}
	r.Kind, r.Anchor = rules.Quota, "2026-03-15T00:00:00Z"
	got := mustCreateRule(t, s, r)
	if got.Kind != rules.Quota || got.Anchor != r.Anchor {
		t.Errorf("CreateRule(quota naming a quota plan) = %+v", got)
	}
	asRate := monthly
	asRate.Kind, asRate.Period = rules.Rate, rules.Period(time.Hour)
	if _, err := s.UpdatePlan(ctx, asRate, 0, actor); !errors.Is(err, rules.ErrConflict) {
		t.Errorf("UpdatePlan(quota to rate under a quota rule) error = %v, want ErrConflict", err)
	}
	if ps := mustLoad(t, s).Plans; len(ps) != 1 || ps[0].Kind != rules.Quota {
		t.Errorf("LoadAll() plans = %+v, want the quota plan", ps)
	}
}

func testRuleStale(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := mustCreateRule(t, s, inline("api", "*", "key", 10, time.Minute))
	upd := r
	upd.Limit = new(int64(20))
	for _, v := range []int64{2, 5, -1} {
		if _, err := s.UpdateRule(ctx, upd, v, actor); !errors.Is(err, rules.ErrStale) {
			t.Errorf("UpdateRule(version %d of 1) error = %v, want ErrStale", v, err)
		}
		if err := s.DeleteRule(ctx, r.ID, v, actor); !errors.Is(err, rules.ErrStale) {
			t.Errorf("DeleteRule(version %d of 1) error = %v, want ErrStale", v, err)
		}
	}
	if got, err := s.GetRule(ctx, r.ID); err != nil || !cmp.Equal(got, r) {
		t.Errorf("GetRule() after stale writes = %+v, %v; want unchanged", got, err)
	}
	v2, err := s.UpdateRule(ctx, upd, 1, actor)
	if err != nil {
		t.Fatalf("UpdateRule(version 1) error = %v", err)
	}
	if _, err := s.UpdateRule(ctx, upd, 1, actor); !errors.Is(err, rules.ErrStale) {
		t.Errorf("UpdateRule(version 1 again) error = %v, want ErrStale", err)
	}
	// Version 0 is unconditional.
	upd.Limit = new(int64(30))
	v3, err := s.UpdateRule(ctx, upd, 0, actor)
	if err != nil || v3.Version != v2.Version+1 {
		t.Errorf("UpdateRule(version 0) = version %d, %v; want %d, nil", v3.Version, err, v2.Version+1)
	}
	if err := s.DeleteRule(ctx, r.ID, v2.Version, actor); !errors.Is(err, rules.ErrStale) {
		t.Errorf("DeleteRule(old version) error = %v, want ErrStale", err)
	}
	if err := s.DeleteRule(ctx, r.ID, v3.Version, actor); err != nil {
		t.Errorf("DeleteRule(current version) error = %v, want nil", err)
	}
}

// image decodes an audit image of a rules.Rule or rules.Plan; null is nil.
func image[T any](t *testing.T, raw json.RawMessage) *T {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("audit image %s does not decode: %v", raw, err)
	}
	return v
}

// entry is what the audit tests compare of an AuditEntry of a T (a
// rules.Rule or rules.Plan), its images decoded.
type entry[T any] struct {
	Kind, Target, Action, Actor string
	Before, After               *T
}

// checkHistory checks hist, the audit entries call returned for the rule
// or plan target: its create (as created) by "creator", its update (to
// updated) by "updater" and its delete by "deleter", in that order, in
// ascending ids, each at a time from start to now.
func checkHistory[T any](t *testing.T, call string, hist []rules.AuditEntry, start time.Time, kind, target string, created, updated T) {
	t.Helper()
	var got []entry[T]
	for i, e := range hist {
		if e.At.Before(start) || e.At.After(time.Now().Add(time.Second)) {
			t.Errorf("%s[%d].At = %v, want now", call, i, e.At)
		}
		if i > 0 && e.ID <= hist[i-1].ID {
			t.Errorf("%s ids %d then %d, want ascending", call, hist[i-1].ID, e.ID)
		}
		got = append(got, entry[T]{e.Kind, e.TargetID, e.Action, e.Actor, image[T](t, e.Before), image[T](t, e.After)})
	}
	want := []entry[T]{
		{kind, target, rules.ActionCreate, "creator", nil, &created},
		{kind, target, rules.ActionUpdate, "updater", &created, &updated},
		{kind, target, rules.ActionDelete, "deleter", &updated, nil},
	}
	if diff := cmp.Diff(want, got, eqTime); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", call, diff)
	}
}

// eqTime compares instants: JSON keeps the instant, not the location.
var eqTime = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

func testRuleAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	start := time.Now().Add(-time.Second)
	created, err := s.CreateRule(ctx, inline("api", "*", "key", 10, time.Minute), "creator")
	if err != nil {
		t.Fatal(err)
	}
	upd := created
	upd.Limit = new(int64(20))
	updated, err := s.UpdateRule(ctx, upd, 1, "updater")
	if err != nil {
		t.Fatal(err)
	}
	// Failed writes leave no audit row.
	if _, err := s.UpdateRule(ctx, upd, 1, "loser"); !errors.Is(err, rules.ErrStale) {
		t.Fatalf("UpdateRule(stale) error = %v, want ErrStale", err)
	}
	if _, err := s.CreateRule(ctx, inline("api", "*", "key", 1, time.Second), "loser"); !errors.Is(err, rules.ErrConflict) {
		t.Fatalf("CreateRule(dup) error = %v, want ErrConflict", err)
	}
	if err := s.DeleteRule(ctx, created.ID, 2, "deleter"); err != nil {
		t.Fatal(err)
	}
	other := mustCreateRule(t, s, inline("api", "*", "other", 10, time.Minute))

	hist, err := s.RuleHistory(ctx, created.ID)
	if err != nil {
		t.Fatalf("RuleHistory() error = %v", err)
	}
	checkHistory(t, "RuleHistory()", hist, start, rules.KindRule, created.ID, created, updated)
	if !hist[1].At.Equal(updated.UpdatedAt) {
		t.Errorf("RuleHistory()[1].At = %v, want the update's UpdatedAt %v", hist[1].At, updated.UpdatedAt)
	}
	oh, err := s.RuleHistory(ctx, other.ID)
	if err != nil || len(oh) != 1 || oh[0].Action != rules.ActionCreate {
		t.Errorf("RuleHistory(other) = %+v, %v; want its create only", oh, err)
	}
}

func testRuleLastLineOfDefence(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreatePlan(t, s, gold())
	base := inline("api", "*", "key", 10, time.Minute)
	tests := []struct {
		name  string
		edit  func(r *rules.Rule)
		field string
	}{
		{"plan and inline numbers", func(r *rules.Rule) { r.Plan = "gold" }, "plan"},
		{"neither plan nor numbers", func(r *rules.Rule) { r.Limit, r.Period = nil, 0 }, "plan"},
		{"negative limit", func(r *rules.Rule) { r.Limit = new(int64(-1)) }, "limit"},
		{"period below 1s", func(r *rules.Rule) { r.Period = rules.Period(time.Millisecond) }, "period"},
		{"fractional period", func(r *rules.Rule) { r.Period = rules.Period(1500 * time.Millisecond) }, "period"},
		{"period above 1y", func(r *rules.Rule) { r.Period = rules.MaxPeriod + rules.Period(time.Second) }, "period"},
		{"zero cost", func(r *rules.Rule) { r.Cost = new(int64(0)) }, "cost"},
		{"bad failure mode", func(r *rules.Rule) { r.FailureMode = "sideways" }, "failure_mode"},
		{"bad mode", func(r *rules.Rule) { r.Mode = "loud" }, "mode"},
		{"NUL in subject", func(r *rules.Rule) { r.Subject = "a\x00b" }, "subject"},
		{"invalid UTF-8 in description", func(r *rules.Rule) { r.Description = "\xff" }, "description"},
		{"long description", func(r *rules.Rule) { r.Description = strings.Repeat("x", rules.MaxDescriptionLen+1) }, "description"},
		{"long api", func(r *rules.Rule) { r.API = strings.Repeat("x", rules.MaxAPILen+1) }, "api"},
		{"bad kind", func(r *rules.Rule) { r.Kind = "bucket" }, "kind"},
		{"anchor on a rate rule", func(r *rules.Rule) { r.Anchor = "2026-01-01T00:00:00Z" }, "anchor"},
		{"anchor before 1970", func(r *rules.Rule) {
			r.Kind, r.Period, r.Anchor = rules.Quota, rules.Period(rules.Day), "1969-12-31T00:00:00Z"
		}, "anchor"},
		{"negative min_remaining", func(r *rules.Rule) { r.MinRemaining = new(int64(-1)) }, "min_remaining"},
		{"quota of 1m", func(r *rules.Rule) { r.Kind = rules.Quota }, "period"},
		{"quota with a burst", func(r *rules.Rule) { r.Kind, r.Period, r.Burst = rules.Quota, rules.Period(rules.Day), new(int64(20)) }, "period"},
		{"global shadow", func(r *rules.Rule) { r.Global, r.Mode = true, rules.Shadow }, "global"},
		{"global with min_remaining", func(r *rules.Rule) { r.Global, r.MinRemaining = true, new(int64(1)) }, "global"},
		{"global durable", func(r *rules.Rule) {
			r.Global, r.Kind, r.Period, r.Durable = true, rules.Quota, rules.Period(rules.Day), true
		}, "global"},
		{"global rate of 1s", func(r *rules.Rule) { r.Global, r.Period = true, rules.Period(time.Second) }, "period"},
		{"concurrency with a burst", func(r *rules.Rule) { r.Kind, r.Burst = rules.Concurrency, new(int64(20)) }, "period"},
		{"concurrency TTL of 2d", func(r *rules.Rule) { r.Kind, r.Period = rules.Concurrency, rules.Period(2*rules.Day) }, "period"},
		{"global concurrency", func(r *rules.Rule) { r.Kind, r.Global = rules.Concurrency, true }, "global"},
	}
	for _, tc := range tests {
		r := base
		tc.edit(&r)
		if _, err := s.CreateRule(ctx, r, actor); fieldOf(err) != tc.field {
			t.Errorf("CreateRule(%s) error = %v, want a ValidationError on %q", tc.name, err, tc.field)
		}
	}
	if rs := mustLoad(t, s).Rules; len(rs) != 0 {
		t.Errorf("LoadAll() after refused creates = %d rules, want none", len(rs))
	}
	for _, tc := range []struct {
		name  string
		p     rules.Plan
		field string
	}{
		{"bad name", rules.Plan{Name: "Gold!", Limit: 1, Period: rules.Period(time.Second)}, "name"},
		{"bad kind", rules.Plan{Name: "p", Kind: "bucket", Limit: 1, Period: rules.Period(time.Second)}, "kind"},
		{"quota of 1h", rules.Plan{Name: "p", Kind: rules.Quota, Limit: 1, Period: rules.Period(time.Hour)}, "period"},
		{"quota with a burst", rules.Plan{Name: "p", Kind: rules.Quota, Limit: 1, Period: rules.Period(rules.Day), Burst: new(int64(2))}, "period"},
		{"no period", rules.Plan{Name: "p", Limit: 1}, "period"},
		{"negative limit", rules.Plan{Name: "p", Limit: -1, Period: rules.Period(time.Second)}, "limit"},
		{"global rate of 1s", rules.Plan{Name: "p", Limit: 1, Period: rules.Period(time.Second), Global: true}, "period"},
	} {
		if _, err := s.CreatePlan(ctx, tc.p, actor); fieldOf(err) != tc.field {
			t.Errorf("CreatePlan(%s) error = %v, want a ValidationError on %q", tc.name, err, tc.field)
		}
	}
}

func testPlanCRUD(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := gold()
	created := mustCreatePlan(t, s, in)
	if created.Version != 1 || created.CreatedAt.IsZero() || !created.UpdatedAt.Equal(created.CreatedAt) {
		t.Errorf("CreatePlan() version, times = %d, %v, %v; want 1, now, equal", created.Version, created.CreatedAt, created.UpdatedAt)
	}
	if diff := cmp.Diff(in, created, ignoreStoreFields); diff != "" {
		t.Errorf("CreatePlan() mismatch (-want +got):\n%s", diff)
	}
	if got, err := s.GetPlan(ctx, "gold"); err != nil || !cmp.Equal(got, created) {
		t.Errorf("GetPlan(gold) = %+v, %v; want %+v", got, err, created)
	}
	if _, err := s.CreatePlan(ctx, in, actor); !errors.Is(err, rules.ErrConflict) || !strings.Contains(err.Error(), `"gold"`) {
		t.Errorf("CreatePlan(gold again) error = %v, want ErrConflict naming the plan", err)
	}
	upd := created
	upd.Limit, upd.Burst, upd.Description = 5000, nil, "bigger"
	if _, err := s.UpdatePlan(ctx, upd, 7, actor); !errors.Is(err, rules.ErrStale) {
		t.Errorf("UpdatePlan(version 7 of 1) error = %v, want ErrStale", err)
	}
	updated, err := s.UpdatePlan(ctx, upd, 1, actor)
	if err != nil {
		t.Fatalf("UpdatePlan() error = %v", err)
	}
	if updated.Version != 2 || !updated.CreatedAt.Equal(created.CreatedAt) {
		t.Errorf("UpdatePlan() version, created = %d, %v; want 2, %v", updated.Version, updated.CreatedAt, created.CreatedAt)
	}
	if diff := cmp.Diff(upd, updated, ignoreStoreFields); diff != "" {
		t.Errorf("UpdatePlan() mismatch (-want +got):\n%s", diff)
	}
	mustCreatePlan(t, s, rules.Plan{Name: "bronze", Limit: 10, Period: rules.Period(time.Hour)})
	mustCreatePlan(t, s, rules.Plan{Name: "silver", Limit: 100, Period: rules.Period(24 * time.Hour)})
	ps, err := s.ListPlans(ctx)
	if err != nil {
		t.Fatalf("ListPlans() error = %v", err)
	}
	names := pluck(ps, func(p rules.Plan) string { return p.Name })
	if diff := cmp.Diff([]string{"bronze", "gold", "silver"}, names); diff != "" {
		t.Errorf("ListPlans() names mismatch (-want +got):\n%s", diff)
	}
	if err := s.DeletePlan(ctx, "gold", 1, actor); !errors.Is(err, rules.ErrStale) {
		t.Errorf("DeletePlan(gold, version 1 of 2) error = %v, want ErrStale", err)
	}
	if err := s.DeletePlan(ctx, "gold", 2, actor); err != nil {
		t.Errorf("DeletePlan(gold, 2) error = %v", err)
	}
	if err := s.DeletePlan(ctx, "bronze", 0, actor); err != nil {
		t.Errorf("DeletePlan(bronze, 0) error = %v", err)
	}
	if _, err := s.GetPlan(ctx, "gold"); !errors.Is(err, rules.ErrNotFound) {
		t.Errorf("GetPlan(gold) after delete error = %v, want ErrNotFound", err)
	}
	if ps, _ := s.ListPlans(ctx); len(ps) != 1 || ps[0].Name != "silver" {
		t.Errorf("ListPlans() after deletes = %+v, want silver only", ps)
	}
}

func testPlanAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	start := time.Now().Add(-time.Second)
	created, err := s.CreatePlan(ctx, gold(), "creator")
	if err != nil {
		t.Fatal(err)
	}
	upd := created
	upd.Limit = 1
	updated, err := s.UpdatePlan(ctx, upd, 1, "updater")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePlan(ctx, "gold", 2, "deleter"); err != nil {
		t.Fatal(err)
	}
	hist, err := s.PlanHistory(ctx, "gold")
	if err != nil {
		t.Fatalf("PlanHistory() error = %v", err)
	}
	checkHistory(t, "PlanHistory()", hist, start, rules.KindPlan, "gold", created, updated)
}

func testPlanForeignKey(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := rules.Rule{API: "api", Route: "*", Subject: "key", Plan: "gold"}
	_, err := s.CreateRule(ctx, r, actor)
	checkFields(t, "CreateRule(unknown plan)", err, []rules.FieldError{{Field: "plan", Reason: `unknown plan "gold"`}})
	mustCreatePlan(t, s, gold())
	created := mustCreateRule(t, s, r)
	if created.Plan != "gold" || created.Limit != nil || created.Period != 0 {
		t.Errorf("CreateRule(plan) = plan %q limit %v period %v; want gold, nil, 0", created.Plan, created.Limit, created.Period)
	}
	// Switching to an unknown plan is refused; a known one is an upgrade.
	upd := created
	upd.Plan = "platinum"
	if _, err := s.UpdateRule(ctx, upd, 1, actor); fieldOf(err) != "plan" {
		t.Errorf("UpdateRule(unknown plan) error = %v, want a ValidationError on plan", err)
	}
	mustCreatePlan(t, s, rules.Plan{Name: "platinum", Limit: 10000, Period: rules.Period(time.Minute)})
	if got, err := s.UpdateRule(ctx, upd, 1, actor); err != nil || got.Plan != "platinum" {
		t.Errorf("UpdateRule(platinum) = %q, %v; want platinum", got.Plan, err)
	}
	// From a plan back to inline numbers.
	back := inline("api", "*", "key", 7, time.Second)
	back.ID = created.ID
	if got, err := s.UpdateRule(ctx, back, 2, actor); err != nil || got.Plan != "" || *got.Limit != 7 {
		t.Errorf("UpdateRule(inline) = %+v, %v; want inline numbers", got, err)
	}
}

func testPlanInUse(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreatePlan(t, s, gold())
	r := mustCreateRule(t, s, rules.Rule{API: "api", Route: "*", Subject: "key", Plan: "gold"})
	err := s.DeletePlan(ctx, "gold", 0, actor)
	var inUse *store.PlanInUseError
	if !errors.Is(err, rules.ErrConflict) || !errors.As(err, &inUse) {
		t.Fatalf("DeletePlan(in use) error = %v, want a PlanInUseError (ErrConflict)", err)
	}
	if want := (&store.PlanInUseError{Plan: "gold", Count: 1, Rules: []string{r.ID}}); !cmp.Equal(inUse, want) {
		t.Errorf("DeletePlan(in use) error = %+v, want %+v", inUse, want)
	}
	// Many rules: the count, and the first store.MaxListed by id.
	var named []string
	for i := range store.MaxListed + 2 {
		named = append(named, mustCreateRule(t, s, rules.Rule{API: "api", Route: "*", Subject: fmt.Sprintf("k%d", i), Plan: "gold"}).ID)
	}
	named = append(named, r.ID)
	slices.Sort(named)
	err = s.DeletePlan(ctx, "gold", 0, actor)
	if want := (&store.PlanInUseError{Plan: "gold", Count: len(named), Rules: named[:store.MaxListed]}); !errors.As(err, &inUse) || !cmp.Equal(inUse, want) {
		t.Errorf("DeletePlan(in use by %d) error = %v, want %+v", len(named), err, want)
	}
	for _, id := range named {
		if id != r.ID {
			if err := s.DeleteRule(ctx, id, 0, actor); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.GetPlan(ctx, "gold"); err != nil {
		t.Errorf("GetPlan() after a refused delete error = %v", err)
	}
	if hist, _ := s.PlanHistory(ctx, "gold"); len(hist) != 1 {
		t.Errorf("PlanHistory() after a refused delete has %d entries, want 1", len(hist))
	}
	if err := s.DeleteRule(ctx, r.ID, 0, actor); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePlan(ctx, "gold", 0, actor); err != nil {
		t.Errorf("DeletePlan(unused) error = %v, want nil", err)
	}
}

func testPlanUpdateRelimits(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreatePlan(t, s, gold())
	r := mustCreateRule(t, s, rules.Rule{API: "api", Route: "*", Subject: "key", Plan: "gold"})
	p, _ := s.GetPlan(ctx, "gold")
	p.Limit = 3000
	if _, err := s.UpdatePlan(ctx, p, p.Version, actor); err != nil {
		t.Fatal(err)
	}
	set := mustLoad(t, s)
	if rs := set.Rules; len(rs) != 1 || !cmp.Equal(rs[0], r) {
		t.Errorf("LoadAll() rules = %+v, want the rule unchanged %+v", rs, r)
	}
	if ps := set.Plans; len(ps) != 1 || ps[0].Limit != 3000 || ps[0].Version != 2 {
		t.Errorf("LoadAll() plans = %+v, want gold at 3000, version 2", ps)
	}
}

// small is a plan whose burst (5) is below the costs the tests below try.
func small() rules.Plan {
	return rules.Plan{Name: "small", Limit: 1, Period: rules.Period(time.Second), Burst: new(int64(5))}
}

// testRuleFitsPlan: a rule naming a plan must fit its numbers, on create
// and on update; nothing is written otherwise.
func testRuleFitsPlan(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreatePlan(t, s, small())
	mustCreatePlan(t, s, rules.Plan{Name: "yearly", Limit: 1, Period: rules.Period(rules.Year), Burst: new(int64(10))})
	onPlan := func(plan string, cost int64) rules.Rule {
		return rules.Rule{API: "api", Route: "*", Subject: "key", Plan: plan, Cost: new(cost)}
	}
	want := []rules.FieldError{{Field: "cost", Reason: `must be at most the burst (5) of plan "small", or no request could pass`}}
	_, err := s.CreateRule(ctx, onPlan("small", 6), actor)
	checkFields(t, "CreateRule(cost 6 on burst 5)", err, want)
	if set, _ := s.LoadAll(ctx); len(set.Rules) != 0 {
		t.Errorf("LoadAll() after a refused create = %d rules, want none", len(set.Rules))
	}
	r := mustCreateRule(t, s, onPlan("small", 5))
	if _, err := s.CreateRule(ctx, rules.Rule{API: "api", Route: "GET /x", Subject: "key", Plan: "yearly", Cost: new(int64(10))}, actor); err != nil {
		t.Errorf("CreateRule(cost 10 on 1/1y burst 10: the horizon exactly) error = %v, want nil", err)
	}

	upd := r
	upd.Cost = new(int64(6))
	if _, err := s.UpdateRule(ctx, upd, r.Version, actor); fieldOf(err) != "cost" {
		t.Errorf("UpdateRule(cost 6 on burst 5) error = %v, want a ValidationError on cost", err)
	}
	upd = r
	upd.Route = "GET /y"
	upd.Plan, upd.Cost = "yearly", new(int64(5))
	if _, err := s.UpdateRule(ctx, upd, r.Version, actor); err != nil {
		t.Errorf("UpdateRule(move to yearly, cost 5) error = %v, want nil", err)
	}
	if got, _ := s.GetRule(ctx, r.ID); got.Version != 2 || got.Plan != "yearly" {
		t.Errorf("GetRule() = version %d plan %q, want 2, yearly: only the valid update applied", got.Version, got.Plan)
	}
}

// testPlanUpdateKeepsRulesInBounds: a plan update that would leave a rule
// naming it out of bounds (its cost above the new burst) is a conflict
// that names the rule, disabled rules included, and writes nothing.
func testPlanUpdateKeepsRulesInBounds(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustCreatePlan(t, s, rules.Plan{Name: "tier", Limit: 10, Period: rules.Period(time.Minute), Burst: new(int64(2000))})
	on := mustCreateRule(t, s, rules.Rule{API: "api", Route: "*", Subject: "key", Plan: "tier", Cost: new(int64(50))})
	off := mustCreateRule(t, s, rules.Rule{API: "api", Route: "GET /x", Subject: "key", Plan: "tier", Cost: new(int64(80)), Enabled: new(false)})
	mustCreateRule(t, s, rules.Rule{API: "api", Route: "GET /y", Subject: "key", Plan: "tier"})

	lower := p
	lower.Burst = new(int64(60)) // on fits (50), off (80) does not
	_, err := s.UpdatePlan(ctx, lower, p.Version, actor)
	var pc *rules.PlanConflictError
	if !errors.Is(err, rules.ErrConflict) || !errors.As(err, &pc) {
		t.Fatalf("UpdatePlan(burst 60) error = %v, want a *PlanConflictError (ErrConflict)", err)
	}
	want := &rules.PlanConflictError{Plan: "tier", Rules: []rules.BrokenRule{
		{ID: off.ID, Reason: `cost: must be at most the burst (60) of plan "tier", or no request could pass`},
	}}
	if diff := cmp.Diff(want, pc); diff != "" {
		t.Errorf("UpdatePlan(burst 60) conflict mismatch (-want +got):\n%s", diff)
	}

	lower.Burst, lower.Limit = nil, 40 // burst = limit 40: both break, in id order
	err = func() error { _, err := s.UpdatePlan(ctx, lower, p.Version, actor); return err }()
	if !errors.As(err, &pc) || len(pc.Rules) != 2 {
		t.Fatalf("UpdatePlan(limit 40) error = %v, want a conflict naming 2 rules", err)
	}
	if ids := []string{pc.Rules[0].ID, pc.Rules[1].ID}; !slices.IsSorted(ids) || !slices.Contains(ids, on.ID) || !slices.Contains(ids, off.ID) {
		t.Errorf("UpdatePlan(limit 40) conflict names %v, want %s and %s in id order", ids, on.ID, off.ID)
	}
	if got, _ := s.GetPlan(ctx, "tier"); got.Version != 1 || *got.Burst != 2000 {
		t.Errorf("GetPlan() after refused updates = version %d burst %d, want 1, 2000", got.Version, *got.Burst)
	}
	if hist, _ := s.PlanHistory(ctx, "tier"); len(hist) != 1 {
		t.Errorf("PlanHistory() after refused updates has %d entries, want 1", len(hist))
	}

	fits := p
	fits.Burst = new(int64(80))
	if _, err := s.UpdatePlan(ctx, fits, p.Version, actor); err != nil {
		t.Errorf("UpdatePlan(burst 80, every cost fits) error = %v, want nil", err)
	}
}

// testConcurrentPlanAndRuleWrites races plan updates that lower the burst
// against rule writes that raise a cost on that plan: whatever commits,
// no rule ends up with a cost above its plan's burst.
func testConcurrentPlanAndRuleWrites(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreatePlan(t, s, rules.Plan{Name: "race", Limit: 10, Period: rules.Period(time.Second), Burst: new(int64(100))})
	const rounds = 10
	for i := range rounds {
		p, err := s.GetPlan(ctx, "race")
		if err != nil {
			t.Fatal(err)
		}
		p.Burst = new(int64(100))
		if p, err = s.UpdatePlan(ctx, p, 0, actor); err != nil {
			t.Fatalf("round %d: reset the plan: %v", i, err)
		}
		r := mustCreateRule(t, s, rules.Rule{API: "api", Route: "GET /r" + fmt.Sprint(i), Subject: "key", Plan: "race"})
		errs := race(3, func(w int) (err error) {
			switch w {
			case 0: // the plan update
				low := p
				low.Burst = new(int64(20))
				_, err = s.UpdatePlan(ctx, low, p.Version, actor)
			case 1: // the rule update
				up := r
				up.Cost = new(int64(50))
				_, err = s.UpdateRule(ctx, up, r.Version, actor)
			default: // the create
				_, err = s.CreateRule(ctx, rules.Rule{API: "api", Route: "GET /n" + fmt.Sprint(i), Subject: "key", Plan: "race", Cost: new(int64(60))}, actor)
			}
			return err
		})
		for _, err := range errs {
			if err != nil && !errors.Is(err, rules.ErrConflict) && fieldOf(err) != "cost" {
				t.Errorf("round %d: error = %v, want nil, a conflict or a ValidationError on cost", i, err)
			}
		}
		set := mustLoad(t, s)
		rs, ps := set.Rules, set.Plans
		if ps[0].Burst == nil {
			t.Fatalf("round %d: plan %+v has no burst", i, ps[0])
		}
		for _, r := range rs {
			if r.Cost != nil && *r.Cost > *ps[0].Burst {
				t.Errorf("round %d: rule %s costs %d on a plan of burst %d (plan err %v, rule err %v, create err %v)",
					i, r.Route, *r.Cost, *ps[0].Burst, errs[0], errs[1], errs[2])
			}
		}
		// Clean up so the next round starts from burst 100 with no costly rule.
		for _, r := range rs {
			if r.Cost != nil && *r.Cost > 1 {
				if err := s.DeleteRule(ctx, r.ID, 0, actor); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func testLoadAll(t *testing.T, s store.Store) {
	if set := mustLoad(t, s); len(set.Rules) != 0 || len(set.Plans) != 0 {
		t.Errorf("LoadAll(empty) = %d rules, %d plans; want none", len(set.Rules), len(set.Plans))
	}
	mustCreatePlan(t, s, rules.Plan{Name: "zeta", Limit: 1, Period: rules.Period(time.Second)})
	mustCreatePlan(t, s, gold())
	var want []rules.Rule
	for i := range 20 {
		r := inline("api", "*", fmt.Sprintf("key-%d", i), int64(i), time.Minute)
		if i%3 == 0 {
			r.Enabled = new(false)
		}
		if i%5 == 0 {
			r = rules.Rule{API: "api", Route: "*", Subject: fmt.Sprintf("key-%d", i), Plan: "gold"}
		}
		want = append(want, mustCreateRule(t, s, r))
	}
	slices.SortFunc(want, func(a, b rules.Rule) int { return strings.Compare(a.ID, b.ID) })
	set := mustLoad(t, s)
	if diff := cmp.Diff(want, set.Rules); diff != "" {
		t.Errorf("LoadAll() rules mismatch (-want +got):\n%s", diff)
	}
	if ps := set.Plans; len(ps) != 2 || ps[0].Name != "gold" || ps[1].Name != "zeta" {
		t.Errorf("LoadAll() plans = %+v, want gold, zeta", ps)
	}
}

// testLoadAllVersion: every successful write moves the version up, a failed
// one or a read leaves it, and two loads without a write between them agree.
// The version is the time of the write in microseconds (rules.Set), so a
// store made now is newer than a snapshot published an hour ago.
func testLoadAllVersion(t *testing.T, s store.Store) {
	ctx := t.Context()
	version := func() int64 {
		t.Helper()
		return mustLoad(t, s).Version
	}
	v := version()
	if hourAgo := time.Now().Add(-time.Hour).UnixMicro(); v < hourAgo {
		t.Errorf("LoadAll().Version of a new store = %d, want the time in microseconds (> %d)", v, hourAgo)
	}
	if again := version(); again != v {
		t.Errorf("LoadAll().Version = %d then %d without a write, want equal", v, again)
	}
	plan := mustCreatePlan(t, s, gold())
	r := mustCreateRule(t, s, rules.Rule{API: "api", Route: "*", Subject: "k", Plan: plan.Name})
	steps := []struct {
		name  string
		write func() error
		moves bool
	}{
		{"update rule", func() error { r.Description = "moved"; _, err := s.UpdateRule(ctx, r, 0, actor); return err }, true},
		{"stale update", func() error { _, err := s.UpdateRule(ctx, r, 1, actor); return err }, false},
		{"conflicting create", func() error { _, err := s.CreateRule(ctx, inline("api", "*", "k", 1, time.Minute), actor); return err }, false},
		{"reads", func() error {
			_, err := s.GetRule(ctx, r.ID)
			_, err2 := s.ListRules(ctx, rules.Filter{})
			_, err3 := s.RuleHistory(ctx, r.ID)
			return errors.Join(err, err2, err3)
		}, false},
		{"update plan", func() error { plan.Limit = 5; _, err := s.UpdatePlan(ctx, plan, 0, actor); return err }, true},
		{"delete plan in use", func() error { return s.DeletePlan(ctx, plan.Name, 0, actor) }, false},
		{"delete rule", func() error { return s.DeleteRule(ctx, r.ID, 0, actor) }, true},
		{"delete plan", func() error { return s.DeletePlan(ctx, plan.Name, 0, actor) }, true},
	}
	v = version()
	for _, st := range steps {
		err := st.write()
		after := version()
		switch {
		case st.moves && (err != nil || after <= v):
			t.Errorf("%s: error %v, version %d → %d; want success and a larger version", st.name, err, v, after)
		case !st.moves && after != v:
			t.Errorf("%s (error %v): version %d → %d; want it unchanged", st.name, err, v, after)
		}
		v = after
	}
}

// pluck returns f of each x, in order; never nil.
func pluck[T, V any](xs []T, f func(T) V) []V {
	out := []V{}
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

func ids(rs []rules.Rule) []string { return pluck(rs, func(r rules.Rule) string { return r.ID }) }

func testListFilters(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreatePlan(t, s, gold())
	byName := map[string]rules.Rule{}
	add := func(name string, r rules.Rule) { byName[name] = mustCreateRule(t, s, r) }
	add("a-all", inline("a", "*", "*", 1, time.Second))
	add("a-get-k1", inline("a", "GET /x", "k1", 1, time.Second))
	add("a-get-k2", rules.Rule{API: "a", Route: "GET /x", Subject: "k2", Plan: "gold"})
	add("b-get-k1", rules.Rule{API: "b", Route: "GET /x", Subject: "k1", Plan: "gold"})
	add("b-post-k1", inline("b", "POST /x", "k1", 1, time.Second))
	add("star-all", inline("*", "*", "*", 1, time.Second))

	tests := []struct {
		f    rules.Filter
		want []string
	}{
		{rules.Filter{}, []string{"star-all", "a-all", "a-get-k1", "a-get-k2", "b-get-k1", "b-post-k1"}},
		{rules.Filter{API: "a"}, []string{"a-all", "a-get-k1", "a-get-k2"}},
		{rules.Filter{API: "*"}, []string{"star-all"}},
		{rules.Filter{Subject: "k1"}, []string{"a-get-k1", "b-get-k1", "b-post-k1"}},
		{rules.Filter{Route: "GET /x"}, []string{"a-get-k1", "a-get-k2", "b-get-k1"}},
		{rules.Filter{Plan: "gold"}, []string{"a-get-k2", "b-get-k1"}},
		{rules.Filter{API: "b", Subject: "k1", Route: "GET /x"}, []string{"b-get-k1"}},
		{rules.Filter{API: "b", Plan: "gold"}, []string{"b-get-k1"}},
		{rules.Filter{API: "c"}, nil},
		{rules.Filter{Subject: "' OR 1=1 --"}, nil},
	}
	for _, tc := range tests {
		page, err := s.ListRules(ctx, tc.f)
		if err != nil {
			t.Errorf("ListRules(%+v) error = %v", tc.f, err)
			continue
		}
		want := pluck(tc.want, func(n string) string { return byName[n].ID }) // in list order
		if diff := cmp.Diff(want, ids(page.Rules)); diff != "" {
			t.Errorf("ListRules(%+v) ids mismatch (-want +got):\n%s", tc.f, diff)
		}
		if page.NextCursor != "" {
			t.Errorf("ListRules(%+v).NextCursor = %q, want empty on the only page", tc.f, page.NextCursor)
		}
	}
	// Listed rules are whole rules.
	page, err := s.ListRules(ctx, rules.Filter{API: "b", Plan: "gold"})
	if err != nil || len(page.Rules) != 1 {
		t.Fatalf("ListRules(b, gold) = %+v, %v; want one rule", page, err)
	}
	if diff := cmp.Diff(byName["b-get-k1"], page.Rules[0]); diff != "" {
		t.Errorf("ListRules(b, gold) rule mismatch (-want +got):\n%s", diff)
	}
}

// testNoOpUpdates: an update that changes nothing, such as a period of
// "1.5m" on a rule of "90s", keeps the version, writes no audit entry and
// leaves the rules version (LoadAll) where it was.
func testNoOpUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreatePlan(t, s, gold())
	r := mustCreateRule(t, s, inline("api", "GET /x", "*", 10, 90*time.Second))
	before := mustLoad(t, s)
	same := r
	same.Period = rules.Period(1500 * time.Millisecond * 60) // 1.5m
	same.Limit = new(int64(10))                              // another pointer
	same.Route = "get /x/ "                                  // normalized to "GET /x"
	got, err := s.UpdateRule(ctx, same, r.Version, actor)
	if err != nil {
		t.Fatalf("UpdateRule(unchanged) error = %v", err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("UpdateRule(unchanged) = a new rule (-want +got):\n%s", diff)
	}
	if hist, _ := s.RuleHistory(ctx, r.ID); len(hist) != 1 {
		t.Errorf("RuleHistory() after an unchanged update has %d entries, want 1 (the create)", len(hist))
	}
	// A stale version is still refused: the caller did not see this rule.
	if _, err := s.UpdateRule(ctx, same, r.Version+1, actor); !errors.Is(err, rules.ErrStale) {
		t.Errorf("UpdateRule(unchanged, stale) error = %v, want ErrStale", err)
	}

	p, _ := s.GetPlan(ctx, "gold")
	gotPlan, err := s.UpdatePlan(ctx, gold(), p.Version, actor)
	if err != nil || gotPlan.Version != p.Version || !gotPlan.UpdatedAt.Equal(p.UpdatedAt) {
		t.Errorf("UpdatePlan(unchanged) = v%d at %v, %v; want v%d at %v, nil", gotPlan.Version, gotPlan.UpdatedAt, err, p.Version, p.UpdatedAt)
	}
	if hist, _ := s.PlanHistory(ctx, "gold"); len(hist) != 1 {
		t.Errorf("PlanHistory() after an unchanged update has %d entries, want 1", len(hist))
	}
	after, err := s.LoadAll(ctx)
	if err != nil || after.Version != before.Version {
		t.Errorf("LoadAll().Version after unchanged updates = %d, %v; want %d", after.Version, err, before.Version)
	}

	// One change is a write again.
	changed := r
	changed.Description = "now described"
	if got, err := s.UpdateRule(ctx, changed, r.Version, actor); err != nil || got.Version != r.Version+1 {
		t.Errorf("UpdateRule(description) = v%d, %v; want v%d", got.Version, err, r.Version+1)
	}
}

// testListOrder: lists are ordered by api, route, subject and id, byte by
// byte whatever the database's locale, and pages keep that order.
func testListOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	scopes := [][3]string{
		{"shop", "POST /orders", "*"},
		{"shop", "GET /orders", "k2"},
		{"Shop", "*", "*"},
		{"*", "*", "*"},
		{"shop", "GET /orders", "*"},
		{"shop", "GET /orders", "K1"},
		{"admin", "GET /a", "*"},
		{"shop", "*", "z"},
		{"shop_b", "*", "*"},
	}
	for _, sc := range scopes {
		mustCreateRule(t, s, inline(sc[0], sc[1], sc[2], 1, time.Second))
	}
	want := []string{
		"* * *",
		"Shop * *",
		"admin GET /a *",
		"shop * z",
		"shop GET /orders *",
		"shop GET /orders K1",
		"shop GET /orders k2",
		"shop POST /orders *",
		"shop_b * *",
	}
	for _, limit := range []int{100, 1, 2, 4} {
		var got []string
		f := rules.Filter{Limit: limit}
		for range len(scopes) + 1 {
			page, err := s.ListRules(ctx, f)
			if err != nil {
				t.Fatalf("ListRules(%+v) error = %v", f, err)
			}
			got = append(got, pluck(page.Rules, func(r rules.Rule) string { return r.API + " " + r.Route + " " + r.Subject })...)
			if f.Cursor = page.NextCursor; f.Cursor == "" {
				break
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ListRules(limit %d) order mismatch (-want +got):\n%s", limit, diff)
		}
	}
	// A filter keeps the order.
	page, err := s.ListRules(ctx, rules.Filter{API: "shop", Route: "GET /orders"})
	if err != nil {
		t.Fatal(err)
	}
	subjects := pluck(page.Rules, func(r rules.Rule) string { return r.Subject })
	if diff := cmp.Diff([]string{"*", "K1", "k2"}, subjects); diff != "" {
		t.Errorf("ListRules(shop, GET /orders) subjects mismatch (-want +got):\n%s", diff)
	}
}

func testListBadParams(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := mustCreateRule(t, s, inline("a", "*", "*", 1, time.Second))
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		f     rules.Filter
		field string
	}{
		{rules.Filter{Limit: -1}, "limit"},
		{rules.Filter{Limit: 1001}, "limit"},
		{rules.Filter{Cursor: "!!!"}, "cursor"},
		{rules.Filter{Cursor: r.ID}, "cursor"},
		{rules.Filter{Cursor: enc("not a uuid")}, "cursor"},
		{rules.Filter{Cursor: enc("' OR 1=1 --")}, "cursor"},
		{rules.Filter{Cursor: enc("r1:" + r.ID + "x")}, "cursor"},
		{rules.Filter{Cursor: enc("r2:" + r.ID)}, "cursor"},
		{rules.Filter{Cursor: enc("r1:"+r.ID) + "="}, "cursor"},
		{rules.Filter{API: "a\x00"}, "api"},
	}
	for _, tc := range tests {
		if _, err := s.ListRules(ctx, tc.f); fieldOf(err) != tc.field {
			t.Errorf("ListRules(%+v) error = %v, want a ValidationError on %q", tc.f, err, tc.field)
		}
	}
	for _, limit := range []int{1, 1000} {
		if page, err := s.ListRules(ctx, rules.Filter{Limit: limit}); err != nil || len(page.Rules) != 1 {
			t.Errorf("ListRules(limit %d) = %d rules, %v; want 1, nil", limit, len(page.Rules), err)
		}
	}
	// An empty store lists an empty, non-nil page.
	if err := s.DeleteRule(ctx, r.ID, 0, actor); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListRules(ctx, rules.Filter{})
	if err != nil || page.Rules == nil || len(page.Rules) != 0 || page.NextCursor != "" {
		t.Errorf("ListRules(empty store) = %#v, %v; want an empty non-nil page", page, err)
	}
}

func testPagination(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 250
	byAPI := map[string][]string{} // ids by api, in creation order
	for i := range n {
		api := [2]string{"even", "odd"}[i%2]
		byAPI[api] = append(byAPI[api], mustCreateRule(t, s, inline(api, "*", fmt.Sprintf("key-%03d", i), 1, time.Second)).ID)
	}
	// List order: api, then subject here (one route; subjects numbered
	// in creation order): every even key, then every odd one.
	all := slices.Concat(byAPI["even"], byAPI["odd"])

	walk := func(f rules.Filter) (got []string, sizes []int) {
		t.Helper()
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatalf("ListRules(%+v) does not end", f)
			}
			page, err := s.ListRules(ctx, f)
			if err != nil {
				t.Fatalf("ListRules(%+v) error = %v", f, err)
			}
			got = append(got, ids(page.Rules)...)
			sizes = append(sizes, len(page.Rules))
			if page.NextCursor == "" {
				return got, sizes
			}
			f.Cursor = page.NextCursor
		}
	}
	got, sizes := walk(rules.Filter{})
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("ListRules() pages mismatch, a duplicate or a gap (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{100, 100, 50}, sizes); diff != "" {
		t.Errorf("ListRules() page sizes mismatch (-want +got):\n%s", diff)
	}
	// A page that ends exactly at the last rule has no next cursor.
	_, sizes = walk(rules.Filter{Limit: 125})
	if diff := cmp.Diff([]int{125, 125}, sizes); diff != "" {
		t.Errorf("ListRules(limit 125) page sizes mismatch (-want +got):\n%s", diff)
	}
	got, _ = walk(rules.Filter{Limit: 7})
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("ListRules(limit 7) pages mismatch (-want +got):\n%s", diff)
	}
	// Filter and cursor together.
	got, _ = walk(rules.Filter{API: "odd", Limit: 30})
	if diff := cmp.Diff(byAPI["odd"], got); diff != "" {
		t.Errorf("ListRules(api odd, limit 30) pages mismatch (-want +got):\n%s", diff)
	}
	// Deleting the rule a cursor points at does not lose the rest.
	page, err := s.ListRules(ctx, rules.Filter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRule(ctx, page.Rules[9].ID, 0, actor); err != nil {
		t.Fatal(err)
	}
	next, err := s.ListRules(ctx, rules.Filter{Limit: 10, Cursor: page.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all[10:20], ids(next.Rules)); diff != "" {
		t.Errorf("ListRules(after a deleted cursor rule) mismatch (-want +got):\n%s", diff)
	}
}

func testConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := mustCreateRule(t, s, inline("api", "*", "key", 10, time.Minute))
	const writers = 8
	errs := race(writers, func(i int) error {
		upd := r
		upd.Limit = new(int64(100 + i))
		_, err := s.UpdateRule(ctx, upd, 1, fmt.Sprintf("writer-%d", i))
		return err
	})
	if n := wins(t, "UpdateRule", errs, rules.ErrStale); n != 1 {
		t.Errorf("%d concurrent UpdateRule(version 1) succeeded, want exactly 1", n)
	}
	got, _ := s.GetRule(ctx, r.ID)
	if got.Version != 2 {
		t.Errorf("GetRule().Version after the race = %d, want 2", got.Version)
	}
	hist, _ := s.RuleHistory(ctx, r.ID)
	if len(hist) != 2 {
		t.Errorf("RuleHistory() after the race has %d entries, want 2 (create, one update)", len(hist))
	}

	// The same for deletes.
	errs = race(writers, func(int) error { return s.DeleteRule(ctx, r.ID, 2, actor) })
	if n := wins(t, "DeleteRule", errs, rules.ErrNotFound, rules.ErrStale); n != 1 {
		t.Errorf("%d concurrent DeleteRule(version 2) succeeded, want exactly 1", n)
	}
}

// race makes the n calls of call at once, released together, and returns
// their errors by call.
func race(n int, call func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = call(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// wins counts the writers of a race whose call succeeded, and reports
// every error that wraps none of allowed.
func wins(t *testing.T, call string, errs []error, allowed ...error) int {
	t.Helper()
	n := 0
	for i, err := range errs {
		if err == nil {
			n++
		} else if !slices.ContainsFunc(allowed, func(a error) bool { return errors.Is(err, a) }) {
			t.Errorf("%s(writer %d) error = %v, want nil or one of %v", call, i, err, allowed)
		}
	}
	return n
}

func testConcurrentCreates(t *testing.T, s store.Store) {
	ctx := t.Context()
	errs := race(8, func(i int) error {
		_, err := s.CreateRule(ctx, inline("api", "*", "key", int64(i), time.Minute), actor)
		return err
	})
	if n := wins(t, "CreateRule", errs, rules.ErrConflict); n != 1 {
		t.Errorf("%d concurrent CreateRule(same scope) succeeded, want exactly 1", n)
	}
}

// testNoAliasing: rules and plans go in and come out as copies. Writing
// through the pointer fields of a value given to or returned by the store
// changes nothing stored.
func testNoAliasing(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := inline("api", "*", "alias", 10, time.Minute)
	in.Burst, in.Cost, in.Enabled = new(int64(20)), new(int64(2)), new(true)
	created := mustCreateRule(t, s, in)
	scribble := func(r rules.Rule) { *r.Limit, *r.Burst, *r.Cost, *r.Enabled = 1, 1, 1, false }
	// checkRule returns the rule GetRule read: the next to write through.
	checkRule := func(through string) rules.Rule {
		t.Helper()
		got, err := s.GetRule(ctx, created.ID)
		if err != nil {
			t.Fatalf("GetRule() error = %v", err)
		}
		if *got.Limit != 10 || *got.Burst != 20 || *got.Cost != 2 || !*got.Enabled {
			t.Errorf("GetRule() after writing through %s = limit %d, burst %d, cost %d, enabled %t; want 10, 20, 2, true",
				through, *got.Limit, *got.Burst, *got.Cost, *got.Enabled)
		}
		return got
	}
	scribble(in)
	checkRule("the rule given to CreateRule")
	scribble(created)
	scribble(checkRule("the rule CreateRule returned"))
	checkRule("a rule GetRule returned")
	rs := mustLoad(t, s).Rules
	if len(rs) != 1 {
		t.Fatalf("LoadAll() = %d rules, want 1", len(rs))
	}
	scribble(rs[0])
	checkRule("a rule LoadAll returned")
	page, err := s.ListRules(ctx, rules.Filter{})
	if err != nil || len(page.Rules) != 1 {
		t.Fatalf("ListRules() = %d rules, %v; want 1, nil", len(page.Rules), err)
	}
	scribble(page.Rules[0])
	checkRule("a rule ListRules returned")

	pin := gold()
	pc := mustCreatePlan(t, s, pin)
	pg, err := s.GetPlan(ctx, pin.Name)
	if err != nil {
		t.Fatalf("GetPlan() error = %v", err)
	}
	ps, err := s.ListPlans(ctx)
	if err != nil || len(ps) != 1 {
		t.Fatalf("ListPlans() = %d plans, %v; want 1, nil", len(ps), err)
	}
	*pin.Burst, *pc.Burst, *pg.Burst, *ps[0].Burst = 1, 1, 1, 1
	p, err := s.GetPlan(ctx, pin.Name)
	if err != nil || p.Burst == nil || *p.Burst != 2000 {
		t.Errorf("GetPlan() after writing through the plans given and returned = %+v, %v; want burst 2000", p, err)
	}
}

// testMaxRules runs on a store of at most 3 rules: the 4th create fails with
// rules.ErrTooManyRules (not ErrConflict: the rule is fine, the store is
// full), writes nothing, and wins over a scope conflict; updates, plans and
// a create after a delete go on.
func testMaxRules(t *testing.T, s store.Store) {
	ctx := t.Context()
	var made []rules.Rule
	for i := range 3 {
		made = append(made, mustCreateRule(t, s, inline("api", "*", fmt.Sprint("k", i), 1, time.Minute)))
	}
	before := mustLoad(t, s)
	for _, r := range []rules.Rule{
		inline("api", "*", "k3", 1, time.Minute),
		inline("api", "*", "k0", 1, time.Minute), // a taken scope too
	} {
		_, err := s.CreateRule(ctx, r, actor)
		if !errors.Is(err, rules.ErrTooManyRules) || errors.Is(err, rules.ErrConflict) {
			t.Errorf("CreateRule(%s) on a full store: error = %v, want rules.ErrTooManyRules and not ErrConflict", r.Subject, err)
		}
	}
	after := mustLoad(t, s)
	if after.Version != before.Version || len(after.Rules) != 3 {
		t.Errorf("refused creates: %d rules, version %d → %d; want 3 rules and the version unchanged", len(after.Rules), before.Version, after.Version)
	}

	made[0].Limit = new(int64(7))
	if _, err := s.UpdateRule(ctx, made[0], 0, actor); err != nil {
		t.Errorf("UpdateRule on a full store: %v, want success", err)
	}
	mustCreatePlan(t, s, gold())
	if err := s.DeleteRule(ctx, made[1].ID, 0, actor); err != nil {
		t.Fatal(err)
	}
	mustCreateRule(t, s, inline("api", "*", "k3", 1, time.Minute))
}

// testMaxRulesConcurrent: 12 creates at once on a store of at most 5 rules:
// exactly 5 succeed, whatever the interleaving.
func testMaxRulesConcurrent(t *testing.T, s store.Store) {
	errs := race(12, func(i int) error {
		_, err := s.CreateRule(t.Context(), inline("api", "*", fmt.Sprint("c", i), 1, time.Minute), actor)
		return err
	})
	if n := wins(t, "CreateRule", errs, rules.ErrTooManyRules); n != 5 {
		t.Errorf("%d of 12 concurrent creates succeeded on a store of at most 5 rules, want 5", n)
	}
	if rs := mustLoad(t, s).Rules; len(rs) != 5 {
		t.Errorf("LoadAll() after the race = %d rules, want 5", len(rs))
	}
}

// testRuleDimension: a rule's dimension is stored and read back ("default"
// as ""), is part of its scope (an "ip" rule and a default one may share
// api, route and subject; two "ip" ones may not), and moves with updates.
func testRuleDimension(t *testing.T, s store.Store) {
	ctx := t.Context()
	def := mustCreateRule(t, s, inline("api", "*", "*", 100, time.Minute))
	ipr := inline("api", "*", "*", 10, time.Minute)
	ipr.Dimension = "ip"
	ip := mustCreateRule(t, s, ipr)
	if got, _ := s.GetRule(ctx, ip.ID); got.Dimension != "ip" {
		t.Errorf("GetRule(ip rule).Dimension = %q, want ip", got.Dimension)
	}
	if def.Dimension != "" {
		t.Errorf("default rule Dimension = %q, want \"\"", def.Dimension)
	}
	if _, err := s.CreateRule(ctx, ipr, actor); !errors.Is(err, rules.ErrConflict) || !strings.Contains(err.Error(), `"ip"`) {
		t.Errorf("CreateRule(second ip rule on the scope) error = %v, want ErrConflict naming the dimension", err)
	}
	named := inline("api", "GET /x", "*", 1, time.Minute)
	named.Dimension = "default"
	if got := mustCreateRule(t, s, named); got.Dimension != "" {
		t.Errorf("CreateRule(dimension default).Dimension = %q, want \"\"", got.Dimension)
	}
	ip.Dimension = "tenant"
	up, err := s.UpdateRule(ctx, ip, ip.Version, actor)
	if err != nil || up.Dimension != "tenant" {
		t.Errorf("UpdateRule(dimension tenant) = %q, %v", up.Dimension, err)
	}
	bad := inline("api", "GET /y", "*", 1, time.Minute)
	bad.Dimension = "Not Valid!"
	var ve *rules.ValidationError
	if _, err := s.CreateRule(ctx, bad, actor); !errors.As(err, &ve) {
		t.Errorf("CreateRule(dimension %q) error = %v, want a ValidationError", bad.Dimension, err)
	}
	set := mustLoad(t, s)
	dims := map[string]int{}
	for _, r := range set.Rules {
		dims[r.Dimension]++
	}
	if dims["tenant"] != 1 || dims[""] != 2 {
		t.Errorf("LoadAll dimensions = %v, want 2 default and 1 tenant", dims)
	}
	// The scope is (api, route, subject, kind, dimension): a quota of the
	// tenant dimension beside its rate rule and beside the default
	// dimension's quota; a second tenant quota conflicts.
	q := inline("api", "*", "*", 5000, 0)
	q.Kind, q.Period = rules.Quota, rules.Period(rules.Day)
	mustCreateRule(t, s, q)
	q.Dimension = "tenant"
	if got := mustCreateRule(t, s, q); got.Dimension != "tenant" || got.Kind != rules.Quota {
		t.Errorf("CreateRule(tenant quota) = %q %q, want tenant quota", got.Dimension, got.Kind)
	}
	if _, err := s.CreateRule(ctx, q, actor); !errors.Is(err, rules.ErrConflict) {
		t.Errorf("CreateRule(a second tenant quota on the scope) error = %v, want ErrConflict", err)
	}
}

// testApplyBatch: a batch creates, updates and deletes rules and plans of
// its set, stamps the set on each, and moves the rules version once.
func testApplyBatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	b := store.Batch{Set: "platform", Ops: []store.Op{
		{Action: rules.ActionCreate, Plan: new(gold())},
		{Action: rules.ActionCreate, Rule: new(rules.Rule{API: "api", Route: "*", Subject: "*", Plan: "gold"})},
		{Action: rules.ActionCreate, Rule: new(inline("api", "GET /a", "*", 10, time.Minute))},
	}}
	res, err := s.Apply(ctx, b, actor)
	if err != nil {
		t.Fatalf("Apply(create) error = %v", err)
	}
	if len(res) != 3 || res[0].Plan == nil || res[1].Rule == nil || res[2].Rule == nil {
		t.Fatalf("Apply(create) = %+v, want a plan and two rules", res)
	}
	if res[0].Plan.Set != "platform" || res[1].Rule.Set != "platform" || res[1].Rule.Version != 1 {
		t.Errorf("Apply(create) stored set %q, %q (version %d), want platform, platform (1)", res[0].Plan.Set, res[1].Rule.Set, res[1].Rule.Version)
	}
	before := mustLoad(t, s)
	a := *res[2].Rule
	a.Limit = new(int64(20))
	res2, err := s.Apply(ctx, store.Batch{Set: "platform", Ops: []store.Op{
		{Action: rules.ActionUpdate, Rule: &a, IfVersion: 1},
		{Action: rules.ActionDelete, Rule: &rules.Rule{ID: res[1].Rule.ID}, IfVersion: 1},
		{Action: rules.ActionDelete, Plan: &rules.Plan{Name: "gold"}, IfVersion: 1},
	}}, actor)
	if err != nil {
		t.Fatalf("Apply(update, delete) error = %v", err)
	}
	if got := res2[0].Rule; got == nil || *got.Limit != 20 || got.Version != 2 {
		t.Errorf("Apply(update) = %+v, want limit 20 at version 2", got)
	}
	set := mustLoad(t, s)
	if len(set.Rules) != 1 || len(set.Plans) != 0 {
		t.Errorf("after Apply: %d rules, %d plans, want 1 and 0", len(set.Rules), len(set.Plans))
	}
	if set.Version <= before.Version {
		t.Errorf("rules version %d after Apply, want above %d", set.Version, before.Version)
	}
	if _, err := s.Apply(ctx, store.Batch{Set: "platform", Ops: []store.Op{{Action: rules.ActionUpdate, Rule: &a}}}, actor); fieldOf(err) != "ops[0].if_version" {
		t.Errorf("Apply(update without if_version) error = %v, want a ValidationError on ops[0].if_version", err)
	}
}

// testApplyAllOrNothing: a batch whose last op is stale writes nothing,
// and says which op failed.
func testApplyAllOrNothing(t *testing.T, s store.Store) {
	ctx := t.Context()
	res, err := s.Apply(ctx, store.Batch{Set: "platform", Ops: []store.Op{
		{Action: rules.ActionCreate, Rule: new(inline("api", "GET /a", "*", 10, time.Minute))},
	}}, actor)
	if err != nil {
		t.Fatal(err)
	}
	// Another operator changes the rule: it is at version 2 now.
	changed := *res[0].Rule
	changed.Limit = new(int64(11))
	if _, err := s.UpdateRule(ctx, changed, 1, "console"); err != nil {
		t.Fatal(err)
	}
	before := mustLoad(t, s)
	_, err = s.Apply(ctx, store.Batch{Set: "platform", Ops: []store.Op{
		{Action: rules.ActionCreate, Plan: new(gold())},
		{Action: rules.ActionCreate, Rule: new(inline("api", "GET /b", "*", 10, time.Minute))},
		{Action: rules.ActionDelete, Rule: &rules.Rule{ID: changed.ID}, IfVersion: 1},
	}}, actor)
	var be *store.BatchError
	if !errors.Is(err, rules.ErrStale) || !errors.As(err, &be) || be.Index != 2 {
		t.Fatalf("Apply(delete at a stale version) error = %v, want ErrStale in a BatchError at op 2", err)
	}
	after := mustLoad(t, s)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("a failed Apply changed the store (-before +after):\n%s", diff)
	}
}

// testApplyOwnership: a batch never updates or deletes what another set,
// or no set, owns.
func testApplyOwnership(t *testing.T, s store.Store) {
	ctx := t.Context()
	mine := mustCreateRule(t, s, inline("api", "*", "customer-x", 50, time.Minute)) // no set: an override
	p := mustCreatePlan(t, s, gold())
	for _, op := range []store.Op{
		{Action: rules.ActionDelete, Rule: &rules.Rule{ID: mine.ID}, IfVersion: 1},
		{Action: rules.ActionUpdate, Rule: &mine, IfVersion: 1},
		{Action: rules.ActionDelete, Plan: &rules.Plan{Name: p.Name}, IfVersion: 1},
	} {
		_, err := s.Apply(ctx, store.Batch{Set: "platform", Ops: []store.Op{op}}, actor)
		var no *store.NotOwnedError
		if !errors.Is(err, rules.ErrConflict) || !errors.As(err, &no) {
			t.Errorf("Apply(%s) error = %v, want a NotOwnedError", op.Describe(), err)
		}
	}
	if got, err := s.GetRule(ctx, mine.ID); err != nil || got.Version != 1 {
		t.Errorf("GetRule(override) = %+v, %v; want it untouched", got, err)
	}
}
