package admin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// newJSONLogger logs every level to w, a testenv.Buffer where requests
// log in parallel.
func newJSONLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

const ruleBody = `{"api":"a1b2c3d4e5","route":"GET /pets/{id}","subject":"key-1","limit":100,"period":"1m","burst":150,"description":"pets"}`

func TestRuleLifecycle(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		p0 := e.count(t).Published

		// Create.
		resp := e.do(t, event(admin.RouteCreateRule, nil, ruleBody))
		var r rules.Rule
		want(t, resp, 201, &r)
		if got, w := resp.Headers["Location"], "/rules/"+r.ID; got != w {
			t.Errorf("POST /rules Location = %q, want %q", got, w)
		}
		if got := resp.Headers["Etag"]; got != `"1"` {
			t.Errorf("POST /rules ETag = %q, want %q", got, `"1"`)
		}
		if r.ID == "" || r.Version != 1 || *r.Limit != 100 || r.Period != rules.Period(60e9) || *r.Burst != 150 ||
			r.FailureMode != rules.FailOpen || r.Mode != rules.Enforce || !*r.Enabled {
			t.Errorf("POST /rules = %+v, want id, version 1, limit 100/1m burst 150 and defaults", r)
		}

		// Read.
		resp = e.do(t, event(admin.RouteGetRule, idParam(r.ID), ""))
		var got rules.Rule
		want(t, resp, 200, &got)
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("GET /rules/{id} differs from the created rule (-created +got):\n%s", diff)
		}
		if resp.Headers["Etag"] != `"1"` {
			t.Errorf("GET ETag = %q, want \"1\"", resp.Headers["Etag"])
		}
		wantProblem(t, e.do(t, event(admin.RouteGetRule, idParam("00000000-0000-4000-8000-000000000000"), "")), 404)
		wantProblem(t, e.do(t, event(admin.RouteGetRule, idParam("not-a-uuid"), "")), 404)

		// Update: If-Match is required and must be current.
		upd := strings.Replace(ruleBody, `"limit":100`, `"limit":120`, 1)
		wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), upd)), 428)
		wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), upd, "If-Match", `"7"`)), 412)
		wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), upd, "If-Match", `W/"1"`)), 412)
		wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), upd, "If-Match", `"x"`)), 412)
		wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), upd, "If-Match", `1`)), 412)
		wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), upd, "If-Match", `"1`)), 412)
		wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), upd, "If-Match", `"1", "2"`)), 400)
		wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam("00000000-0000-4000-8000-000000000000"), upd, "If-Match", `"1"`)), 404)
		p := wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID),
			`{"id":"00000000-0000-4000-8000-000000000000","api":"a","route":"*","subject":"*","limit":1,"period":"1s"}`, "If-Match", `"1"`)), 400)
		if len(p.Errors) != 1 || p.Errors[0].Field != "id" {
			t.Errorf("PUT with another id: errors = %+v, want one on id", p.Errors)
		}
		resp = e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), upd, "If-Match", `"1"`))
		want(t, resp, 200, &got)
		if got.Version != 2 || *got.Limit != 120 || resp.Headers["Etag"] != `"2"` || got.CreatedAt != r.CreatedAt {
			t.Errorf("PUT = %+v ETag %s, want version 2, limit 120, ETag \"2\", same created_at", got, resp.Headers["Etag"])
		}
		// The body of a GET can be sent back as is: read-only fields are
		// ignored (and as it changes nothing, the version stays).
		back := e.do(t, event(admin.RouteGetRule, idParam(r.ID), "")).Body
		want(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), back, "If-Match", `"2"`)), 200, &got)
		if got.Version != 2 {
			t.Errorf("PUT of the GET body version = %d, want 2", got.Version)
		}
		upd = strings.Replace(upd, `"limit":120`, `"limit":130`, 1)
		want(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), upd, "If-Match", `*`)), 200, &got)
		if got.Version != 3 {
			t.Errorf("PUT with If-Match * version = %d, want 3", got.Version)
		}

		// Scope conflicts.
		wantProblem(t, e.do(t, event(admin.RouteCreateRule, nil, ruleBody)), 409)
		other := e.createRule(t, strings.Replace(ruleBody, `"key-1"`, `"key-2"`, 1))
		wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(other.ID), ruleBody, "If-Match", `"1"`)), 409)

		// History.
		var h admin.HistoryResponse
		want(t, e.do(t, event(admin.RouteRuleHistory, idParam(r.ID), "")), 200, &h)
		var actions []string
		for _, en := range h.Entries {
			actions = append(actions, en.Action)
			if en.Actor != testActor || en.TargetID != r.ID || en.Kind != rules.KindRule {
				t.Errorf("audit entry %+v, want actor %s, target %s, kind rule", en, testActor, r.ID)
			}
		}
		if diff := cmp.Diff([]string{"create", "update", "update"}, actions); diff != "" {
			t.Errorf("history actions (-want +got):\n%s", diff)
		}
		wantProblem(t, e.do(t, event(admin.RouteRuleHistory, idParam("00000000-0000-4000-8000-000000000000"), "")), 404)

		// Delete: If-Match optional, checked when given.
		wantProblem(t, e.do(t, event(admin.RouteDeleteRule, idParam(r.ID), "", "If-Match", `"1"`)), 412)
		resp = e.do(t, event(admin.RouteDeleteRule, idParam(r.ID), "", "If-Match", `"3"`))
		want(t, resp, 204, nil)
		if resp.Body != "" {
			t.Errorf("DELETE body = %q, want empty", resp.Body)
		}
		wantProblem(t, e.do(t, event(admin.RouteGetRule, idParam(r.ID), "")), 404)
		wantProblem(t, e.do(t, event(admin.RouteDeleteRule, idParam(r.ID), "")), 404)
		want(t, e.do(t, event(admin.RouteDeleteRule, idParam(other.ID), "")), 204, nil)
		want(t, e.do(t, event(admin.RouteRuleHistory, idParam(r.ID), "")), 200, &h)
		if n := len(h.Entries); n != 4 || h.Entries[3].Action != rules.ActionDelete || h.Entries[3].After != nil && string(h.Entries[3].After) != "null" {
			t.Errorf("history after delete = %d entries, last %+v; want 4, the last a delete with after null", n, h.Entries[n-1])
		}

		// Writes: create, 2 updates, create, 2 deletes; each published
		// once. The unchanged PUT wrote nothing and published nothing.
		if got := e.count(t).Published - p0; got != 6 {
			t.Errorf("%d sets published over 6 writes, want 6", got)
		}
		e.checkPublished(t)
	})
}

