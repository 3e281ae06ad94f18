package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/store/memory"
)

// FuzzBodies sends arbitrary bodies to every route that takes one: the
// answer is never a 5xx, always JSON, and a 2xx only for a body that
// decodes as the object it should.
func FuzzBodies(f *testing.F) {
	for _, s := range []string{
		ruleBody,
		`{"name":"gold","limit":1000,"period":"1m","burst":2000}`,
		`{"api":"a","route":"*","subject":"k","plan":"gold"}`,
		`{"limit":1e400}`, `{"period":"1.5s"}`, `{"limit":-1}`, `[[[[`, `{"a":`, `null`, "{\"subject\":\"\\u0000\"}",
		"{\"subject\":\"\xff\"}", `{"api":"a","Limit":1}`, `{} {}`,
		`{"api":"a","route":"*","subject":"k","kind":"quota","limit":5,"period":"1mo","anchor":"2026-01-31T00:00:00Z","min_remaining":1}`,
		`{"name":"monthly","kind":"quota","limit":5,"period":"1mo"}`, `{"kind":"quota","period":"1h","anchor":"x","min_remaining":-1}`,
	} {
		f.Add(s)
	}
	svc := admin.New(memory.New(), nil, nil, admin.Options{})
	jsonType := http.Header{"Content-Type": {"application/json"}}
	// A plan and a rule for the PUT routes to find.
	serve(svc, "POST", "/plans", jsonType, `{"name":"gold","limit":10,"period":"1m"}`)
	created := serve(svc, "POST", "/rules", jsonType, `{"api":"f","route":"*","subject":"*","limit":1,"period":"1s"}`)
	var r struct{ ID string }
	if err := json.Unmarshal(created.Body, &r); err != nil || created.Status != 201 {
		f.Fatalf("seed rule: %d %s", created.Status, created.Body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, route := range []string{admin.RouteCreateRule, admin.RouteUpdateRule, admin.RouteCreatePlan, admin.RouteUpdatePlan} {
			method, resource, _ := strings.Cut(route, " ")
			path := strings.NewReplacer("{id}", r.ID, "{name}", "gold").Replace(resource)
			resp := serve(svc, method, path, http.Header{"Content-Type": {"application/json"}, "If-Match": {"*"}}, body)
			if resp.Status >= 500 || resp.Status < 200 {
				t.Fatalf("%s %q = %d %s", route, body, resp.Status, resp.Body)
			}
			if !json.Valid(resp.Body) {
				t.Fatalf("%s %q: body %q is not JSON", route, body, resp.Body)
			}
		}
	})
}
