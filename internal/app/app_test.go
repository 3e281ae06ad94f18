package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decider"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// prefixes holds each test's Redis key prefix, so that the apps a test
// builds (admin and authorizer) share one, and no other test's.
var prefixes sync.Map // *testing.T → string

// prefixFor returns t's Redis key prefix, whose keys go when t ends.
func prefixFor(t *testing.T) string {
	t.Helper()
	if p, ok := prefixes.Load(t); ok {
		return p.(string)
	}
	p := testenv.Prefix(t, "app")
	testenv.DeleteKeys(t, testenv.Redis(t), p)
	prefixes.Store(t, p)
	t.Cleanup(func() { prefixes.Delete(t) })
	return p
}

// testConfig is env as a Lambda's configuration, with its Redis keys
// under the test's own prefix (REDIS_PREFIX) unless env names one, and a
// buffer for its log and metric lines.
func testConfig(t *testing.T, env map[string]string) (config.Config, app.Options, *testenv.Buffer) {
	t.Helper()
	if _, ok := env["REDIS_PREFIX"]; !ok {
		env = maps.Clone(env)
		env["REDIS_PREFIX"] = prefixFor(t)
	}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config.FromEnv: %v", err)
	}
	out := &testenv.Buffer{}
	return cfg, app.Options{Out: out, Function: "test-function"}, out
}

// newApp builds the decision path from env as the authorizer Lambda does.
func newApp(t *testing.T, env map[string]string) (*app.Decider, *testenv.Buffer) {
	t.Helper()
	cfg, o, out := testConfig(t, env)
	a, err := app.NewDecider(context.Background(), cfg, o)
	if err != nil {
		t.Fatalf("app.NewDecider: %v", err)
	}
	t.Cleanup(a.Close)
	return a, out
}

// newAdmin builds the full admin API from env as the admin-write and
// admin-subjects Lambdas do.
func newAdmin(t *testing.T, env map[string]string) (*app.Admin, *testenv.Buffer) {
	t.Helper()
	cfg, o, out := testConfig(t, env)
	a, err := app.NewAdmin(context.Background(), cfg, app.AdminFull, o)
	if err != nil {
		t.Fatalf("app.NewAdmin: %v", err)
	}
	t.Cleanup(a.Close)
	return a, out
}

// adminService is the admin code path on the same database and Redis, as
// the admin Lambdas build it.
func adminService(t *testing.T, dbURL, redisURL string) *admin.Service {
	t.Helper()
	a, _ := newAdmin(t, map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL})
	return a.Service
}

// call makes one admin request and returns the response, failing the test
// on an unexpected status.
func call(t *testing.T, svc *admin.Service, method, path string, hdr http.Header, body any, want int) adminResponse {
	t.Helper()
	b, _ := json.Marshal(body)
	if hdr == nil {
		hdr = http.Header{}
	}
	hdr.Set("Content-Type", "application/json")
	resp := serveAdmin(svc, method, path, hdr, b, "wiring-test")
	if resp.Status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.Status, resp.Body, want)
	}
	return resp
}

// adminResponse is what the admin handler answered.
type adminResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// serveAdmin sends one request to the admin http.Handler, in process, as
// sluice local mounts it; actor is recorded in the audit log.
func serveAdmin(svc *admin.Service, method, path string, hdr http.Header, body []byte, actor string) adminResponse {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	maps.Copy(r.Header, hdr)
	w := httptest.NewRecorder()
	svc.Handler(admin.HandlerOptions{Actor: func(*http.Request) string { return actor }}).ServeHTTP(w, r)
	return adminResponse{Status: w.Code, Header: w.Header(), Body: w.Body.Bytes()}
}

// createRule creates an API-wide rule of limit a minute for every subject
// through the admin code path, and returns it with its ETag.
func createRule(t *testing.T, svc *admin.Service, limit int64) (rules.Rule, string) {
	t.Helper()
	created := call(t, svc, "POST", "/rules", nil, map[string]any{
		"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": limit, "period": "1m",
	}, http.StatusCreated)
	var r rules.Rule
	if err := json.Unmarshal(created.Body, &r); err != nil {
		t.Fatal(err)
	}
	return r, created.Header.Get("Etag")
}