func TestListRulesFilters(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		e.createPlan(t, `{"name":"gold","limit":1000,"period":"1m","burst":2000}`)
		a := e.createRule(t, `{"api":"api1","route":"*","subject":"*","limit":10,"period":"1s"}`)
		b := e.createRule(t, `{"api":"api1","route":"POST /orders","subject":"k1","plan":"gold"}`)
		c := e.createRule(t, `{"api":"api2","route":"POST /orders","subject":"k1","limit":0,"period":"1d"}`)
		ids := func(kv ...string) []string {
			var l admin.ListRulesResponse
			want(t, e.do(t, withQuery(event(admin.RouteListRules, nil, ""), kv...)), 200, &l)
			var out []string
			for _, r := range l.Rules {
				out = append(out, r.ID)
			}
			return out
		}
		// Listed by api, route, subject: what an operator scans for.
		for _, tc := range []struct {
			query []string
			want  []string
		}{
			{nil, []string{a.ID, b.ID, c.ID}},
			{[]string{"api", "api1"}, []string{a.ID, b.ID}},
			{[]string{"subject", "k1"}, []string{b.ID, c.ID}},
			{[]string{"route", "POST /orders", "api", "api2"}, []string{c.ID}},
			{[]string{"plan", "gold"}, []string{b.ID}},
			{[]string{"api", "nope"}, nil},
		} {
			if diff := cmp.Diff(tc.want, ids(tc.query...)); diff != "" {
				t.Errorf("GET /rules?%v (-want +got):\n%s", tc.query, diff)
			}
		}
		var l admin.ListRulesResponse
		want(t, e.do(t, withQuery(event(admin.RouteListRules, nil, ""), "api", "nope")), 200, &l)
		if l.Rules == nil {
			t.Errorf("empty list: rules = null, want []")
		}
		for _, q := range [][]string{
			{"limit", "0"}, {"limit", "1001"}, {"limit", "abc"}, {"limit", "1e3"},
			{"cursor", "garbage!"}, {"subjet", "k1"}, {"api", "a\x00b"}, {"api", "a\xffb"},
		} {
			p := wantProblem(t, e.do(t, withQuery(event(admin.RouteListRules, nil, ""), q...)), 400)
			if len(p.Errors) == 0 {
				t.Errorf("GET /rules?%s=%q: no field errors in %+v", q[0], q[1], p)
			}
		}
	})
}

func TestPagination(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		created := map[string]bool{}
		// Behind the API: through it, each create would read every rule
		// back to publish them (250 × up to 250 rules), which is not what
		// this test is about.
		for i := range 250 {
			r, err := e.store.CreateRule(context.Background(), rules.Rule{API: fmt.Sprintf("api%d", i%3), Route: "*",
				Subject: fmt.Sprintf("s%03d", i), Limit: new(int64(i + 1)), Period: rules.Period(time.Minute)}, testActor)
			if err != nil {
				t.Fatal(err)
			}
			created[r.ID] = true
		}
		for _, size := range []string{"7", "100", ""} {
			seen := map[string]bool{}
			cursor, pages, last := "", 0, ""
			for {
				q := []string{}
				if size != "" {
					q = append(q, "limit", size)
				}
				if cursor != "" {
					q = append(q, "cursor", cursor)
				}
				var l admin.ListRulesResponse
				want(t, e.do(t, withQuery(event(admin.RouteListRules, nil, ""), q...)), 200, &l)
				pages++
				for _, r := range l.Rules {
					if seen[r.ID] {
						t.Fatalf("limit=%s: rule %s listed twice", size, r.ID)
					}
					// One route: api, then subject, order the list.
					if key := r.API + " " + r.Subject; key <= last {
						t.Errorf("limit=%s: %s after %s, want the list ordered by api, route, subject", size, key, last)
					} else {
						last = key
					}
					seen[r.ID] = true
				}
				if l.NextCursor == "" {
					break
				}
				cursor = l.NextCursor
				if pages > 100 {
					t.Fatalf("limit=%s: more than 100 pages", size)
				}
			}
			if diff := cmp.Diff(created, seen); diff != "" {
				t.Errorf("limit=%s: listed ids differ from created (-created +listed):\n%s", size, diff)
			}
		}
	})
}

