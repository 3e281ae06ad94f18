package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// sampleDir holds the sample events, one per file, named by function.
const sampleDir = "../events"

// kind is what a sample file decodes into, by file-name prefix (longest
// prefix first).
type kind int

const (
	kindRESTAuthorizer kind = iota + 1
	kindHTTPAuthorizer
	kindCheckURL
	kindCheckProxy
	kindAdmin
	kindMigrate
)

func kindOf(name string) kind {
	switch {
	case strings.HasPrefix(name, "authorizer-rest"):
		return kindRESTAuthorizer
	case strings.HasPrefix(name, "authorizer-http"):
		return kindHTTPAuthorizer
	case strings.HasPrefix(name, "check-url"):
		return kindCheckURL
	case strings.HasPrefix(name, "check"):
		return kindCheckProxy
	case strings.HasPrefix(name, "admin-"):
		return kindAdmin
	case strings.HasPrefix(name, "migrate"):
		return kindMigrate
	}
	return 0
}

// readSample returns the sample file name in sampleDir.
func readSample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sampleDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeStrict decodes the sample name into v, refusing fields v does not
// have: a sample holds only what the aws-lambda-go type knows.
func decodeStrict(t *testing.T, name string, v any) []byte {
	t.Helper()
	raw := readSample(t, name)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s into %T: %v", name, v, err)
	}
	return raw
}

// samples lists the file names of the samples, the authorizer and check
// ones first (the admin ones change the rules).
func samples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sampleDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample events in %s: %v", sampleDir, err)
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = filepath.Base(f)
	}
	sort.SliceStable(names, func(i, j int) bool {
		return (kindOf(names[i]) == kindAdmin) != (kindOf(names[j]) == kindAdmin) && kindOf(names[j]) == kindAdmin
	})
	return names
}

// seeded is a fresh database with the rules the samples are checked
// against: on every API, 100 a minute API-wide and 5 a minute on
// GET /orders/{id}.
type seeded struct {
	dbURL          string
	apiRule, route rules.Rule
}

// redisPrefix returns a Redis key prefix of the test's own (REDIS_PREFIX),
// whose keys go when it ends: the rules snapshot an admin function
// publishes is then read by this test's authorizers only.
func redisPrefix(t testing.TB) string {
	t.Helper()
	p := testenv.Prefix(t, "e2e")
	testenv.DeleteKeys(t, testenv.Redis(t), p)
	return p
}

func seed(t testing.TB) seeded {
	t.Helper()
	s := seeded{dbURL: pgtest.NewDatabase(t)}
	pool, err := pgxpool.New(context.Background(), s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := postgres.New(pool)
	ctx := context.Background()
	if s.apiRule, err = store.CreateRule(ctx, rules.Rule{API: "*", Route: "*", Subject: "*", Limit: new(int64(100)), Period: rules.Period(time.Minute)}, "test"); err != nil {
		t.Fatalf("seed API-wide rule: %v", err)
	}
	if s.route, err = store.CreateRule(ctx, rules.Rule{API: "*", Route: "GET /orders/{id}", Subject: "*", Limit: new(int64(5)), Period: rules.Period(time.Minute)}, "test"); err != nil {
		t.Fatalf("seed route rule: %v", err)
	}
	return s
}

// TestHandlers runs every sample but migrate's through the handler its
// function uses, wired from configuration as the Lambdas are, against real
// Redis and PostgreSQL.
func TestHandlers(t *testing.T) {
	redisURL := testenv.RedisURL(t)
	s := seed(t)
	out := &testenv.Buffer{}
	h := wire(t, map[string]string{"REDIS_URL": redisURL, "REDIS_PREFIX": redisPrefix(t), "DATABASE_URL": s.dbURL, "REDIS_TIMEOUT": "1s"}, out)
	if st := h.rules(); !st.Loaded || st.Rules != 2 {
		t.Fatalf("rules cache after init = %+v, want the 2 seeded rules loaded", st)
	}
	ctx := context.Background()

	for _, name := range samples(t) {
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			switch kindOf(name) {
			case kindRESTAuthorizer:
				var ev events.APIGatewayCustomAuthorizerRequestTypeRequest
				decodeStrict(t, name, &ev)
				resp, err := h.rest(ctx, ev)
				checkREST(t, name, ev, resp, err, s, "")
			case kindHTTPAuthorizer:
				var ev events.APIGatewayV2CustomAuthorizerV2Request
				decodeStrict(t, name, &ev)
				resp, err := h.http(ctx, ev)
				if err != nil || !resp.IsAuthorized || resp.Context["rule"] != s.route.ID {
					t.Errorf("HTTP(%s) = %+v, %v; want authorized by rule %s", name, resp, err, s.route.ID)
				}
			case kindCheckProxy:
				var ev events.APIGatewayProxyRequest
				decodeStrict(t, name, &ev)
				resp, err := h.checkProxy(ctx, ev)
				checkCheck(t, name, resp.StatusCode, resp.Headers, resp.Body, err, s)
			case kindCheckURL:
				var ev events.LambdaFunctionURLRequest
				decodeStrict(t, name, &ev)
				resp, err := h.checkURL(ctx, ev)
				checkCheck(t, name, resp.StatusCode, resp.Headers, resp.Body, err, s)
			case kindAdmin:
				var ev events.APIGatewayProxyRequest
				decodeStrict(t, name, &ev)
				resp, err := h.admin(ctx, ev)
				if err != nil || resp.StatusCode < 200 || resp.StatusCode >= 500 {
					t.Errorf("admin handler(%s) = %d %s, %v; want a 2xx-4xx answer", name, resp.StatusCode, resp.Body, err)
				}
			case kindMigrate:
				t.Skip("the handler is package main (functions/migrate): TestEmulator runs this sample through the built binary")
			default:
				t.Errorf("%s: no handler for this file name; name it after its function (authorizer-rest*, authorizer-http*, check*, check-url*, admin-*, migrate*)", name)
			}
		})
	}
	if strings.Contains(out.String(), `"level":"ERROR"`) {
		t.Errorf("error lines logged:\n%s", out.String())
	}
}

