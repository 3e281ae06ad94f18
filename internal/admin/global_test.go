package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/rules"
)

// TestGlobal: rules and plans take and return global; a PUT replaces it as
// it replaces durable; the audit entry records it; what a global rule
// cannot be (shadow, min_remaining, durable, a rate under 1m) is a 400
// naming the field, on POST, on PUT, through a global plan and in a batch.
func TestGlobal(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		r := e.createRule(t, `{"api":"a","route":"GET /g","subject":"*","limit":100,"period":"1h","global":true}`)
		if !r.Global {
			t.Fatalf("POST /rules global = %+v, want global", r)
		}
		if resp := e.do(t, event(admin.RouteGetRule, idParam(r.ID), "")); !strings.Contains(resp.Body, `"global":true`) {
			t.Errorf("GET /rules/{id} = %s, want \"global\":true", resp.Body)
		}
		var put rules.Rule
		want(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), `{"api":"a","route":"GET /g","subject":"*","limit":100,"period":"1h"}`, "If-Match", `"1"`)), 200, &put)
		if put.Global || put.Version != 2 {
			t.Errorf("PUT without global = global %v, version %d; want regional at version 2", put.Global, put.Version)
		}
		var h admin.HistoryResponse
		want(t, e.do(t, event(admin.RouteRuleHistory, idParam(r.ID), "")), 200, &h)
		if len(h.Entries) != 2 || !strings.Contains(string(h.Entries[1].Before), `"global":true`) || strings.Contains(string(h.Entries[1].After), `"global"`) {
			t.Errorf("history = %+v, want the update's before global and its after regional", h.Entries)
		}

		for _, tc := range []struct{ body, field string }{
			{`{"api":"a","route":"GET /s","subject":"*","limit":1,"period":"1m","global":true,"mode":"shadow"}`, "global"},
			{`{"api":"a","route":"GET /s","subject":"*","limit":10,"period":"1m","global":true,"min_remaining":1}`, "global"},
			{`{"api":"a","route":"GET /s","subject":"*","kind":"quota","limit":1,"period":"1d","global":true,"durable":true}`, "global"},
			{`{"api":"a","route":"GET /s","subject":"*","limit":1,"period":"1s","global":true}`, "period"},
			{`{"api":"a","route":"GET /s","subject":"*","limit":1,"period":"1m","global":"yes"}`, "global"},
		} {
			p := wantProblem(t, e.do(t, event(admin.RouteCreateRule, nil, tc.body)), 400)
			if got := fields(p); got != tc.field+" " {
				t.Errorf("POST /rules %s = 400 on %q, want %q", tc.body, got, tc.field)
			}
		}
		p := wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(r.ID),
			`{"api":"a","route":"GET /g","subject":"*","limit":100,"period":"1h","global":true,"mode":"shadow"}`, "If-Match", `"2"`)), 400)
		if fields(p) != "global " {
			t.Errorf("PUT global shadow = 400 on %q, want global", fields(p))
		}

		pl := e.createPlan(t, `{"name":"shared","kind":"quota","limit":1000000,"period":"1mo","global":true}`)
		if !pl.Global {
			t.Errorf("POST /plans global = %+v, want global", pl)
		}
		var plans admin.ListPlansResponse
		want(t, e.do(t, event(admin.RouteListPlans, nil, "")), 200, &plans)
		if len(plans.Plans) != 1 || !plans.Plans[0].Global {
			t.Errorf("GET /plans = %+v, want shared, global", plans.Plans)
		}
		p = wantProblem(t, e.do(t, event(admin.RouteCreateRule, nil, `{"api":"a","route":"*","subject":"k","kind":"quota","plan":"shared","mode":"shadow"}`)), 400)
		if fields(p) != "global " {
			t.Errorf("POST a shadow rule of a global plan = 400 on %q, want global", fields(p))
		}
		e.createPlan(t, `{"name":"regional","limit":10,"period":"1m"}`)
		shadow := e.createRule(t, `{"api":"a","route":"*","subject":"s","plan":"regional","mode":"shadow"}`)
		p = wantProblem(t, e.do(t, event(admin.RouteUpdatePlan, map[string]string{"name": "regional"}, `{"limit":10,"period":"1m","global":true}`, "If-Match", `"1"`)), 409)
		if !strings.Contains(p.Detail, shadow.ID) {
			t.Errorf("PUT /plans/regional global = 409 %q, want it to name shadow rule %s", p.Detail, shadow.ID)
		}
		p = wantProblem(t, e.do(t, event(admin.RouteCreatePlan, nil, `{"name":"fast","limit":10,"period":"1s","global":true}`)), 400)
		if fields(p) != "period " {
			t.Errorf("POST a global plan of 1s = 400 on %q, want period", fields(p))
		}

		var res admin.BatchResponse
		want(t, e.do(t, event(admin.RouteBatch, nil, `{"set":"platform","ops":[
			{"action":"create","plan":{"name":"g","limit":600,"period":"1m","global":true}},
			{"action":"create","rule":{"api":"b","route":"*","subject":"*","limit":5,"period":"1m","global":true}}]}`)), 200, &res)
		if len(res.Results) != 2 || !res.Results[0].Plan.Global || !res.Results[1].Rule.Global {
			t.Errorf("POST /batch global = %+v, want a global plan and a global rule", res.Results)
		}
		p = wantProblem(t, e.do(t, event(admin.RouteBatch, nil, `{"set":"platform","ops":[
			{"action":"create","rule":{"api":"b","route":"GET /x","subject":"*","limit":5,"period":"1m","global":true,"mode":"shadow"}},
			{"action":"create","plan":{"name":"h","limit":5,"period":"1s","global":true}}]}`)), 400)
		if got := fields(p); got != "ops[0].rule.global ops[1].plan.period " {
			t.Errorf("POST /batch global shadow, global 1s = 400 on %q, want ops[0].rule.global ops[1].plan.period", got)
		}
	})
}

// TestGlobalHTTP: the net/http handler, which sluice local serves, takes
// and returns global too, and refuses a bad combination as problem+json.
func TestGlobalHTTP(t *testing.T) {
	svc := admin.New(mustMemory(), nil, nil, admin.Options{})
	srv := newHTTPServer(t, svc.Handler(admin.HandlerOptions{}))
	resp := httpDo(t, srv, "POST", "/rules", `{"api":"a","route":"*","subject":"*","limit":10,"period":"1m","global":true}`, "Content-Type", "application/json")
	if resp.status != 201 || !strings.Contains(resp.body, `"global":true`) {
		t.Errorf("POST /rules global = %d %s, want 201 with \"global\":true", resp.status, resp.body)
	}
	resp = httpDo(t, srv, "POST", "/rules", `{"api":"a","route":"GET /x","subject":"*","limit":10,"period":"1m","global":true,"mode":"shadow"}`, "Content-Type", "application/json")
	if resp.status != http.StatusBadRequest || resp.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(resp.body, `"field":"global"`) {
		t.Errorf("POST /rules global shadow = %d %s %s, want a 400 problem naming global", resp.status, resp.header.Get("Content-Type"), resp.body)
	}
}