func TestPlans(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		p0 := e.count(t).Published
		resp := e.do(t, event(admin.RouteCreatePlan, nil, `{"name":"gold","limit":1000,"period":"1m","burst":2000,"description":"gold tier"}`))
		var p rules.Plan
		want(t, resp, 201, &p)
		if resp.Headers["Location"] != "/plans/gold" || resp.Headers["Etag"] != `"1"` || p.Limit != 1000 || p.Version != 1 {
			t.Errorf("POST /plans = %+v, Location %q, ETag %q; want gold v1, /plans/gold, \"1\"", p, resp.Headers["Location"], resp.Headers["Etag"])
		}
		wantProblem(t, e.do(t, event(admin.RouteCreatePlan, nil, `{"name":"gold","limit":1,"period":"1s"}`)), 409)
		pe := wantProblem(t, e.do(t, event(admin.RouteCreatePlan, nil, `{"name":"silver"}`)), 400)
		if diff := cmp.Diff([]rules.FieldError{{Field: "limit", Reason: "is required"}, {Field: "period", Reason: "is required"}}, pe.Errors); diff != "" {
			t.Errorf("plan without numbers: errors (-want +got):\n%s", diff)
		}
		e.createPlan(t, `{"name":"bronze","limit":10,"period":"1m"}`)

		var l admin.ListPlansResponse
		want(t, e.do(t, event(admin.RouteListPlans, nil, "")), 200, &l)
		if len(l.Plans) != 2 || l.Plans[0].Name != "bronze" || l.Plans[1].Name != "gold" {
			t.Errorf("GET /plans = %+v, want bronze, gold", l.Plans)
		}
		resp = e.do(t, event(admin.RouteGetPlan, map[string]string{"name": "gold"}, ""))
		want(t, resp, 200, &p)
		if p.Name != "gold" || resp.Headers["Etag"] != `"1"` {
			t.Errorf("GET /plans/gold = %+v ETag %q", p, resp.Headers["Etag"])
		}
		wantProblem(t, e.do(t, event(admin.RouteGetPlan, map[string]string{"name": "nope"}, "")), 404)

		gold := map[string]string{"name": "gold"}
		wantProblem(t, e.do(t, event(admin.RouteUpdatePlan, gold, `{"limit":5,"period":"1s"}`)), 428)
		wantProblem(t, e.do(t, event(admin.RouteUpdatePlan, gold, `{"limit":5,"period":"1s"}`, "If-Match", `"3"`)), 412)
		pe = wantProblem(t, e.do(t, event(admin.RouteUpdatePlan, gold, `{"name":"platinum","limit":5,"period":"1s"}`, "If-Match", `"1"`)), 400)
		if len(pe.Errors) != 1 || pe.Errors[0].Field != "name" {
			t.Errorf("renaming PUT: errors %+v, want one on name", pe.Errors)
		}
		wantProblem(t, e.do(t, event(admin.RouteUpdatePlan, map[string]string{"name": "nope"}, `{"limit":5,"period":"1s"}`, "If-Match", `"1"`)), 404)
		p = rules.Plan{}
		want(t, e.do(t, event(admin.RouteUpdatePlan, gold, `{"limit":5000,"period":"1m"}`, "If-Match", `"1"`)), 200, &p)
		if p.Version != 2 || p.Limit != 5000 || p.Burst != nil {
			t.Errorf("PUT /plans/gold = %+v, want version 2, limit 5000, no burst", p)
		}

		// A rule naming an unknown plan is a field error; a plan in use cannot go.
		pe = wantProblem(t, e.do(t, event(admin.RouteCreateRule, nil, `{"api":"a","route":"*","subject":"k","plan":"nope"}`)), 400)
		if len(pe.Errors) != 1 || pe.Errors[0].Field != "plan" {
			t.Errorf("rule with unknown plan: errors %+v, want one on plan", pe.Errors)
		}
		r := e.createRule(t, `{"api":"a","route":"*","subject":"k","plan":"gold"}`)
		wantProblem(t, e.do(t, event(admin.RouteDeletePlan, gold, "")), 409)
		want(t, e.do(t, event(admin.RouteDeleteRule, idParam(r.ID), "")), 204, nil)
		wantProblem(t, e.do(t, event(admin.RouteDeletePlan, gold, "", "If-Match", `"1"`)), 412)
		want(t, e.do(t, event(admin.RouteDeletePlan, gold, "", "If-Match", `"2"`)), 204, nil)
		wantProblem(t, e.do(t, event(admin.RouteDeletePlan, gold, "")), 404)

		h, err := e.store.PlanHistory(context.Background(), "gold")
		if err != nil {
			t.Fatalf("PlanHistory: %v", err)
		}
		var actions []string
		for _, en := range h {
			actions = append(actions, en.Action)
			if en.Actor != testActor {
				t.Errorf("plan audit actor = %q, want %q", en.Actor, testActor)
			}
		}
		if diff := cmp.Diff([]string{"create", "update", "delete"}, actions); diff != "" {
			t.Errorf("plan history (-want +got):\n%s", diff)
		}

		// Writes: 2 plan creates, 1 plan update, 1 plan delete, and a rule
		// created and deleted; each published once, failures never.
		if got := e.count(t).Published - p0; got != 6 {
			t.Errorf("%d sets published over 6 writes, want 6", got)
		}
		e.checkPublished(t)
	})
}

// TestBounds: a rule validation accepts never breaks a decision, so what
// would (a refill horizon beyond rules.MaxHorizon, a cost above the burst
// of the plan a rule names, a plan update that would leave such a rule) is
// a clear 4xx naming the problem, and nothing is written.
func TestBounds(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		p0 := e.count(t).Published
		// The rule: before the bound, every request of its subjects
		// failed open.
		pe := wantProblem(t, e.do(t, event(admin.RouteCreateRule, nil,
			`{"api":"a","route":"*","subject":"k","limit":1,"period":"1y","burst":10000000,"cost":1000000}`)), 400)
		wantErrors := []rules.FieldError{
			{Field: "burst", Reason: "must be at most 10 at 1 per 1y: an empty bucket refills in burst × period ÷ limit, at most 10y, and here in about 10000000 years"},
			{Field: "cost", Reason: "must be at most 10 at 1 per 1y: one request's tokens come back in cost × period ÷ limit, at most 10y, and here in about 1000000 years"},
		}
		if diff := cmp.Diff(wantErrors, pe.Errors); diff != "" {
			t.Errorf("POST /rules (issue rule) errors (-want +got):\n%s", diff)
		}
		pe = wantProblem(t, e.do(t, event(admin.RouteCreatePlan, nil, `{"name":"far","limit":1,"period":"1y","burst":11}`)), 400)
		if len(pe.Errors) != 1 || pe.Errors[0].Field != "burst" {
			t.Errorf("POST /plans (horizon 11y) errors = %+v, want one on burst", pe.Errors)
		}

		e.createPlan(t, `{"name":"small","limit":1,"period":"1s","burst":5}`)
		pe = wantProblem(t, e.do(t, event(admin.RouteCreateRule, nil, `{"api":"a","route":"*","subject":"k","plan":"small","cost":6}`)), 400)
		wantErrors = []rules.FieldError{{Field: "cost", Reason: `must be at most the burst (5) of plan "small", or no request could pass`}}
		if diff := cmp.Diff(wantErrors, pe.Errors); diff != "" {
			t.Errorf("POST /rules (cost above the plan's burst) errors (-want +got):\n%s", diff)
		}
		r := e.createRule(t, `{"api":"a","route":"*","subject":"k","plan":"small","cost":5}`)
		pe = wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), `{"api":"a","route":"*","subject":"k","plan":"small","cost":6}`, "If-Match", `"1"`)), 400)
		if len(pe.Errors) != 1 || pe.Errors[0].Field != "cost" {
			t.Errorf("PUT /rules/{id} (cost above the plan's burst) errors = %+v, want one on cost", pe.Errors)
		}

		small := map[string]string{"name": "small"}
		pe = wantProblem(t, e.do(t, event(admin.RouteUpdatePlan, small, `{"limit":1,"period":"1s","burst":4}`, "If-Match", `"1"`)), 409)
		wantDetail := "The new numbers would break 1 rule(s) that name this plan: rule " + r.ID +
			`, cost: must be at most the burst (4) of plan "small", or no request could pass. Lower those rules' cost or move them to another plan first.`
		if pe.Detail != wantDetail {
			t.Errorf("PUT /plans/small (burst below a rule's cost) detail = %q, want %q", pe.Detail, wantDetail)
		}
		var p rules.Plan
		want(t, e.do(t, event(admin.RouteGetPlan, small, "")), 200, &p)
		if p.Version != 1 || *p.Burst != 5 {
			t.Errorf("GET /plans/small after a refused update = %+v, want version 1 and burst 5", p)
		}
		want(t, e.do(t, event(admin.RouteUpdatePlan, small, `{"limit":1,"period":"1s","burst":6}`, "If-Match", `"1"`)), 200, &p)

		// Writes: a plan, a rule and a plan update; refusals never bump.
		if got := e.count(t).Published - p0; got != 3 {
			t.Errorf("snapshot published %d times over 3 writes, want 3", got)
		}
	})
}

