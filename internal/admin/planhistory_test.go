package admin_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
)

func TestPlanHistory(t *testing.T) {
	t.Parallel()
	h := lambdaHandler(admin.New(mustMemory(), nil, nil, admin.Options{}))
	ctx := context.Background()
	resp, _ := h(ctx, event(admin.RouteCreatePlan, nil, `{"name":"gold","limit":10,"period":"1m"}`))
	want(t, resp, 201, nil)
	resp, _ = h(ctx, event(admin.RouteUpdatePlan, map[string]string{"name": "gold"}, `{"name":"gold","limit":20,"period":"1m"}`, "If-Match", `"1"`))
	want(t, resp, 200, nil)
	var hist admin.HistoryResponse
	resp, _ = h(ctx, event(admin.RoutePlanHistory, map[string]string{"name": "gold"}, ""))
	want(t, resp, 200, &hist)
	if len(hist.Entries) != 2 || hist.Entries[0].Action != "create" || hist.Entries[1].Action != "update" || hist.Entries[1].Actor != testActor {
		t.Errorf("GET /plans/gold/history = %+v, want create then update by %s", hist.Entries, testActor)
	}
	resp, _ = h(ctx, event(admin.RoutePlanHistory, map[string]string{"name": "nope"}, ""))
	wantProblem(t, resp, 404)
}
