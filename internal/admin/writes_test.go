package admin_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/rules"
)

// TestNoOpUpdates: a PUT that changes nothing (a period of "1.5m" on a
// rule of "90s", the body a GET returned) answers 200 with the stored rule,
// and neither bumps the version nor writes an audit entry.
func TestNoOpUpdates(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		r := e.createRule(t, `{"api":"a","route":"GET /x","subject":"*","limit":10,"period":"90s"}`)
		for _, body := range []string{
			`{"api":"a","route":"GET /x","subject":"*","limit":10,"period":"1.5m"}`,
			`{"api":"a","route":"get /x/","subject":"*","limit":10,"period":"90s","mode":"enforce","failure_mode":"open","enabled":true}`,
			e.do(t, event(admin.RouteGetRule, idParam(r.ID), "")).Body,
		} {
			var got rules.Rule
			resp := e.do(t, event(admin.RouteUpdateRule, idParam(r.ID), body, "If-Match", `"1"`))
			want(t, resp, 200, &got)
			if got.Version != 1 || resp.Headers["Etag"] != `"1"` || !got.UpdatedAt.Equal(r.UpdatedAt) {
				t.Errorf("PUT %s = version %d, ETag %s, updated %v; want version 1, ETag \"1\", updated %v (nothing changed)",
					body, got.Version, resp.Headers["Etag"], got.UpdatedAt, r.UpdatedAt)
			}
		}
		var h admin.HistoryResponse
		want(t, e.do(t, event(admin.RouteRuleHistory, idParam(r.ID), "")), 200, &h)
		if len(h.Entries) != 1 {
			t.Errorf("history after unchanged PUTs has %d entries, want 1 (the create)", len(h.Entries))
		}

		e.createPlan(t, `{"name":"gold","limit":5,"period":"1m","description":"g"}`)
		var p rules.Plan
		want(t, e.do(t, event(admin.RouteUpdatePlan, map[string]string{"name": "gold"}, `{"limit":5,"period":"60s","description":"g"}`, "If-Match", `"1"`)), 200, &p)
		if p.Version != 1 {
			t.Errorf("PUT /plans/gold unchanged = version %d, want 1", p.Version)
		}
	})
}

// TestConflictsNameWhatIsInTheWay: a 409 on a taken scope names the rule
// holding it (id, api, route, never the subject); a 409 on deleting a plan
// in use names its rules, or the first of them and how many, and how to
// list them.
func TestConflictsNameWhatIsInTheWay(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		const secret = "sk_live_do_not_log"
		holder := e.createRule(t, `{"api":"shop","route":"GET /items/{id}","subject":"`+secret+`","limit":1,"period":"1s"}`)
		dup := `{"api":"shop","route":"GET /items/{id}","subject":"` + secret + `","limit":2,"period":"1s"}`
		p := wantProblem(t, e.do(t, event(admin.RouteCreateRule, nil, dup)), 409)
		for _, part := range []string{holder.ID, `"shop"`, `"GET /items/{id}"`} {
			if !strings.Contains(p.Detail, part) {
				t.Errorf("409 detail = %q, want it to name %s", p.Detail, part)
			}
		}
		if strings.Contains(p.Detail, secret) {
			t.Errorf("409 detail = %q quotes the subject", p.Detail)
		}
		other := e.createRule(t, `{"api":"shop","route":"GET /items/{id}","subject":"*","limit":1,"period":"1s"}`)
		p = wantProblem(t, e.do(t, event(admin.RouteUpdateRule, idParam(other.ID), dup, "If-Match", `"1"`)), 409)
		if !strings.Contains(p.Detail, holder.ID) {
			t.Errorf("409 detail of a PUT onto a taken scope = %q, want it to name rule %s", p.Detail, holder.ID)
		}

		e.createPlan(t, `{"name":"gold","limit":5,"period":"1m"}`)
		gold := map[string]string{"name": "gold"}
		first := e.createRule(t, `{"api":"a","route":"*","subject":"k0","plan":"gold"}`)
		p = wantProblem(t, e.do(t, event(admin.RouteDeletePlan, gold, "")), 409)
		for _, part := range []string{first.ID, "1 rule", "rules ls --plan gold"} {
			if !strings.Contains(p.Detail, part) {
				t.Errorf("409 detail = %q, want it to name %q", p.Detail, part)
			}
		}
		for i := 1; i < 8; i++ {
			e.createRule(t, fmt.Sprintf(`{"api":"a","route":"*","subject":"k%d","plan":"gold"}`, i))
		}
		p = wantProblem(t, e.do(t, event(admin.RouteDeletePlan, gold, "")), 409)
		for _, part := range []string{"8 rule", "and 3 more", "GET /rules?plan=gold"} {
			if !strings.Contains(p.Detail, part) {
				t.Errorf("409 detail = %q, want it to say %q", p.Detail, part)
			}
		}
	})
}

// TestPaginationLongScope: a cursor holds the last rule's api, route and
// subject, so a rule of the longest route and subject at a page's end
// makes a long cursor; the next page is still served.
func TestPaginationLongScope(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env) {
		route := "GET /" + strings.Repeat("r", rules.MaxRouteLen-len("GET /"))
		subject := strings.Repeat("s", rules.MaxSubjectLen)
		var ids []string
		for i := range 3 {
			r := e.createRule(t, fmt.Sprintf(`{"api":"api%d","route":%q,"subject":%q,"limit":1,"period":"1s"}`, i, route, subject))
			ids = append(ids, r.ID)
		}
		var got []string
		cursor := ""
		for range 4 {
			q := []string{"limit", "1"}
			if cursor != "" {
				q = append(q, "cursor", cursor)
			}
			var l admin.ListRulesResponse
			want(t, e.do(t, withQuery(event(admin.RouteListRules, nil, ""), q...)), 200, &l)
			for _, r := range l.Rules {
				got = append(got, r.ID)
			}
			if cursor = l.NextCursor; cursor == "" {
				break
			}
		}
		if strings.Join(got, " ") != strings.Join(ids, " ") {
			t.Errorf("paged ids = %v, want %v", got, ids)
		}
	})
}