// TestConcurrentUpdates sends two updates with the same If-Match at once:
// exactly one wins.
func TestConcurrentUpdates(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		for round := range 5 {
			r := e.createRule(t, fmt.Sprintf(`{"api":"a","route":"*","subject":"c%d","limit":1,"period":"1s"}`, round))
			statuses := make([]int, 2)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range statuses {
				wg.Go(func() {
					body := fmt.Sprintf(`{"api":"a","route":"*","subject":"c%d","limit":%d,"period":"1s"}`, round, 10+i)
					ev := event(admin.RouteUpdateRule, idParam(r.ID), body, "If-Match", `"1"`)
					<-start
					resp, err := e.handle(context.Background(), ev)
					if err != nil {
						t.Error(err)
					}
					statuses[i] = resp.StatusCode
				})
			}
			close(start)
			wg.Wait()
			if s := statuses[0] + statuses[1]; s != 200+412 {
				t.Errorf("round %d: concurrent PUTs with If-Match \"1\" = %v, want one 200 and one 412", round, statuses)
			}
			got, err := e.store.GetRule(context.Background(), r.ID)
			if err != nil || got.Version != 2 {
				t.Errorf("round %d: after the race version = %d (%v), want 2", round, got.Version, err)
			}
		}
	})
}

// TestSubjects covers the limits view and reset, plan changes re-limiting
// their rules, and upgrading a subject to another plan.
func TestSubjects(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		const subject = "user:alice@example.com/1 2"
		e.createPlan(t, `{"name":"gold","limit":10,"period":"1m"}`)
		e.createPlan(t, `{"name":"platinum","limit":100,"period":"1m","burst":300}`)
		apiRule := e.createRule(t, `{"api":"api1","route":"*","subject":"user:alice@example.com/1 2","plan":"gold"}`)
		routeRule := e.createRule(t, `{"api":"api1","route":"GET /pets/{id}","subject":"*","limit":5,"period":"1s"}`)
		e.createRule(t, `{"api":"api2","route":"*","subject":"*","limit":0,"period":"1s"}`)
		e.createRule(t, `{"api":"api1","route":"*","subject":"bob","limit":1,"period":"1s"}`)

		params := map[string]string{"subject": pathEscape(subject)}
		limits := func(kv ...string) admin.SubjectLimitsResponse {
			t.Helper()
			var l admin.SubjectLimitsResponse
			want(t, e.do(t, withQuery(event(admin.RouteSubjectLimits, params, ""), kv...)), 200, &l)
			return l
		}
		l := limits("api", "api1")
		if l.Subject != subject || len(l.Limits) != 2 {
			t.Fatalf("limits(api1) = %+v, want subject %q and 2 rules", l, subject)
		}
		byRule := map[string]admin.BucketLimit{}
		for _, b := range l.Limits {
			byRule[b.Rule] = b
		}
		if b := byRule[apiRule.ID]; b.Plan != "gold" || b.Limit != 10 || b.Burst != 10 || b.Remaining != 10 {
			t.Errorf("api rule bucket = %+v, want gold 10/1m with 10 left", b)
		}
		if b := byRule[routeRule.ID]; b.Limit != 5 || b.Remaining != 5 || b.Route != "GET /pets/{id}" {
			t.Errorf("route rule bucket = %+v, want 5/1s with 5 left", b)
		}

		// Spend 3 tokens the way the authorizer does; peeking charges nothing.
		bucket := limiter.Bucket{ID: apiRule.ID, Limit: 10, Period: 60e9, Burst: 10}
		if d, err := e.lim.Allow(context.Background(), limiter.Request{Subject: subject, Buckets: []limiter.Bucket{bucket}, Cost: 3}); err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v, %v", d, err)
		}
		for range 2 {
			l = limits("api", "api1", "route", "GET /pets/{id}")
			if len(l.Limits) != 2 || l.Limits[0].Rule != apiRule.ID || l.Limits[0].Remaining != 7 {
				t.Errorf("limits after spending 3 = %+v, want the api rule first with 7 left", l.Limits)
			}
		}
		l = limits("api", "api1", "route", "*")
		if len(l.Limits) != 1 || l.Limits[0].Rule != apiRule.ID {
			t.Errorf("limits(route=*) = %+v, want only the API-wide rule", l.Limits)
		}
		l = limits("api", "api2")
		if len(l.Limits) != 1 || l.Limits[0].Limit != 0 || l.Limits[0].Remaining != 0 {
			t.Errorf("limits(api2) = %+v, want the blocking rule with 0 left", l.Limits)
		}
		if l = limits(); len(l.Limits) != 3 {
			t.Errorf("limits(every api) = %+v, want 3 rules", l.Limits)
		}

		// Changing the plan re-limits every rule that names it.
		want(t, e.do(t, event(admin.RouteUpdatePlan, map[string]string{"name": "gold"}, `{"limit":1000,"period":"1m","burst":2000}`, "If-Match", `"1"`)), 200, nil)
		l = limits("api", "api1", "route", "*")
		if b := l.Limits[0]; b.Plan != "gold" || b.Limit != 1000 || b.Burst != 2000 {
			t.Errorf("after the gold plan change: %+v, want gold 1000/1m burst 2000", b)
		}
		// Upgrading the subject is one PUT of its rule.
		want(t, e.do(t, event(admin.RouteUpdateRule, idParam(apiRule.ID),
			`{"api":"api1","route":"*","subject":"user:alice@example.com/1 2","plan":"platinum"}`, "If-Match", `"1"`)), 200, nil)
		l = limits("api", "api1", "route", "*")
		if b := l.Limits[0]; b.Plan != "platinum" || b.Limit != 100 || b.Burst != 300 {
			t.Errorf("after the upgrade: %+v, want platinum 100/1m burst 300", b)
		}

		// Reset refills the subject's buckets. (A rule's new numbers apply
		// to the tokens its bucket holds: the upgrade did not refill it.)
		want(t, e.do(t, withQuery(event(admin.RouteResetSubject, params, ""), "api", "api1")), 204, nil)
		if l = limits("api", "api1", "route", "*"); l.Limits[0].Remaining != 300 {
			t.Errorf("after reset: remaining %d, want 300", l.Limits[0].Remaining)
		}
		bucket = limiter.Bucket{ID: apiRule.ID, Limit: 100, Period: 60e9, Burst: 300}
		if _, err := e.lim.Allow(context.Background(), limiter.Request{Subject: subject, Buckets: []limiter.Bucket{bucket}, Cost: 50}); err != nil {
			t.Fatal(err)
		}
		if l = limits("api", "api1", "route", "*"); l.Limits[0].Remaining != 250 {
			t.Errorf("after spending 50 of 300: remaining %d, want 250", l.Limits[0].Remaining)
		}
		want(t, e.do(t, withQuery(event(admin.RouteResetSubject, params, ""), "api", "api1")), 204, nil)
		if l = limits("api", "api1", "route", "*"); l.Limits[0].Remaining != 300 {
			t.Errorf("after reset: remaining %d, want 300", l.Limits[0].Remaining)
		}
		want(t, e.do(t, event(admin.RouteResetSubject, map[string]string{"subject": "nobody"}, "")), 204, nil)

		for _, q := range [][]string{{"route", "pets"}, {"route", "GET pets"}, {"foo", "bar"}} {
			wantProblem(t, e.do(t, withQuery(event(admin.RouteSubjectLimits, params, ""), q...)), 400)
		}
		wantProblem(t, e.do(t, withQuery(event(admin.RouteResetSubject, params, ""), "route", "*")), 400)
		for _, bad := range []string{"%zz", "a%00b", "%ff", "%20%20", strings.Repeat("s", 257)} {
			wantProblem(t, e.do(t, event(admin.RouteSubjectLimits, map[string]string{"subject": bad}, "")), 400)
		}
		// White space around a subject is trimmed, as every entry trims it
		// (rules.NormalizeTarget).
		var padded admin.SubjectLimitsResponse
		want(t, e.do(t, event(admin.RouteSubjectLimits, map[string]string{"subject": "%20padded%20"}, "")), 200, &padded)
		if padded.Subject != "padded" {
			t.Errorf("subject %%20padded%%20 read as %q, want padded", padded.Subject)
		}
		for _, q := range [][]string{{"api", ""}, {"api", "*"}, {"route", ""}, {"route", "FROB /x"}} {
			wantProblem(t, e.do(t, withQuery(event(admin.RouteSubjectLimits, params, ""), q...)), 400)
		}
	})
}

