package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/store/memory"
)

// fixtures maps each sample event in events/ to its route and the status
// it gets when the fixtures are played in this order against an empty
// store (the rule id in them is not one the store assigns, hence 404s).
var fixtures = []struct {
	file   string
	route  string
	status int
}{
	{"admin-write-plans-create", admin.RouteCreatePlan, 201},
	{"admin-read-plans-get", admin.RouteGetPlan, 200},
	{"admin-read-plans-list", admin.RouteListPlans, 200},
	{"admin-write-plans-update", admin.RouteUpdatePlan, 200},
	{"admin-read-plans-history", admin.RoutePlanHistory, 200},
	{"admin-write-rules-create", admin.RouteCreateRule, 201},
	{"admin-read-rules-list", admin.RouteListRules, 200},
	{"admin-read-rules-get", admin.RouteGetRule, 404},
	{"admin-write-rules-update", admin.RouteUpdateRule, 404},
	{"admin-read-rules-history", admin.RouteRuleHistory, 404},
	{"admin-write-rules-delete", admin.RouteDeleteRule, 404},
	{"admin-subjects-limits", admin.RouteSubjectLimits, 200},
	{"admin-subjects-reset", admin.RouteResetSubject, 204},
	{"admin-stats-find", admin.RouteFindSubject, 200},
	{"admin-subjects-usage", admin.RouteUsage, 200},
	{"admin-stats", admin.RouteStats, 200},
	{"admin-write-batch", admin.RouteBatch, 200},
	{"admin-write-plans-delete", admin.RouteDeletePlan, 204},
	{"admin-read-openapi", admin.RouteOpenAPI, 200},
}

func readEvent(t *testing.T, file string) (events.APIGatewayProxyRequest, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", file+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayProxyRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	return ev, raw
}

// TestEventFixtures decodes every events/admin-*.json (so the samples
// never drift from the event type), checks it round-trips and is named
// after the function that serves its route, and plays them through the
// per-route handlers the Lambdas use (moved here from the removed
// internal/admin/apigw).
func TestEventFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "events", "admin-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(fixtures) || len(fixtures) != len(admin.Routes()) {
		t.Errorf("%d admin event files, %d fixtures listed, %d routes: want one per route", len(files), len(fixtures), len(admin.Routes()))
	}
	function := map[string]string{}
	for _, r := range admin.Routes() {
		function[r.Name] = r.Function
	}
	svc := admin.New(memory.New(), nil, testLimiter(t, "fixtures"), admin.Options{Stats: stats.New(stats.Options{})})
	for _, f := range fixtures {
		ev, raw := readEvent(t, f.file)
		again, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		json.Unmarshal(raw, &a)   //nolint:errcheck // decoded above
		json.Unmarshal(again, &b) //nolint:errcheck // just encoded
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s does not round-trip (-file +re-encoded):\n%s", f.file, diff)
		}
		if got := ev.HTTPMethod + " " + ev.Resource; got != f.route {
			t.Errorf("%s is for %q, want %q", f.file, got, f.route)
		}
		if fn := function[f.route]; f.file != fn && !strings.HasPrefix(f.file, fn+"-") {
			t.Errorf("%s is for %q, which %s serves: name it %s-<what>.json", f.file, f.route, fn, fn)
		}
		if ev.RequestContext.Identity.UserArn == "" {
			t.Errorf("%s has no requestContext.identity.userArn", f.file)
		}
		resp, err := pinnedHandler(svc, f.route)(context.Background(), ev)
		if err != nil || resp.StatusCode != f.status {
			t.Errorf("%s: handler = %d %s, %v; want %d", f.file, resp.StatusCode, resp.Body, err, f.status)
		}
	}
}
