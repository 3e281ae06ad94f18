package admin_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestTooManyRules: a create on a store holding its maximum of rules is a
// 409 problem saying so, on both stores; the same request succeeds once a
// rule is deleted.
func TestTooManyRules(t *testing.T) {
	for _, b := range []struct {
		name string
		new  func(t *testing.T, o store.Options) store.Store
	}{
		{"memory", func(_ *testing.T, o store.Options) store.Store { return memory.NewWithOptions(o) }},
		{"postgres", func(t *testing.T, o store.Options) store.Store { return postgres.NewWithOptions(pgtest.NewPool(t), o) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			var logs testenv.Buffer
			svc := admin.New(b.new(t, store.Options{MaxRules: 2}), nil, nil, admin.Options{Logger: newJSONLogger(&logs)})
			e := &env{svc: svc, handle: lambdaHandler(svc)}
			body := func(i int) string {
				return fmt.Sprintf(`{"api":"a1","route":"*","subject":"k%d","limit":1,"period":"1m"}`, i)
			}
			var first rules.Rule
			want(t, e.do(t, event(admin.RouteCreateRule, nil, body(0))), 201, &first)
			want(t, e.do(t, event(admin.RouteCreateRule, nil, body(1))), 201, nil)
			p := wantProblem(t, e.do(t, event(admin.RouteCreateRule, nil, body(2))), 409)
			if p.Type != httpapi.TypeBase+"conflict" || !strings.Contains(p.Detail, "MAX_RULES") || !strings.Contains(p.Detail, "most rules") {
				t.Errorf("409 problem = %+v, want the conflict type and a detail naming the maximum (MAX_RULES)", p)
			}
			if !strings.Contains(logs.String(), "too many rules") || strings.Contains(logs.String(), `"level":"ERROR"`) {
				t.Errorf("logs = %s, want one client-error line with the cause", logs.String())
			}
			want(t, e.do(t, event(admin.RouteDeleteRule, idParam(first.ID), "")), 204, nil)
			want(t, e.do(t, event(admin.RouteCreateRule, nil, body(2))), 201, nil)
		})
	}
}
