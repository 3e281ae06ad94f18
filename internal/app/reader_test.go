package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// readerRoutes are the admin routes the stack serves on the read-only
// database role (infra's adminAccess: every route but the rule and plan
// writes), each with a path to call and the status that proves it ran.
var readerRoutes = []struct {
	route, path string
	body        string
	want        int
	redis       bool // the route also needs Redis (app.AdminFull)
}{
	{admin.RouteListRules, "/rules", "", http.StatusOK, false},
	{admin.RouteGetRule, "/rules/{id}", "", http.StatusOK, false},
	{admin.RouteRuleHistory, "/rules/{id}/history", "", http.StatusOK, false},
	{admin.RouteListPlans, "/plans", "", http.StatusOK, false},
	{admin.RouteGetPlan, "/plans/gold", "", http.StatusOK, false},
	{admin.RoutePlanHistory, "/plans/gold/history", "", http.StatusOK, false},
	{admin.RouteSubjectLimits, "/subjects/alice/limits?api=a1b2c3d4e5", "", http.StatusOK, true},
	{admin.RouteResetSubject, "/subjects/alice/buckets", "", http.StatusNoContent, true},
	{admin.RouteUsage, "/usage", `{"subject":"alice","api":"a1b2c3d4e5","route":"GET /orders","cost":1}`, http.StatusOK, true},
}

// TestReaderRole: the migrate function gives the read-only role of
// migration 00007 its login (DB_READER_SECRET_ARN); every admin route the
// stack puts on that role answers as it should when its function connects
// as it (app.AdminRead, or app.AdminFull for the bucket routes); and the role
// can write nothing: a rule write through it fails, and so does SQL.
func TestReaderRole(t *testing.T) {
	ctx := t.Context()
	dbURL := pgtest.NewEmptyDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	// One password per run: a run of another package may have set
	// another on the shared server's role.
	password := "reader-" + testenv.Random(t)
	m := &Migrator{db: db, log: slog.New(slog.DiscardHandler), reader: &config.Credentials{Username: "sluice_reader", Password: config.Secret(password)}}
	if _, err := m.Handle(ctx, json.RawMessage(`{}`)); err != nil {
		t.Fatalf("Migrator.Handle with reader credentials: %v", err)
	}

	// What the owner wrote, for the reads to find.
	owner := postgres.New(pool)
	if _, err := owner.CreatePlan(ctx, rules.Plan{Name: "gold", Limit: 10, Period: rules.Period(time.Minute)}, "test"); err != nil {
		t.Fatalf("CreatePlan: %v", err)
	}
	rule, err := owner.CreateRule(ctx, rules.Rule{API: "a1b2c3d4e5", Route: "*", Subject: "*", Limit: new(int64(5)), Period: rules.Period(time.Minute)}, "test")
	if err != nil {
		t.Fatalf("CreateRule: %v", err)
	}

	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("sluice_reader", password)
	readerURL := u.String()

	read, err := NewAdmin(ctx, config.Config{DatabaseURL: config.Secret(readerURL)}, AdminRead, Options{Out: io.Discard})
	if err != nil {
		t.Fatalf("NewAdmin(AdminRead) as sluice_reader: %v", err)
	}
	t.Cleanup(read.Close)
	if read.Redis != nil {
		t.Error("NewAdmin(AdminRead) built a Redis client: the read-only functions get no Redis")
	}
	buckets, err := NewAdmin(ctx, config.Config{DatabaseURL: config.Secret(readerURL), RedisURL: config.Secret(testenv.RedisURL(t)),
		RedisPrefix: testenv.Prefix(t, "reader")}, AdminFull, Options{Out: io.Discard})
	if err != nil {
		t.Fatalf("NewAdmin(AdminFull) as sluice_reader: %v", err)
	}
	t.Cleanup(buckets.Close)

	for _, rt := range readerRoutes {
		a := read
		if rt.redis {
			a = buckets
		}
		method, _, _ := bytes.Cut([]byte(rt.route), []byte(" "))
		path := string(bytes.ReplaceAll([]byte(rt.path), []byte("{id}"), []byte(rule.ID)))
		status, body := serve(a.Service, rt.route, string(method), path, rt.body)
		if status != rt.want {
			t.Errorf("%s as sluice_reader: %s %s = %d %s, want %d", rt.route, method, path, status, body, rt.want)
		}
	}

	// A write on the read-only role fails, whatever the code asks.
	if status, body := serve(read.Service, admin.RouteCreateRule, "POST", "/rules",
		`{"api":"a1b2c3d4e5","route":"*","subject":"*","limit":1,"period":"1m"}`); status != http.StatusInternalServerError {
		t.Errorf("POST /rules as sluice_reader = %d %s, want 500 (permission denied)", status, body)
	}
	conn, err := pgx.Connect(ctx, readerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, stmt := range []string{
		`DELETE FROM rules`,
		`UPDATE plans SET name = name`,
		`CREATE TABLE sneaky (x int)`,
	} {
		_, err := conn.Exec(ctx, stmt)
		if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s as sluice_reader: %v, want SQLSTATE 42501 (insufficient privilege)", stmt, err)
		}
	}
}

// TestReaderRoleMissing: with reader credentials for a role that does not
// exist, the migration fails and says why, rather than leaving the
// read-only functions unable to connect.
func TestReaderRoleMissing(t *testing.T) {
	dbURL := pgtest.NewEmptyDatabase(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	m := &Migrator{db: db, log: slog.New(slog.DiscardHandler), reader: &config.Credentials{Username: "no_such_reader_" + testenv.Random(t), Password: "x'y"}}
	_, err = m.Handle(t.Context(), json.RawMessage(`{}`))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("does not exist")) {
		t.Fatalf("Migrator.Handle for a missing role = %v, want an error saying it does not exist", err)
	}
	if bytes.Contains([]byte(err.Error()), []byte("x'y")) {
		t.Errorf("the error %q holds the password", err)
	}
}

// serve sends one request to the admin handler of route alone, as the
// route's function serves it.
func serve(svc *admin.Service, route, method, path, body string) (int, string) {
	r := httptest.NewRequest(method, path, bytes.NewReader([]byte(body)))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	svc.Handler(admin.HandlerOptions{Routes: []string{route}}).ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestAdminHandlerReleasesConnections: an admin function holds no
// database connection once an invocation has returned, so that a frozen
// Lambda environment keeps no Aurora cluster from pausing at 0 ACU (the
// small profile) and no connection slot from the next caller.
func TestAdminHandlerReleasesConnections(t *testing.T) {
	a, err := NewAdmin(t.Context(), config.Config{DatabaseURL: config.Secret(pgtest.NewDatabase(t))}, AdminRead, Options{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	raw, err := os.ReadFile("../../events/admin-read-rules-list.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	resp, err := a.Handler(admin.RouteListRules)(t.Context(), ev)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /rules = %d %s, %v; want 200", resp.StatusCode, resp.Body, err)
	}
	if n := a.pool.Stat().TotalConns(); n != 0 {
		t.Errorf("after the invocation the pool holds %d connections, want 0", n)
	}
}