// checkREST checks an authorizer-rest sample's reply: the no-key sample is
// Unauthorized unless sources include ip (anonIP is then its subject);
// others are allowed for the method ARN.
func checkREST(t *testing.T, name string, ev events.APIGatewayCustomAuthorizerRequestTypeRequest, resp events.APIGatewayCustomAuthorizerResponse, err error, s seeded, anonIP string) {
	t.Helper()
	if strings.Contains(name, "nokey") && anonIP == "" {
		if err == nil || err.Error() != "Unauthorized" {
			t.Errorf("REST(%s) = %+v, %v; want the error Unauthorized", name, resp, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("REST(%s) error: %v", name, err)
	}
	if len(resp.PolicyDocument.Statement) != 1 || resp.PolicyDocument.Statement[0].Effect != "Allow" ||
		resp.PolicyDocument.Statement[0].Resource[0] != ev.MethodArn {
		t.Errorf("REST(%s) policy = %+v, want Allow for %s", name, resp.PolicyDocument, ev.MethodArn)
	}
	subject := ev.Headers["X-Api-Key"]
	if anonIP != "" && strings.Contains(name, "nokey") {
		subject = anonIP
	}
	if want := limiter.SubjectHash(subject); resp.PrincipalID != want {
		t.Errorf("REST(%s) principalId = %q, want SubjectHash(%q) = %q", name, resp.PrincipalID, subject, want)
	}
	for _, k := range []string{"limit", "remaining", "reset", "retryAfter", "rateLimitPolicy", "rateLimit", "rule", "failOpen"} {
		if _, ok := resp.Context[k]; !ok {
			t.Errorf("REST(%s) context has no %q: %v", name, k, resp.Context)
		}
	}
}

// checkCheck checks a check sample's reply: the invalid one is a 400
// problem, the others 200 with the numbers of the rule they hit.
func checkCheck(t *testing.T, name string, status int, hdr map[string]string, body string, err error, s seeded) {
	t.Helper()
	if err != nil {
		t.Fatalf("check(%s) error: %v", name, err)
	}
	if strings.Contains(name, "invalid") {
		if status != 400 || hdr["Content-Type"] != "application/problem+json" {
			t.Errorf("check(%s) = %d %v %s, want 400 problem+json", name, status, hdr, body)
		}
		return
	}
	var got struct {
		Allowed   bool
		Limit     int64
		Remaining int64
		Rule      string
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || status != 200 || !got.Allowed {
		t.Fatalf("check(%s) = %d %s, %v; want 200 allowed", name, status, body, err)
	}
	want := s.route
	if strings.Contains(body, s.apiRule.ID) {
		want = s.apiRule
	}
	if got.Rule != want.ID || got.Limit != *want.Limit || hdr["RateLimit-Policy"] == "" || hdr["RateLimit"] == "" {
		t.Errorf("check(%s) = %d %v %s; want rule %s with limit %d and RateLimit fields", name, status, hdr, body, want.ID, *want.Limit)
	}
}
