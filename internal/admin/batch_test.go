package admin_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
)

// TestBatch: POST /batch applies a set's writes all or nothing; a stale
// if_version is 412 and a rule outside the set 409, each naming the op,
// and a PUT that leaves "set" out keeps the rule in its set.
func TestBatch(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		var res admin.BatchResponse
		want(t, e.do(t, event(admin.RouteBatch, nil, `{"set":"platform","ops":[
			{"action":"create","plan":{"name":"gold","limit":100,"period":"1m"}},
			{"action":"create","rule":{"api":"a","route":"*","subject":"*","plan":"gold"}},
			{"action":"create","rule":{"api":"a","route":"GET /x","subject":"*","limit":5,"period":"1s","expires_at":"2030-01-01T00:00:00Z"}}]}`)), 200, &res)
		if len(res.Results) != 3 || res.Results[2].Rule == nil || res.Results[2].Rule.Set != "platform" || res.Results[2].Rule.ExpiresAt == nil {
			t.Fatalf("POST /batch results = %+v, want a plan and two rules of set platform, the last expiring", res.Results)
		}
		x := res.Results[2].Rule
		e.checkPublished(t)

		// A PUT without "set", as a client older than sets sends it.
		var put rules.Rule
		want(t, e.do(t, event(admin.RouteUpdateRule, idParam(x.ID), `{"api":"a","route":"GET /x","subject":"*","limit":6,"period":"1s"}`, "If-Match", `"1"`)), 200, &put)
		if put.Set != "platform" || put.ExpiresAt != nil {
			t.Errorf("PUT without set = set %q, expires %v; want set platform kept, expiry dropped", put.Set, put.ExpiresAt)
		}

		// The plan was made at version 1; the PUT moved the rule to 2.
		stale := fmt.Sprintf(`{"set":"platform","ops":[
			{"action":"create","rule":{"api":"a","route":"GET /y","subject":"*","limit":5,"period":"1s"}},
			{"action":"delete","rule":{"id":%q},"if_version":1}]}`, x.ID)
		p := wantProblem(t, e.do(t, event(admin.RouteBatch, nil, stale)), 412)
		if !strings.Contains(p.Detail, "Nothing was applied") || !strings.Contains(p.Detail, "op 1") || !strings.Contains(p.Detail, x.ID) {
			t.Errorf("412 detail = %q, want it to say nothing was applied and name op 1 and rule %s", p.Detail, x.ID)
		}
		var list admin.ListRulesResponse
		want(t, e.do(t, withQuery(event(admin.RouteListRules, nil, ""), "route", "GET /y")), 200, &list)
		if len(list.Rules) != 0 {
			t.Errorf("after a failed batch GET /rules?route=GET /y = %d rules, want 0", len(list.Rules))
		}

		override := e.createRule(t, `{"api":"a","route":"*","subject":"customer-x","limit":500,"period":"1m"}`)
		p = wantProblem(t, e.do(t, event(admin.RouteBatch, nil, fmt.Sprintf(`{"set":"platform","ops":[{"action":"delete","rule":{"id":%q},"if_version":1}]}`, override.ID))), 409)
		if !strings.Contains(p.Detail, "belongs to no set") {
			t.Errorf("409 detail = %q, want it to say the rule belongs to no set", p.Detail)
		}

		// A plan's name taken is said as such, not as a rule's scope.
		p = wantProblem(t, e.do(t, event(admin.RouteBatch, nil, `{"set":"platform","ops":[{"action":"create","plan":{"name":"gold","limit":100,"period":"1m"}}]}`)), 409)
		if !strings.Contains(p.Detail, `op 0 (create plan "gold")`) || !strings.Contains(p.Detail, "A plan with this name already exists") || strings.Contains(p.Detail, "rule") {
			t.Errorf("409 detail of a plan created twice = %q, want it to say the name is taken", p.Detail)
		}

		p = wantProblem(t, e.do(t, event(admin.RouteBatch, nil, `{"set":"platform","ops":[
			{"action":"create","rule":{"api":"a","route":"GET /z","subject":"*","limit":-1,"period":"1s"}},
			{"action":"update","plan":{"name":"gold","limit":1,"period":"1m"}}]}`)), 400)
		if got := fields(p); !strings.Contains(got, "ops[0].rule.limit") || !strings.Contains(got, "ops[1].if_version") {
			t.Errorf("400 fields = %s, want ops[0].rule.limit and ops[1].if_version", got)
		}
	})
}

func fields(p httpapi.Problem) string {
	var b strings.Builder
	for _, f := range p.Errors {
		b.WriteString(f.Field + " ")
	}
	return b.String()
}

// TestMessagesSayWhatIsInTheWay: a version that never existed is not
// "changed by someone", and a plan's kind change names the way out.
func TestMessagesSayWhatIsInTheWay(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		r := e.createRule(t, `{"api":"a","route":"*","subject":"*","limit":1,"period":"1s"}`)
		p := wantProblem(t, e.do(t, event(admin.RouteDeleteRule, idParam(r.ID), "", "If-Match", `"7"`)), 412)
		if !strings.Contains(p.Detail, "version 7 in If-Match never existed") || strings.Contains(p.Detail, "has changed") {
			t.Errorf("DELETE at a version that never existed: detail %q", p.Detail)
		}
		e.createPlan(t, `{"name":"gold","limit":5,"period":"1m"}`)
		e.createRule(t, `{"api":"a","route":"*","subject":"k","plan":"gold"}`)
		p = wantProblem(t, e.do(t, event(admin.RouteUpdatePlan, map[string]string{"name": "gold"}, `{"kind":"quota","limit":5,"period":"1d"}`, "If-Match", `"1"`)), 409)
		if strings.Contains(p.Detail, "cost") || !strings.Contains(p.Detail, "kind") {
			t.Errorf("a plan kind change refused: detail %q, want it to say the kind is in the way, not the cost", p.Detail)
		}
	})
}