func decide(t *testing.T, a *app.Decider, key string) authorizer.Result {
	t.Helper()
	res, err := a.Core.Decide(context.Background(), &authorizer.Request{
		API: "a1b2c3d4e5", Method: "GET", Resource: "/orders/{id}", Headers: map[string]string{"x-api-key": key},
	})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return res
}

// TestAdmin builds the admin API as the admin Lambdas do and serves one
// route through the proxy-event handler (an Admin has no decision path to
// build: its type holds none).
func TestAdmin(t *testing.T) {
	a, logs := newAdmin(t, map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "REDIS_URL": testenv.RedisURL(t)})
	h := a.Handler(admin.RouteListPlans)
	resp, err := h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "GET", Resource: "/plans", Path: "/plans"})
	if err != nil || resp.StatusCode != 200 || resp.Body != "{\"plans\":[]}\n" {
		t.Errorf("GET /plans = %d %q, %v; want 200 and no plans", resp.StatusCode, resp.Body, err)
	}
	resp, _ = h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "DELETE", Resource: "/plans", Path: "/plans"})
	if resp.StatusCode != 405 {
		t.Errorf("DELETE on the GET /plans function = %d, want 405", resp.StatusCode)
	}
	if !strings.Contains(logs.String(), `"function":"test-function"`) {
		t.Errorf("admin log lines lack the function name:\n%s", logs.String())
	}
}

// TestPropagation changes a rule through the admin code path and measures
// how long until the authorizer decides by the new numbers.
func TestPropagation(t *testing.T) {
	rURL := testenv.RedisURL(t)
	dbURL := pgtest.NewDatabase(t)
	svc := adminService(t, dbURL, rURL)
	r, etag := createRule(t, svc, 1000)

	app, _ := newApp(t, map[string]string{"REDIS_URL": rURL, "DATABASE_URL": dbURL, "REDIS_TIMEOUT": "1s"})
	if res := decide(t, app, "prop-key"); res.Rule != r.ID || res.Limit != 1000 {
		t.Fatalf("before the change: rule %s limit %d, want %s limit 1000", res.Rule, res.Limit, r.ID)
	}

	start := time.Now()
	call(t, svc, "PUT", "/rules/"+r.ID, http.Header{"If-Match": {etag}}, map[string]any{
		"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 7, "period": "1m",
	}, http.StatusOK)
	testenv.Await(t, 5*time.Second, 5*time.Millisecond, "the authorizer applies the new limit", func() bool {
		return decide(t, app, "prop-key").Limit == 7
	})
	took := time.Since(start)
	t.Logf("propagation, admin update to first decision by the new rule: %v", took)
	if took > 2*time.Second {
		t.Errorf("propagation took %v, want <= 2s", took)
	}
}

// viaProxy returns dbURL with its host replaced by the proxy's.
func viaProxy(t *testing.T, dbURL string) (*testenv.Proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.NewProxy(t, u.Host)
	u.Host = p.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return p, u.String()
}

