package apigw_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/admin/apigw"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/internal/testenv"
)

// fixtures maps each sample event in events/ to its route and the status
// it gets when the fixtures are played in this order against an empty
// store (the rule id in them is not one the store assigns, hence 404s).
var fixtures = []struct {
	file   string
	route  string
	status int
}{
	{"admin-plans-create", admin.RouteCreatePlan, 201},
	{"admin-plans-get", admin.RouteGetPlan, 200},
	{"admin-plans-list", admin.RouteListPlans, 200},
	{"admin-plans-update", admin.RouteUpdatePlan, 200},
	{"admin-plans-history", admin.RoutePlanHistory, 200},
	{"admin-rules-create", admin.RouteCreateRule, 201},
	{"admin-rules-list", admin.RouteListRules, 200},
	{"admin-rules-get", admin.RouteGetRule, 404},
	{"admin-rules-update", admin.RouteUpdateRule, 404},
	{"admin-rules-history", admin.RouteRuleHistory, 404},
	{"admin-rules-delete", admin.RouteDeleteRule, 404},
	{"admin-subjects-limits", admin.RouteSubjectLimits, 200},
	{"admin-subjects-reset", admin.RouteResetSubject, 204},
	{"admin-usage", admin.RouteUsage, 200},
	{"admin-stats", admin.RouteStats, 200},
	{"admin-plans-delete", admin.RouteDeletePlan, 204},
}

func readEvent(t *testing.T, file string) (events.APIGatewayProxyRequest, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "events", file+".json"))
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
// never drift from the event type), checks it round-trips, and plays them
// through the per-route handlers the Lambdas use.
func TestEventFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "events", "admin-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(fixtures) || len(fixtures) != len(admin.Routes()) {
		t.Errorf("%d admin event files, %d fixtures listed, %d routes: want one per route", len(files), len(fixtures), len(admin.Routes()))
	}
	svc := admin.New(memory.New(), nil, newLimiter(t), admin.Options{Stats: stats.New(stats.Options{})})
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
		if ev.RequestContext.Identity.UserArn == "" {
			t.Errorf("%s has no requestContext.identity.userArn", f.file)
		}
		resp, err := apigw.Handler(svc, f.route)(context.Background(), ev)
		if err != nil || resp.StatusCode != f.status {
			t.Errorf("%s: handler = %d %s, %v; want %d", f.file, resp.StatusCode, resp.Body, err, f.status)
		}
	}
}

func newLimiter(t *testing.T) *limiter.Limiter {
	t.Helper()
	return limiter.New(testenv.Redis(t), limiter.Options{Prefix: testenv.Prefix(t, "apigw"), Timeout: 2 * time.Second})
}

func TestRequest(t *testing.T) {
	ev := events.APIGatewayProxyRequest{
		Resource:   "/rules",
		Path:       "/rules",
		HTTPMethod: "post",
		Headers:    map[string]string{"content-type": "application/json", "if-match": `"1"`},
		MultiValueHeaders: map[string][]string{
			"content-type": {"application/json"}, "if-match": {`"1"`}, "x-multi": {"a", "b"},
		},
		QueryStringParameters:           map[string]string{"api": "b"},
		MultiValueQueryStringParameters: map[string][]string{"api": {"a", "b"}},
		PathParameters:                  map[string]string{"id": "x%20y"},
		Body:                            base64.StdEncoding.EncodeToString([]byte(`{"a":1}`)),
		IsBase64Encoded:                 true,
		RequestContext: events.APIGatewayProxyRequestContext{
			RequestID: "r1",
			Identity:  events.APIGatewayRequestIdentity{Caller: "AIDACALLER"},
		},
	}
	req, err := apigw.Request(ev, 1024)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	checks := []struct{ name, got, want string }{
		{"method", req.Method, "POST"},
		{"content type", req.Header.Get("Content-Type"), "application/json"},
		{"if-match", req.Header.Get("If-Match"), `"1"`},
		{"multi header", strings.Join(req.Header.Values("X-Multi"), ","), "a,b"},
		{"multi query", strings.Join(req.Query["api"], ","), "a,b"},
		{"path param (raw)", req.PathParams["id"], "x%20y"},
		{"body", string(req.Body), `{"a":1}`},
		{"actor", req.Actor, "AIDACALLER"},
		{"request id", req.RequestID, "r1"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("Request(event).%s = %q, want %q", c.name, c.got, c.want)
		}
	}

	// An oversized base64 body is cut just past the limit, not decoded whole.
	ev.Body = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 10<<20))
	req, err = apigw.Request(ev, 1024)
	if err != nil || len(req.Body) <= 1024 || len(req.Body) > 1100 {
		t.Errorf("Request(10 MB base64) body = %d bytes, %v; want just over 1024", len(req.Body), err)
	}
	ev.Body = "%%%"
	if _, err := apigw.Request(ev, 1024); err == nil {
		t.Errorf("Request(bad base64) error = nil, want one")
	}
	ev.RequestContext.Identity = events.APIGatewayRequestIdentity{}
	if req, _ := apigw.Request(ev, 1024); req.Actor != "" {
		t.Errorf("Request(no identity).Actor = %q, want \"\" (the Service's \"unknown\")", req.Actor)
	}
}

func TestResponse(t *testing.T) {
	got := apigw.Response(admin.Response{Status: 201, Header: map[string][]string{"Etag": {`"1"`}, "Vary": {"A", "B"}}, Body: []byte("{}")})
	want := events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Etag": `"1"`, "Vary": "A, B"}, Body: "{}"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Response (-want +got):\n%s", diff)
	}
}
