package admin_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/internal/testenv"
)

// env is one admin Service over its own store, Redis key prefix and rules
// snapshot, reached through the API Gateway adapter as the Lambdas reach it.
type env struct {
	svc       *admin.Service
	handle    func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
	store     store.Store // read behind the API's back
	snapshots *rulesync.Snapshots
	lim       *limiter.Limiter
	logs      *testenv.Buffer
	count     func(t testing.TB) rowCounts // counts rows behind the store's back
}

// rowCounts counts what a rejected request must leave unchanged.
type rowCounts struct {
	Rules, Plans, Audit int64
	// Version is the store's rules version; Published the number of sets
	// the Service published to Redis.
	Version, Published int64
}

// countingPublisher counts the sets published.
type countingPublisher struct {
	*rulesync.Snapshots
	n atomic.Int64
}

func (c *countingPublisher) Publish(ctx context.Context, set rules.Set) (bool, error) {
	ok, err := c.Snapshots.Publish(ctx, set)
	if ok {
		c.n.Add(1)
	}
	return ok, err
}

// checkPublished checks that Redis holds the store's current set.
func (e *env) checkPublished(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	want, err := e.store.LoadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.snapshots.LoadAll(ctx)
	v, verr := e.snapshots.Version(ctx)
	if err != nil || verr != nil || got.Version != want.Version || v != want.Version || len(got.Rules) != len(want.Rules) || len(got.Plans) != len(want.Plans) {
		t.Errorf("published: version key %d, snapshot version %d with %d rules, %d plans (%v, %v); want the store's version %d with %d rules, %d plans",
			v, got.Version, len(got.Rules), len(got.Plans), err, verr, want.Version, len(want.Rules), len(want.Plans))
	}
}

// backend builds a store for one test.
type backend struct {
	name string
	new  func(t testing.TB) (store.Store, rowCounter)
}

// rowCounter counts rules, plans and audit rows.
type rowCounter func(t testing.TB) (rules, plans, audit int64)

// backends lists the stores every API test runs on: PostgreSQL (the real
// one) and the in-memory store of the local stack.
var backends = []backend{
	{"postgres", newPostgres},
	{"memory", newMemory},
}

func newMemory(testing.TB) (store.Store, rowCounter) {
	st := memory.New()
	return st, func(t testing.TB) (int64, int64, int64) {
		set, err := st.LoadAll(context.Background())
		if err != nil {
			t.Fatalf("LoadAll: %v", err)
		}
		rs, ps := set.Rules, set.Plans
		// The memory store has no audit table to count: sum the
		// histories of the rules and plans that exist.
		var audit int64
		for _, r := range rs {
			h, _ := st.RuleHistory(context.Background(), r.ID)
			audit += int64(len(h))
		}
		for _, p := range ps {
			h, _ := st.PlanHistory(context.Background(), p.Name)
			audit += int64(len(h))
		}
		return int64(len(rs)), int64(len(ps)), audit
	}
}

// newEnv builds a Service on b with its own Redis key prefix.
func newEnv(t testing.TB, b backend) *env {
	t.Helper()
	rdb := testenv.Redis(t)
	st, counts := b.new(t)
	prefix := testenv.Prefix(t, "admin")
	snaps := rulesync.NewSnapshots(rdb, rulesync.SnapshotsOptions{Prefix: prefix})
	pub := &countingPublisher{Snapshots: snaps}
	// Peeks under -race on a shared 2-core machine need more than the
	// authorizer's 25 ms.
	lim := limiter.New(rdb, limiter.Options{Prefix: prefix, Timeout: 2 * time.Second})
	testenv.DeleteKeys(t, rdb, prefix)
	var logs testenv.Buffer
	svc := admin.New(st, pub, lim, admin.Options{Logger: newJSONLogger(&logs)})
	e := &env{svc: svc, handle: lambdaHandler(svc), store: st, snapshots: snaps, lim: lim, logs: &logs}
	e.count = func(t testing.TB) rowCounts {
		r, p, a := counts(t)
		set, err := st.LoadAll(context.Background())
		if err != nil {
			t.Fatalf("LoadAll: %v", err)
		}
		return rowCounts{Rules: r, Plans: p, Audit: a, Version: set.Version, Published: pub.n.Load()}
	}
	return e
}