// TestDatabaseDown starts the authorizer with the database unreachable:
// it loads the snapshot the admin path published to Redis and enforces its
// rules; a later write (the admin reaches the database, the authorizer does
// not) reaches it through Redis too; and when the database is back, the
// full reload from it succeeds. TestColdStartNeitherSource covers a cold
// start with no snapshot either.
func TestDatabaseDown(t *testing.T) {
	rURL := testenv.RedisURL(t)
	dbURL := pgtest.NewDatabase(t)
	svc := adminService(t, dbURL, rURL)
	r, etag := createRule(t, svc, 50)

	p, proxied := viaProxy(t, dbURL)
	app, logs := newApp(t, map[string]string{
		"REDIS_URL": rURL, "DATABASE_URL": proxied, "REDIS_TIMEOUT": "1s", "DEFAULT_LIMIT": "3/1m", "RULES_REFRESH": "2s",
	})
	if st := app.Cache.Stats(); !st.Loaded || st.Origin != rulesync.FromSnapshot || st.StoreLoads != 0 {
		t.Fatalf("cache stats after a cold start with the database down = %+v, want loaded from the snapshot, no store load", st)
	}
	if res := decide(t, app, "db-key"); res.Default || res.Rule != r.ID || res.Limit != 50 {
		t.Fatalf("decision after a cold start with the database down = rule %s limit %d (default %v), want the snapshot's %s limit 50", res.Rule, res.Limit, res.Default, r.ID)
	}
	if out := logs.String(); !strings.Contains(out, `"message":"rules loaded"`) || !strings.Contains(out, `"from":"snapshot"`) || strings.Contains(out, "no rules loaded") {
		t.Errorf("want a rules-loaded line from the snapshot and no no-rules line:\n%s", out)
	}

	call(t, svc, "PUT", "/rules/"+r.ID, http.Header{"If-Match": {etag}}, map[string]any{
		"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 9, "period": "1m",
	}, http.StatusOK)
	waitFor(t, 5*time.Second, "the change through Redis, the database still down", func() bool { return decide(t, app, "db-key").Limit == 9 })

	// The full reload (RULES_REFRESH 2s) fails while the database is down,
	// keeps the snapshot, and succeeds once it is back.
	waitFor(t, 10*time.Second, "a failed full reload", func() bool {
		decide(t, app, "db-key")
		return app.Cache.Stats().Failures > 0
	})
	if res := decide(t, app, "db-key"); res.Limit != 9 {
		t.Errorf("decision after a failed full reload = limit %d, want 9", res.Limit)
	}
	p.Up(t)
	waitFor(t, 40*time.Second, "a full reload from the database once it is back", func() bool {
		decide(t, app, "db-key")
		st := app.Cache.Stats()
		return st.Origin == rulesync.FromStore && st.LastError == nil
	})
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	t.Logf("%s: %v", what, testenv.Await(t, d, 20*time.Millisecond, what, cond).Round(time.Millisecond))
}

// TestRedisDown wires the authorizer to a Redis nothing listens on: it
// starts, and fails open (the default failure mode) with a log line.
func TestRedisDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "redis://" + l.Addr().String() + "/0"
	l.Close()
	app, logs := newApp(t, map[string]string{"REDIS_URL": closed, "DATABASE_URL": pgtest.NewDatabase(t), "DEFAULT_LIMIT": "10/1m"})
	res, err := app.Core.Decide(context.Background(), &authorizer.Request{API: "x", Method: "GET", Resource: "/", Headers: map[string]string{"x-api-key": "k"}})
	if err == nil || !res.Allowed || !res.FailOpen {
		t.Fatalf("Decide with Redis down = allowed %v failOpen %v, %v; want fail-open with an error", res.Allowed, res.FailOpen, err)
	}
	if !strings.Contains(logs.String(), "redis unreachable at init") {
		t.Errorf("no init log line for Redis down:\n%s", logs.String())
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("Decide error = %v, want a Redis error", err)
	}
}

// TestLogReloadReportsSkippedRules: a rule the snapshot leaves out (here it
// names a plan that does not exist) is logged at warn with its id, since
// its requests silently fall to a broader rule.
func TestLogReloadReportsSkippedRules(t *testing.T) {
	limit := int64(5)
	snap := rules.NewSnapshot([]rules.Rule{
		{ID: "r-ok", API: "a", Route: "*", Subject: "*", Limit: &limit, Period: rules.Period(time.Minute)},
		{ID: "r-gold", API: "a", Route: "*", Subject: "vip", Plan: "gold"},
	}, nil, rules.SnapshotOptions{})
	var buf strings.Builder
	decider.LogReload(slog.New(slog.NewJSONHandler(&buf, nil)))(7, rulesync.FromSnapshot, snap)

	var lines []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("LogReload wrote %d lines, want 2 (loaded, skipped):\n%s", len(lines), buf.String())
	}
	if l := lines[0]; l["msg"] != "rules loaded" || l["version"] != 7.0 || l["from"] != "snapshot" || l["rules"] != 1.0 || l["skipped"] != 1.0 {
		t.Errorf("first line = %v, want rules loaded, version 7 from the snapshot, 1 rule, 1 skipped", l)
	}
	if l := lines[1]; l["level"] != "WARN" || l["msg"] != "rule skipped" || l["id"] != "r-gold" || l["kind"] != rules.KindRule {
		t.Errorf("second line = %v, want a WARN rule skipped for r-gold", l)
	}
}
