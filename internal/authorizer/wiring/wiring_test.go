package wiring_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/authorizer/wiring"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/store/redisversion"
	"github.com/sluicehq/sluice/internal/testenv"
)

// newApp wires an App from env as a Lambda would.
func newApp(t *testing.T, env map[string]string) (*wiring.App, *testenv.Buffer) {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config.FromEnv: %v", err)
	}
	out := &testenv.Buffer{}
	app, err := wiring.New(context.Background(), cfg, wiring.Options{Out: out, Function: t.Name()})
	if err != nil {
		t.Fatalf("wiring.New: %v", err)
	}
	t.Cleanup(app.Close)
	return app, out
}

// adminService is the admin code path on the same database and Redis.
func adminService(t *testing.T, dbURL, redisURL string) *admin.Service {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rdb := testenv.Client(t, redisURL, nil)
	return admin.New(postgres.New(pool), redisversion.New(rdb, ""), limiter.New(rdb, limiter.Options{Timeout: time.Second}), admin.Options{})
}

// call makes one admin request and returns the response, failing the test
// on an unexpected status.
func call(t *testing.T, svc *admin.Service, method, path string, hdr http.Header, body any, want int) admin.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	if hdr == nil {
		hdr = http.Header{}
	}
	hdr.Set("Content-Type", "application/json")
	resp := svc.Handle(context.Background(), admin.Request{Method: method, Path: path, Header: hdr, Body: b, Actor: "wiring-test"})
	if resp.Status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.Status, resp.Body, want)
	}
	return resp
}

func decide(t *testing.T, app *wiring.App, key string) authorizer.Result {
	t.Helper()
	res, err := app.Decider.Decide(context.Background(), &authorizer.Request{
		API: "a1b2c3d4e5", Method: "GET", Resource: "/orders/{id}", Headers: map[string]string{"x-api-key": key},
	})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return res
}

// TestPropagation changes a rule through the admin code path and measures
// how long until the authorizer decides by the new numbers.
func TestPropagation(t *testing.T) {
	rURL := testenv.RedisURL(t)
	dbURL := pgtest.NewDatabase(t)
	svc := adminService(t, dbURL, rURL)
	created := call(t, svc, "POST", "/rules", nil, map[string]any{
		"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 1000, "period": "1m",
	}, http.StatusCreated)
	var r rules.Rule
	if err := json.Unmarshal(created.Body, &r); err != nil {
		t.Fatal(err)
	}

	app, _ := newApp(t, map[string]string{"REDIS_URL": rURL, "DATABASE_URL": dbURL, "REDIS_TIMEOUT": "1s"})
	if res := decide(t, app, "prop-key"); res.Rule != r.ID || res.Limit != 1000 {
		t.Fatalf("before the change: rule %s limit %d, want %s limit 1000", res.Rule, res.Limit, r.ID)
	}

	start := time.Now()
	call(t, svc, "PUT", "/rules/"+r.ID, http.Header{"If-Match": {created.Header.Get("Etag")}}, map[string]any{
		"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 7, "period": "1m",
	}, http.StatusOK)
	var took time.Duration
	for {
		if res := decide(t, app, "prop-key"); res.Limit == 7 {
			took = time.Since(start)
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the authorizer still applies the old limit %v after the change", time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("propagation, admin update to first decision by the new rule: %v", took)
	if took > 2*time.Second {
		t.Errorf("propagation took %v, want <= 2s", took)
	}
}

// proxy forwards TCP to a target and can be taken down and back up on the
// same address: a database that goes away and comes back.
type proxy struct {
	addr, target string
	mu           sync.Mutex
	l            net.Listener
	conns        map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: l.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	l.Close()
	t.Cleanup(p.down)
	return p
}

func (p *proxy) up(t *testing.T) {
	t.Helper()
	var l net.Listener
	var err error
	for range 100 { // the port may linger a moment after down
		if l, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("proxy up: %v", err)
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *proxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	_, _ = io.Copy(c, s)
	c.Close()
}

func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// viaProxy returns dbURL with its host replaced by the proxy's.
func viaProxy(t *testing.T, dbURL string) (*proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	u.Host = p.addr
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return p, u.String()
}

// TestDatabaseDown starts the authorizer with the database unreachable (it
// serves the default rule), brings the database up (the rules load on a
// later invocation), takes it down again (the last snapshot keeps serving
// through a failed reload) and up again (the pending change lands).
func TestDatabaseDown(t *testing.T) {
	rURL := testenv.RedisURL(t)
	dbURL := pgtest.NewDatabase(t)
	svc := adminService(t, dbURL, rURL)
	created := call(t, svc, "POST", "/rules", nil, map[string]any{
		"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 50, "period": "1m",
	}, http.StatusCreated)
	var r rules.Rule
	if err := json.Unmarshal(created.Body, &r); err != nil {
		t.Fatal(err)
	}

	p, proxied := viaProxy(t, dbURL)
	app, logs := newApp(t, map[string]string{
		"REDIS_URL": rURL, "DATABASE_URL": proxied, "REDIS_TIMEOUT": "1s", "DEFAULT_LIMIT": "3/1m",
	})
	if st := app.Cache.Stats(); st.Loaded || st.LastError == nil {
		t.Fatalf("cache stats with the database down at init = %+v, want not loaded, an error", st)
	}
	if res := decide(t, app, "db-key"); !res.Default || res.Limit != 3 {
		t.Fatalf("decision with the database down at init = default %v limit %d, want the default rule (3/1m)", res.Default, res.Limit)
	}
	if !strings.Contains(logs.String(), "initial rules load failed") {
		t.Errorf("no log line for the failed initial load:\n%s", logs.String())
	}

	p.up(t)
	waitFor(t, 10*time.Second, "rules loaded once the database is up", func() bool { return decide(t, app, "db-key").Rule == r.ID })

	p.down()
	call(t, svc, "PUT", "/rules/"+r.ID, http.Header{"If-Match": {created.Header.Get("Etag")}}, map[string]any{
		"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 9, "period": "1m",
	}, http.StatusOK)
	waitFor(t, 10*time.Second, "a failed reload", func() bool {
		decide(t, app, "db-key")
		return app.Cache.Stats().Failures > 1
	})
	if res := decide(t, app, "db-key"); res.Rule != r.ID || res.Limit != 50 {
		t.Errorf("decision with the database down later = rule %s limit %d, want the last snapshot's %s limit 50", res.Rule, res.Limit, r.ID)
	}

	p.up(t)
	waitFor(t, 40*time.Second, "the pending change once the database is back", func() bool { return decide(t, app, "db-key").Limit == 9 })
	if st := app.Cache.Stats(); st.LastError != nil {
		t.Errorf("cache LastError after recovery = %v, want nil", st.LastError)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
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
	res, err := app.Decider.Decide(context.Background(), &authorizer.Request{API: "x", Method: "GET", Resource: "/", Headers: map[string]string{"x-api-key": "k"}})
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
	wiring.LogReload(slog.New(slog.NewJSONHandler(&buf, nil)))(7, snap)

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
	if l := lines[0]; l["msg"] != "rules loaded" || l["version"] != 7.0 || l["rules"] != 1.0 || l["skipped"] != 1.0 {
		t.Errorf("first line = %v, want rules loaded, version 7, 1 rule, 1 skipped", l)
	}
	if l := lines[1]; l["level"] != "WARN" || l["msg"] != "rule skipped" || l["id"] != "r-gold" || l["kind"] != rules.KindRule {
		t.Errorf("second line = %v, want a WARN rule skipped for r-gold", l)
	}
}
