package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
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
	ctx := context.Background()
	// A plan and a rule for the PUT routes to find.
	svc.Handle(ctx, admin.Request{Method: "POST", Resource: "/plans", Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"name":"gold","limit":10,"period":"1m"}`)})
	created := svc.Handle(ctx, admin.Request{Method: "POST", Resource: "/rules", Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"api":"f","route":"*","subject":"*","limit":1,"period":"1s"}`)})
	var r struct{ ID string }
	if err := json.Unmarshal(created.Body, &r); err != nil || created.Status != 201 {
		f.Fatalf("seed rule: %d %s", created.Status, created.Body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, route := range []string{admin.RouteCreateRule, admin.RouteUpdateRule, admin.RouteCreatePlan, admin.RouteUpdatePlan} {
			req := admin.Request{
				Header:     http.Header{"Content-Type": {"application/json"}, "If-Match": {"*"}},
				PathParams: map[string]string{"id": r.ID, "name": "gold"},
				Body:       []byte(body),
			}
			resp := svc.HandleRoute(ctx, route, withMethod(req, route))
			if resp.Status >= 500 || resp.Status < 200 {
				t.Fatalf("%s %q = %d %s", route, body, resp.Status, resp.Body)
			}
			if !json.Valid(resp.Body) {
				t.Fatalf("%s %q: body %q is not JSON", route, body, resp.Body)
			}
		}
	})
}

func withMethod(req admin.Request, route string) admin.Request {
	for i := range route {
		if route[i] == ' ' {
			req.Method = route[:i]
			break
		}
	}
	return req
}