// forBackends runs f once per store.
func forBackends(t *testing.T, f func(t *testing.T, e *env)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, newEnv(t, b))
		})
	}
}

const testActor = "arn:aws:iam::123456789012:user/alice"

// event builds an API Gateway REST proxy event as API Gateway sends it for
// route ("PUT /rules/{id}") with raw (percent-encoded) path parameters.
func event(route string, params map[string]string, body string, headers ...string) events.APIGatewayProxyRequest {
	method, resource, _ := strings.Cut(route, " ")
	path := resource
	for k, v := range params {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	h := map[string]string{"Accept": "application/json", "Host": "abc123.execute-api.eu-west-1.amazonaws.com"}
	if body != "" {
		h["Content-Type"] = "application/json"
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			delete(h, headers[i])
			continue
		}
		h[headers[i]] = headers[i+1]
	}
	mh := map[string][]string{}
	for k, v := range h {
		mh[k] = []string{v}
	}
	return events.APIGatewayProxyRequest{
		Resource:          resource,
		Path:              path,
		HTTPMethod:        method,
		Headers:           h,
		MultiValueHeaders: mh,
		PathParameters:    params,
		Body:              body,
		RequestContext: events.APIGatewayProxyRequestContext{
			AccountID:    "123456789012",
			ResourcePath: resource,
			Stage:        "prod",
			RequestID:    "req-" + method + path,
			HTTPMethod:   method,
			APIID:        "adm1n4p1",
			Identity: events.APIGatewayRequestIdentity{
				AccountID: "123456789012",
				Caller:    "AIDAEXAMPLECALLER",
				UserArn:   testActor,
				SourceIP:  "203.0.113.7",
				UserAgent: "aws-cli/2",
			},
		},
	}
}

// withQuery adds query parameters to an event.
func withQuery(ev events.APIGatewayProxyRequest, kv ...string) events.APIGatewayProxyRequest {
	ev.QueryStringParameters = map[string]string{}
	ev.MultiValueQueryStringParameters = map[string][]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		ev.QueryStringParameters[kv[i]] = kv[i+1]
		ev.MultiValueQueryStringParameters[kv[i]] = append(ev.MultiValueQueryStringParameters[kv[i]], kv[i+1])
	}
	return ev
}

// do sends ev through the Lambda adapter.
func (e *env) do(t testing.TB, ev events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	t.Helper()
	resp, err := e.handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("handler(%s %s) error = %v, want nil (errors are responses)", ev.HTTPMethod, ev.Path, err)
	}
	if resp.StatusCode >= 500 {
		t.Errorf("%s %s = %d %s; a 5xx in tests means a bug; logs:\n%s", ev.HTTPMethod, ev.Path, resp.StatusCode, resp.Body, e.logs.String())
	}
	return resp
}

// want checks the status and decodes the body into v (when not nil).
func want(t testing.TB, resp events.APIGatewayProxyResponse, status int, v any) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, resp.Body)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(resp.Body), v); err != nil {
			t.Fatalf("decode body %q: %v", resp.Body, err)
		}
	}
}

// wantProblem checks a problem response and returns it.
func wantProblem(t testing.TB, resp events.APIGatewayProxyResponse, status int) httpapi.Problem {
	t.Helper()
	var p httpapi.Problem
	want(t, resp, status, &p)
	if ct := resp.Headers["Content-Type"]; ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	if p.Status != status || p.Title == "" || !strings.HasPrefix(p.Type, httpapi.TypeBase) {
		t.Errorf("problem = %+v, want status %d with a title and a type under %s", p, status, httpapi.TypeBase)
	}
	return p
}

// createRule posts body and returns the created rule.
func (e *env) createRule(t testing.TB, body string) rules.Rule {
	t.Helper()
	var r rules.Rule
	want(t, e.do(t, event(admin.RouteCreateRule, nil, body)), 201, &r)
	return r
}

func (e *env) createPlan(t testing.TB, body string) rules.Plan {
	t.Helper()
	var p rules.Plan
	want(t, e.do(t, event(admin.RouteCreatePlan, nil, body)), 201, &p)
	return p
}

func idParam(id string) map[string]string { return map[string]string{"id": id} }

func pathEscape(s string) string { return url.PathEscape(s) }