// TestRouting: unknown methods and resources, the pinned per-Lambda
// handlers, base64 bodies and the actor.
func TestRouting(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			method, resource, allow string
		}{
			{"PATCH", "/rules/{id}", "DELETE, GET, PUT"},
			{"DELETE", "/rules", "GET, POST"},
			{"TRACE", "/plans/{name}", "DELETE, GET, PUT"},
			{"POST", "/subjects/{subject}/limits", "GET"},
			{"get", "/subjects/{subject}/buckets", "DELETE"},
		} {
			ev := event("X "+tc.resource, map[string]string{"id": "x", "name": "x", "subject": "x"}, "")
			ev.HTTPMethod = tc.method
			resp := e.do(t, ev)
			wantProblem(t, resp, 405)
			if resp.Headers["Allow"] != tc.allow {
				t.Errorf("%s %s Allow = %q, want %q", tc.method, tc.resource, resp.Headers["Allow"], tc.allow)
			}
		}
		wantProblem(t, e.do(t, event("GET /nope", nil, "")), 404)

		// Each Lambda serves its own route only, whatever the resource is called.
		get := pinnedHandler(e.svc, admin.RouteGetPlan)
		ev := event("GET /admin/plans/{name}", map[string]string{"name": "gold"}, "")
		resp, _ := get(context.Background(), ev)
		wantProblem(t, resp, 404) // no such plan: the route ran
		ev.HTTPMethod = "DELETE"
		resp, _ = get(context.Background(), ev)
		wantProblem(t, resp, 405)
		if resp.Headers["Allow"] != "GET" {
			t.Errorf("pinned GET handler Allow = %q, want GET", resp.Headers["Allow"])
		}
		resp, _ = pinnedHandler(e.svc, "GET /bogus")(context.Background(), ev)
		if resp.StatusCode != 500 {
			t.Errorf("handler pinned to an unknown route = %d, want 500", resp.StatusCode)
		}

		// Base64 bodies, and the actor when there is no user ARN.
		ev = event(admin.RouteCreatePlan, nil, "eyJuYW1lIjoiYjY0IiwibGltaXQiOjEsInBlcmlvZCI6IjFzIn0=") // {"name":"b64","limit":1,"period":"1s"}
		ev.IsBase64Encoded = true
		ev.RequestContext.Identity.UserArn = ""
		want(t, e.do(t, ev), 201, nil)
		ev = event(admin.RouteCreatePlan, nil, "not base64!!")
		ev.IsBase64Encoded = true
		wantProblem(t, e.do(t, ev), 400)
		ev = event(admin.RouteCreatePlan, nil, `{"name":"anon","limit":1,"period":"1s"}`)
		ev.RequestContext.Identity = events0()
		want(t, e.do(t, ev), 201, nil)
		for name, actor := range map[string]string{"b64": "AIDAEXAMPLECALLER", "anon": "unknown"} {
			h, err := e.store.PlanHistory(context.Background(), name)
			if err != nil || len(h) != 1 || h[0].Actor != actor {
				t.Errorf("PlanHistory(%s) = %+v, %v; want one entry by %q", name, h, err, actor)
			}
		}
	})
}

