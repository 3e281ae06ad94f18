package awsenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestFromEnvReadsTheDatabase: a Limiter built from the authorizer's own
// environment finds a rule that is only in PostgreSQL (no snapshot was
// ever published to Redis), as the authorizer Lambda does, and limits a
// request through the middleware by it. ratelimit.New, which reads Redis
// alone, does not see it: the database is awsenv's to read.
func TestFromEnvReadsTheDatabase(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := postgres.New(pool).CreateRule(t.Context(), rules.Rule{API: "orders", Route: "*", Subject: "*",
		Limit: new(int64(0)), Period: rules.Period(time.Minute)}, "awsenv-test"); err != nil {
		t.Fatal(err)
	}
	prefix := testenv.Prefix(t, "awsenv")
	env := map[string]string{"REDIS_URL": testenv.RedisURL(t), "DATABASE_URL": dbURL, "REDIS_PREFIX": prefix,
		"SUBJECT_SOURCES": "header:x-api-key", "SUBJECT_HMAC_KEY": "awsenv-test-subject-key", "LOG_LEVEL": "error"}
	rl, err := fromEnv(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	t.Cleanup(rl.Close)
	only, err := ratelimit.New(context.Background(), ratelimit.Options{RedisURL: env["REDIS_URL"], Prefix: prefix,
		SubjectKey: env["SUBJECT_HMAC_KEY"], Out: &testenv.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(only.Close)
	for _, tt := range []struct {
		name string
		rl   *ratelimit.Limiter
		want int
	}{{"awsenv.FromEnv", rl, http.StatusTooManyRequests}, {"ratelimit.New, Redis alone", only, http.StatusOK}} {
		r := httptest.NewRequest("GET", "/orders/1", nil)
		r.Header.Set("X-Api-Key", "k")
		w := httptest.NewRecorder()
		tt.rl.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ratelimit.HandlerOptions{API: "orders"}).ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("%s: GET /orders/1 = %d %s, want %d", tt.name, w.Code, strings.TrimSpace(w.Body.String()), tt.want)
		}
	}
}

// TestFromEnvRefusesBadSettings: every problem is reported at once, naming
// the variable.
func TestFromEnvRefusesBadSettings(t *testing.T) {
	env := map[string]string{"REDIS_URL": "redis://127.0.0.1:1", "DEFAULT_LIMIT": "lots", "SUBJECT_SOURCES": "principal,header:x"}
	_, err := fromEnv(context.Background(), func(k string) string { return env[k] })
	for _, want := range []string{"DEFAULT_LIMIT", "SUBJECT_SOURCES"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("FromEnv error = %v, want it to name %s", err, want)
		}
	}
}
