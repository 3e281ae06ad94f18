package events_test

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

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/admin"
	adminapigw "github.com/sluicehq/sluice/internal/admin/apigw"
	"github.com/sluicehq/sluice/internal/authorizer/wiring"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/store/redisversion"
	"github.com/sluicehq/sluice/internal/testenv"
)

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

func kindOf(file string) kind {
	base := filepath.Base(file)
	switch {
	case strings.HasPrefix(base, "authorizer-rest"):
		return kindRESTAuthorizer
	case strings.HasPrefix(base, "authorizer-http"):
		return kindHTTPAuthorizer
	case strings.HasPrefix(base, "check-url"):
		return kindCheckURL
	case strings.HasPrefix(base, "check"):
		return kindCheckProxy
	case strings.HasPrefix(base, "admin-"):
		return kindAdmin
	case strings.HasPrefix(base, "migrate"):
		return kindMigrate
	}
	return 0
}

// decodeStrict decodes a sample into v, refusing fields v does not have:
// a sample holds only what the aws-lambda-go type knows.
func decodeStrict(t *testing.T, file string, v any) []byte {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s into %T: %v", file, v, err)
	}
	return raw
}

// samples lists events/*.json, the authorizer and check samples first (the
// admin ones change the rules).
func samples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample events: %v", err)
	}
	sort.SliceStable(files, func(i, j int) bool {
		return (kindOf(files[i]) == kindAdmin) != (kindOf(files[j]) == kindAdmin) && kindOf(files[j]) == kindAdmin
	})
	return files
}

// seeded is a fresh database with the rules the samples are checked
// against: on every API, 100 a minute API-wide and 5 a minute on
// GET /orders/{id}.
type seeded struct {
	dbURL          string
	pool           *pgxpool.Pool
	store          *postgres.Store
	apiRule, route rules.Rule
}