// TestHostileBodies sends bodies an attacker or a broken client might: each
// gets a 4xx problem and leaves the tables and the rules version as they
// were.
func TestHostileBodies(t *testing.T) {
	const valid = `{"api":"a1","route":"*","subject":"k","limit":10,"period":"1m"}`
	set := func(field, value string) string { // replace a field's value
		var out string
		for _, kv := range strings.Split(strings.Trim(valid, "{}"), ",") {
			k, _, _ := strings.Cut(kv, ":")
			if k == `"`+field+`"` {
				kv = k + ":" + value
			}
			if out != "" {
				out += ","
			}
			out += kv
		}
		return "{" + out + "}"
	}
	tests := []struct {
		name        string
		route       string
		body        string
		headers     []string
		status      int
		field       string // the field error expected, if any
		contentType string // "" means application/json
	}{
		{"truncated JSON", admin.RouteCreateRule, valid[:30], nil, 400, "", ""},
		{"empty body", admin.RouteCreateRule, " ", nil, 400, "", ""},
		{"10 MB body", admin.RouteCreateRule, `{"description":"` + strings.Repeat("a", 10<<20) + `"}`, nil, 413, "", ""},
		{"65 KiB body", admin.RouteCreatePlan, `{"name":"x","limit":1,"period":"1s","description":"` + strings.Repeat("b", 65<<10) + `"}`, nil, 413, "", ""},
		{"100k [ nesting", admin.RouteCreateRule, strings.Repeat("[", 100_000), nil, 413, "", ""},
		{"60k [ nesting", admin.RouteCreateRule, strings.Repeat("[", 60_000), nil, 400, "", ""},
		{"deep nesting in a field", admin.RouteCreateRule, `{"api":` + strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) + `}`, nil, 400, "", ""},
		{"deep object nesting", admin.RouteCreateRule, strings.Repeat(`{"a":`, 10_500) + "1" + strings.Repeat("}", 10_500), nil, 400, "", ""},
		{"SQL text in api", admin.RouteCreateRule, set("api", `"a1'; DROP TABLE rules; --"`), nil, 400, "api", ""},
		{"SQL text in plan", admin.RouteCreateRule, `{"api":"a1","route":"*","subject":"k","plan":"gold' OR '1'='1"}`, nil, 400, "plan", ""},
		{"SQL text in route", admin.RouteCreateRule, set("route", `"GET /x; DELETE FROM rules"`), nil, 400, "route", ""},
		{"SQL text in plan name", admin.RouteCreatePlan, `{"name":"x'); DROP TABLE plans;--","limit":1,"period":"1s"}`, nil, 400, "name", ""},
		{"raw NUL byte", admin.RouteCreateRule, set("subject", "\"k\x00\""), nil, 400, "", ""},
		{"escaped NUL in subject", admin.RouteCreateRule, set("subject", `"k\u0000"`), nil, 400, "subject", ""},
		{"escaped NUL in description", admin.RouteCreateRule, strings.Replace(valid, "}", `,"description":"a\u0000b"}`, 1), nil, 400, "description", ""},
		{"invalid UTF-8", admin.RouteCreateRule, set("subject", "\"k\xff\xfe\""), nil, 400, "", ""},
		{"invalid UTF-8 outside strings", admin.RouteCreateRule, valid + "\xff", nil, 400, "", ""},
		{"huge limit", admin.RouteCreateRule, set("limit", "99999999999999999999999"), nil, 400, "limit", ""},
		{"limit 1e400", admin.RouteCreateRule, set("limit", "1e400"), nil, 400, "limit", ""},
		{"limit 1e3", admin.RouteCreateRule, set("limit", "1e3"), nil, 400, "limit", ""},
		{"negative limit", admin.RouteCreateRule, set("limit", "-1"), nil, 400, "limit", ""},
		{"limit too large", admin.RouteCreateRule, set("limit", "9223372036854775807"), nil, 400, "limit", ""},
		{"fractional limit", admin.RouteCreateRule, set("limit", "1.5"), nil, 400, "limit", ""},
		{"negative burst", admin.RouteCreateRule, strings.Replace(valid, "}", `,"burst":-5}`, 1), nil, 400, "burst", ""},
		{"zero period", admin.RouteCreateRule, set("period", `"0s"`), nil, 400, "period", ""},
		{"fractional period", admin.RouteCreateRule, set("period", `"1.5s"`), nil, 400, "period", ""},
		{"sub-second period", admin.RouteCreateRule, set("period", `"500ms"`), nil, 400, "period", ""},
		{"negative period", admin.RouteCreateRule, set("period", `"-1m"`), nil, 400, "period", ""},
		{"period over a year", admin.RouteCreateRule, set("period", `"400d"`), nil, 400, "period", ""},
		{"period as a number", admin.RouteCreateRule, set("period", "60"), nil, 400, "period", ""},
		{"period 1e400", admin.RouteCreatePlan, `{"name":"p","limit":1,"period":1e400}`, nil, 400, "period", ""},
		{"unknown field", admin.RouteCreateRule, strings.Replace(valid, "}", `,"limt":5}`, 1), nil, 400, "limt", ""},
		{"field in another case", admin.RouteCreateRule, strings.Replace(valid, `"limit"`, `"Limit"`, 1), nil, 400, "Limit", ""},
		{"string for integer", admin.RouteCreateRule, set("limit", `"10"`), nil, 400, "limit", ""},
		{"object for string", admin.RouteCreateRule, set("api", `{"$ne":null}`), nil, 400, "api", ""},
		{"string for boolean", admin.RouteCreateRule, strings.Replace(valid, "}", `,"enabled":"yes"}`, 1), nil, 400, "enabled", ""},
		{"bad failure mode", admin.RouteCreateRule, strings.Replace(valid, "}", `,"failure_mode":"sometimes"}`, 1), nil, 400, "failure_mode", ""},
		{"duplicate key", admin.RouteCreateRule, strings.Replace(valid, "}", `,"limit":1000000}`, 1), nil, 400, "limit", ""},
		{"thousands of unknown fields", admin.RouteCreateRule, "{" + manyFields(5000) + "}", nil, 400, "f0000", ""},
		{"trailing data", admin.RouteCreateRule, valid + `{"api":"b"}`, nil, 400, "", ""},
		{"trailing garbage", admin.RouteCreateRule, valid + ` x`, nil, 400, "", ""},
		{"array body", admin.RouteCreateRule, `[` + valid + `]`, nil, 400, "", ""},
		{"string body", admin.RouteCreateRule, `"rule"`, nil, 400, "", ""},
		{"null body", admin.RouteCreateRule, `null`, nil, 400, "", ""},
		{"text/plain", admin.RouteCreateRule, valid, nil, 415, "", "text/plain"},
		{"form", admin.RouteCreatePlan, "name=x&limit=1", nil, 415, "", "application/x-www-form-urlencoded"},
		{"no content type", admin.RouteCreateRule, valid, nil, 415, "", "-"},
		{"garbage content type", admin.RouteCreateRule, valid, nil, 415, "", ";;;"},
		{"update: truncated", admin.RouteUpdateRule, valid[:10], []string{"If-Match", `"1"`}, 400, "", ""},
		{"update: wrong type", admin.RouteUpdateRule, set("limit", "true"), []string{"If-Match", `"1"`}, 400, "limit", ""},
		{"update: 10 MB", admin.RouteUpdateRule, strings.Repeat(" ", 10<<20), []string{"If-Match", `"1"`}, 413, "", ""},
		{"update plan: negative", admin.RouteUpdatePlan, `{"limit":-1,"period":"1m"}`, []string{"If-Match", `"1"`}, 400, "limit", ""},
		{"update plan: zero period", admin.RouteUpdatePlan, `{"limit":1,"period":"0s"}`, []string{"If-Match", `"1"`}, 400, "period", ""},
	}
	forBackends(t, func(t *testing.T, e *env) {
		e.createPlan(t, `{"name":"gold","limit":10,"period":"1m"}`)
		existing := e.createRule(t, `{"api":"a0","route":"*","subject":"k","limit":10,"period":"1m"}`)
		before := e.count(t)
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				params := map[string]string{"id": existing.ID, "name": "gold"}
				hdr := append([]string(nil), tc.headers...)
				switch tc.contentType {
				case "":
				case "-":
					hdr = append(hdr, "Content-Type", "")
				default:
					hdr = append(hdr, "Content-Type", tc.contentType)
				}
				resp := e.do(t, event(tc.route, params, tc.body, hdr...))
				p := wantProblem(t, resp, tc.status)
				if tc.field != "" {
					found := false
					for _, f := range p.Errors {
						found = found || f.Field == tc.field
					}
					if !found {
						t.Errorf("errors %+v, want one on %q", p.Errors, tc.field)
					}
				}
				if len(resp.Body) > 8192 {
					t.Errorf("problem body is %d bytes, want a short one", len(resp.Body))
				}
			})
		}
		if diff := cmp.Diff(before, e.count(t)); diff != "" {
			t.Errorf("hostile bodies changed the tables or the version (-before +after):\n%s", diff)
		}

		// SQL text where free text is allowed is stored verbatim.
		sql := `'); DROP TABLE rules; -- ` + "\" \\ ☃"
		r := e.createRule(t, `{"api":"a1","route":"*","subject":"Robert'); DROP TABLE rules;--","limit":1,"period":"1s","description":`+jsonString(sql)+`}`)
		got, err := e.store.GetRule(context.Background(), r.ID)
		if err != nil || got.Description != sql || got.Subject != "Robert'); DROP TABLE rules;--" {
			t.Errorf("stored rule = %+v, %v; want the SQL text verbatim", got, err)
		}
	})
}

// TestEveryFieldErrorAtOnce: a body with a wrong type, an unknown field and
// values that fail validation gets one 400 listing all of them, so a client
// fixes its request in one round.
func TestEveryFieldErrorAtOnce(t *testing.T) {
	tests := []struct {
		name  string
		route string
		body  string
		want  []string
	}{
		{"rule", admin.RouteCreateRule,
			`{"api":"a1","route":"FETCH /x","subject":"k","limit":"ten","period":"0s","failure_mode":"sometimes","bogus":1}`,
			[]string{"bogus", "failure_mode", "limit", "period", "route"}},
		{"plan", admin.RouteCreatePlan,
			`{"name":"9lives","limit":-1,"period":"1m","burst":"big"}`,
			[]string{"burst", "limit", "name"}},
	}
	forBackends(t, func(t *testing.T, e *env) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				p := wantProblem(t, e.do(t, event(tc.route, nil, tc.body)), 400)
				var got []string
				for _, f := range p.Errors {
					got = append(got, f.Field)
				}
				slices.Sort(got)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("field errors (-want +got):\n%s\nproblem: %+v", diff, p.Errors)
				}
			})
		}
	})
}

// TestPublishRetried: a publish that fails while Redis fails over is
// retried within the publish budget, so the committed change still reaches
// the authorizers (before, one failed attempt left it to their 5-minute
// full reload: internal/chaos found a rule changed during a Sentinel
// failover enforced by no host).
func TestPublishRetried(t *testing.T) {
	var logs testenv.Buffer
	pub := &flakyPublisher{failures: 3}
	svc := admin.New(mustMemory(), pub, nil, admin.Options{Logger: newJSONLogger(&logs), PublishTimeout: 5 * time.Second})
	h := lambdaHandler(svc)
	start := time.Now()
	resp, _ := h(context.Background(), event(admin.RouteCreateRule, nil, ruleBody))
	if resp.StatusCode != 201 {
		t.Fatalf("create = %d %s, want 201", resp.StatusCode, resp.Body)
	}
	if got := pub.published.Load(); got != 1 {
		t.Fatalf("sets published = %d after 3 failed attempts, want 1 (took %v)\nlogs: %s", got, time.Since(start), logs.String())
	}
	if strings.Contains(logs.String(), "not published") {
		t.Errorf("logs = %s, want no warning: the publish succeeded", logs.String())
	}
}