func seed(t testing.TB) seeded {
	t.Helper()
	s := seeded{dbURL: pgtest.NewDatabase(t)}
	pool, err := pgxpool.New(context.Background(), s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s.pool, s.store = pool, postgres.New(pool)
	ctx := context.Background()
	if s.apiRule, err = s.store.CreateRule(ctx, rules.Rule{API: "*", Route: "*", Subject: "*", Limit: ptr[int64](100), Period: rules.Period(time.Minute)}, "test"); err != nil {
		t.Fatalf("seed API-wide rule: %v", err)
	}
	if s.route, err = s.store.CreateRule(ctx, rules.Rule{API: "*", Route: "GET /orders/{id}", Subject: "*", Limit: ptr[int64](5), Period: rules.Period(time.Minute)}, "test"); err != nil {
		t.Fatalf("seed route rule: %v", err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// TestSamples decodes every sample into its type and runs it through the
// handler its function uses, wired from configuration as the Lambdas are,
// against real Redis and PostgreSQL.
func TestSamples(t *testing.T) {
	redisURL := testenv.RedisURL(t)
	s := seed(t)
	env := map[string]string{"REDIS_URL": redisURL, "DATABASE_URL": s.dbURL, "REDIS_TIMEOUT": "1s"}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config.FromEnv: %v", err)
	}
	out := &testenv.Buffer{}
	app, err := wiring.New(context.Background(), cfg, wiring.Options{Out: out, Function: "events-test"})
	if err != nil {
		t.Fatalf("wiring.New: %v", err)
	}
	t.Cleanup(app.Close)
	if st := app.Cache.Stats(); !st.Loaded || st.Rules != 2 {
		t.Fatalf("rules cache after init = %+v, want the 2 seeded rules loaded", st)
	}

	rdbVersion, lim := adminDeps(t, redisURL)
	svc := admin.New(s.store, rdbVersion, lim, admin.Options{})
	adminHandler := adminapigw.Handler(svc, "")
	ctx := context.Background()

	for _, file := range samples(t) {
		t.Run(strings.TrimSuffix(file, ".json"), func(t *testing.T) {
			switch kindOf(file) {
			case kindRESTAuthorizer:
				var ev events.APIGatewayCustomAuthorizerRequestTypeRequest
				decodeStrict(t, file, &ev)
				resp, err := app.Authorizer.REST(ctx, ev)
				checkREST(t, file, ev, resp, err, s, "")
			case kindHTTPAuthorizer:
				var ev events.APIGatewayV2CustomAuthorizerV2Request
				decodeStrict(t, file, &ev)
				resp, err := app.Authorizer.HTTP(ctx, ev)
				if err != nil || !resp.IsAuthorized || resp.Context["rule"] != s.route.ID {
					t.Errorf("HTTP(%s) = %+v, %v; want authorized by rule %s", file, resp, err, s.route.ID)
				}
			case kindCheckProxy:
				var ev events.APIGatewayProxyRequest
				decodeStrict(t, file, &ev)
				resp, err := app.Check.Proxy(ctx, ev)
				checkCheck(t, file, resp.StatusCode, resp.Headers, resp.Body, err, s)
			case kindCheckURL:
				var ev events.LambdaFunctionURLRequest
				decodeStrict(t, file, &ev)
				resp, err := app.Check.URL(ctx, ev)
				checkCheck(t, file, resp.StatusCode, resp.Headers, resp.Body, err, s)
			case kindAdmin:
				var ev events.APIGatewayProxyRequest
				decodeStrict(t, file, &ev)
				resp, err := adminHandler(ctx, ev)
				if err != nil || resp.StatusCode < 200 || resp.StatusCode >= 500 {
					t.Errorf("admin handler(%s) = %d %s, %v; want a 2xx-4xx answer", file, resp.StatusCode, resp.Body, err)
				}
			case kindMigrate:
				// The handler lives in package main (functions/migrate), so
				// TestEmulator runs this sample through the built binary;
				// here it is only checked to be what the Provider framework
				// sends for this stack's resource.
				var ev migrateEvent
				decodeStrict(t, file, &ev)
				if ev.RequestType != cfn.RequestCreate || ev.ResourceType != "Custom::SluiceMigrate" || ev.ServiceToken == "" ||
					ev.ResourceProperties["ServiceToken"] != ev.ServiceToken || ev.ResourceProperties["Nonce"] == nil {
					t.Errorf("%s = %+v; want a Create of Custom::SluiceMigrate with a ServiceToken and a Nonce property", file, ev)
				}
			default:
				t.Errorf("%s: no handler for this file name; name it after its function (authorizer-rest*, authorizer-http*, check*, check-url*, admin-*, migrate*)", file)
			}
		})
	}
	if strings.Contains(out.String(), `"level":"ERROR"`) {
		t.Errorf("error lines logged:\n%s", out.String())
	}
}

// migrateEvent is the CloudFormation custom resource request the CDK
// Provider framework passes to the migrate function (its onEvent handler):
// CloudFormation's request with ResponseURL redacted to "...", since the
// framework answers CloudFormation itself. cfn.Event lacks ServiceToken.
type migrateEvent struct {
	cfn.Event
	ServiceToken string `json:"ServiceToken"`
}

func adminDeps(t *testing.T, redisURL string) (*redisversion.Counter, *limiter.Limiter) {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string {
		if k == "REDIS_URL" {
			return redisURL
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := config.Redis(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return redisversion.New(rdb, ""), limiter.New(rdb, limiter.Options{Timeout: time.Second})
}

// checkREST checks an authorizer-rest sample's reply: the no-key sample is
// Unauthorized unless sources include ip (anonIP is then its subject);
// others are allowed for the method ARN.
func checkREST(t *testing.T, file string, ev events.APIGatewayCustomAuthorizerRequestTypeRequest, resp events.APIGatewayCustomAuthorizerResponse, err error, s seeded, anonIP string) {
	t.Helper()
	if strings.Contains(file, "nokey") && anonIP == "" {
		if err == nil || err.Error() != "Unauthorized" {
			t.Errorf("REST(%s) = %+v, %v; want the error Unauthorized", file, resp, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("REST(%s) error: %v", file, err)
	}
	if len(resp.PolicyDocument.Statement) != 1 || resp.PolicyDocument.Statement[0].Effect != "Allow" ||
		resp.PolicyDocument.Statement[0].Resource[0] != ev.MethodArn {
		t.Errorf("REST(%s) policy = %+v, want Allow for %s", file, resp.PolicyDocument, ev.MethodArn)
	}
	subject := ev.Headers["X-Api-Key"]
	if anonIP != "" && strings.Contains(file, "nokey") {
		subject = anonIP
	}
	if want := limiter.SubjectHash(subject); resp.PrincipalID != want {
		t.Errorf("REST(%s) principalId = %q, want SubjectHash(%q) = %q", file, resp.PrincipalID, subject, want)
	}
	for _, k := range []string{"limit", "remaining", "reset", "retryAfter", "rateLimitPolicy", "rateLimit", "rule", "failOpen"} {
		if _, ok := resp.Context[k]; !ok {
			t.Errorf("REST(%s) context has no %q: %v", file, k, resp.Context)
		}
	}
}

// checkCheck checks a check sample's reply: the invalid one is a 400
// problem, the others 200 with the numbers of the rule they hit.
func checkCheck(t *testing.T, file string, status int, hdr map[string]string, body string, err error, s seeded) {
	t.Helper()
	if err != nil {
		t.Fatalf("check(%s) error: %v", file, err)
	}
	if strings.Contains(file, "invalid") {
		if status != 400 || hdr["Content-Type"] != "application/problem+json" {
			t.Errorf("check(%s) = %d %v %s, want 400 problem+json", file, status, hdr, body)
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
		t.Fatalf("check(%s) = %d %s, %v; want 200 allowed", file, status, body, err)
	}
	want := s.route
	if strings.Contains(body, s.apiRule.ID) {
		want = s.apiRule
	}
	if got.Rule != want.ID || got.Limit != *want.Limit || hdr["RateLimit-Policy"] == "" || hdr["RateLimit"] == "" {
		t.Errorf("check(%s) = %d %v %s; want rule %s with limit %d and RateLimit fields", file, status, hdr, body, want.ID, *want.Limit)
	}
}