// TestFailures: a store failure is a 500 whose body tells nothing and whose
// log line tells all; a failed publish leaves a successful write.
func TestFailures(t *testing.T) {
	rdb := testenv.Redis(t)
	var logs strings.Builder
	st := &brokenStore{Store: mustMemory()}
	svc := admin.New(st, failingPublisher{}, limiter.New(rdb, limiter.Options{Prefix: testenv.Prefix(t, "admin"), Timeout: time.Second}),
		admin.Options{Logger: newJSONLogger(&logs), PublishTimeout: 300 * time.Millisecond})
	h := lambdaHandler(svc)

	resp, _ := h(context.Background(), event(admin.RouteCreateRule, nil, ruleBody))
	if resp.StatusCode != 201 {
		t.Fatalf("create with a failing publish = %d %s, want 201", resp.StatusCode, resp.Body)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"rules snapshot not published`) {
		t.Errorf("logs = %s, want a warning about the publish", logs.String())
	}

	st.fail = true
	logs.Reset()
	resp, _ = h(context.Background(), event(admin.RouteListRules, nil, ""))
	if resp.StatusCode != 500 || strings.Contains(resp.Body, "s3cr3t") || resp.Headers["Content-Type"] != "application/problem+json" {
		t.Errorf("store failure = %d %s, want a generic 500 problem", resp.StatusCode, resp.Body)
	}
	if !strings.Contains(logs.String(), "s3cr3t") || !strings.Contains(logs.String(), `"level":"ERROR"`) || strings.Count(logs.String(), "\n") != 1 {
		t.Errorf("logs = %s, want one ERROR line with the cause", logs.String())
	}
	st.fail, st.timeout = false, true
	resp, _ = h(context.Background(), event(admin.RouteGetRule, idParam("x"), ""))
	if resp.StatusCode != 503 || resp.Headers["Retry-After"] != "1" {
		t.Errorf("store timeout = %d %v, want 503 with Retry-After", resp.StatusCode, resp.Headers)
	}

	// A Service without a limiter answers the subjects routes with 503.
	resp, _ = lambdaHandler(admin.New(mustMemory(), nil, nil, admin.Options{}))(context.Background(),
		event(admin.RouteSubjectLimits, map[string]string{"subject": "k"}, ""))
	if resp.StatusCode != 503 {
		t.Errorf("limits without a limiter = %d, want 503", resp.StatusCode)
	}
}

func TestHTTPHandler(t *testing.T) {
	rdb := testenv.Redis(t)
	svc := admin.New(mustMemory(), nil, limiter.New(rdb, limiter.Options{Prefix: testenv.Prefix(t, "admin"), Timeout: time.Second}), admin.Options{})
	srv := newHTTPServer(t, http.StripPrefix("/admin", svc.Handler(admin.HandlerOptions{Actor: func(r *http.Request) string { return "local:" + r.Header.Get("X-User") }})))

	resp := httpDo(t, srv, "POST", "/admin/plans", `{"name":"gold","limit":10,"period":"1m"}`, "Content-Type", "application/json; charset=utf-8", "X-User", "ann")
	if resp.status != 201 || resp.header.Get("Location") != "/plans/gold" || resp.header.Get("Etag") != `"1"` {
		t.Errorf("POST /admin/plans = %d %v %s", resp.status, resp.header, resp.body)
	}
	resp = httpDo(t, srv, "POST", "/admin/rules", `{"api":"a","route":"*","subject":"a b/c","plan":"gold"}`, "Content-Type", "application/vnd.sluice+json")
	if resp.status != 201 {
		t.Fatalf("POST /admin/rules = %d %s", resp.status, resp.body)
	}
	resp = httpDo(t, srv, "GET", "/admin/subjects/a%20b%2Fc/limits?api=a", "")
	if resp.status != 200 || !strings.Contains(resp.body, `"subject":"a b/c"`) || !strings.Contains(resp.body, `"remaining":10`) {
		t.Errorf("GET limits of an escaped subject = %d %s", resp.status, resp.body)
	}
	resp = httpDo(t, srv, "PATCH", "/admin/plans/gold", "")
	if resp.status != 405 || resp.header.Get("Allow") != "DELETE, GET, PUT" {
		t.Errorf("PATCH = %d Allow %q", resp.status, resp.header.Get("Allow"))
	}
	resp = httpDo(t, srv, "POST", "/admin/plans", strings.Repeat("x", 1<<20), "Content-Type", "application/json")
	if resp.status != 413 {
		t.Errorf("1 MiB POST = %d, want 413", resp.status)
	}
	resp = httpDo(t, srv, "GET", "/admin/rules/extra/segments/here", "")
	if resp.status != 404 {
		t.Errorf("unknown path = %d, want 404", resp.status)
	}
	resp = httpDo(t, srv, "GET", "/admin/rules/", "")
	if resp.status != 200 {
		t.Errorf("GET /rules/ = %d, want 200", resp.status)
	}
}
