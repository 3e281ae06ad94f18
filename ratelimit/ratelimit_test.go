package ratelimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/ratelimit"
)

// setup is a fresh rules database holding one rule, 2 a minute for every
// subject on GET /orders/{id} of any API (the route of the sample events),
// published to Redis under a key prefix of the test's own, as Sluice's
// admin API writes it.
type setup struct {
	redisURL, dbURL, prefix string
	out                     *testenv.Buffer
}

func newSetup(t testing.TB) setup {
	t.Helper()
	s := setup{redisURL: testenv.RedisURL(t), dbURL: pgtest.NewDatabase(t), prefix: testenv.Prefix(t, "ratelimit"), out: &testenv.Buffer{}}
	testenv.DeleteKeys(t, testenv.Redis(t), s.prefix)
	s.addRules(t, map[string]any{"api": "*", "route": "GET /orders/{id}", "subject": "*", "limit": 2, "period": "1m"})
	return s
}

// limiter builds a Limiter on s that limits by key ("" the principalId).
func (s setup) limiter(t *testing.T, key string) *ratelimit.Limiter {
	t.Helper()
	return s.limiterWith(t, ratelimit.Options{ContextKey: key, Headers: "draft11,legacy"})
}

// sample decodes one of the repository's sample events (events/).
func sample[T any](t *testing.T, name string) T {
	t.Helper()
	b, err := os.ReadFile("../events/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var ev T
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return ev
}

func policy(effect, resource string) events.APIGatewayCustomAuthorizerPolicy {
	return events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
		{Action: []string{"execute-api:Invoke"}, Effect: effect, Resource: []string{resource}}}}
}

// restAnswer is the team's handler answering every event with an Allow
// (effect "Allow", for the event's methodArn unless resource is set), a
// Deny, or err.
func restAnswer(effect, resource, principal string, ctxv map[string]any, err error) ratelimit.RESTHandler {
	return func(_ context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
		if resource == "" {
			resource = ev.MethodArn
		}
		return events.APIGatewayCustomAuthorizerResponse{PrincipalID: principal, PolicyDocument: policy(effect, resource),
			Context: ctxv, UsageIdentifierKey: "usage-key"}, err
	}
}

// TestWrapREST runs the sample REST event through wrapped handlers: the
// team's Allow within the limit, a Deny with Retry-After at it, the team's
// Deny as Unauthorized and its errors passed through, without a charge,
// refused subjects, and
// the merged context.
func TestWrapREST(t *testing.T) {
	s := newSetup(t)
	byPrincipal, byTenant := s.limiter(t, ""), s.limiter(t, "tenant")
	ev := sample[events.APIGatewayCustomAuthorizerRequestTypeRequest](t, "authorizer-rest.json")
	boom := errors.New("token service down")
	unauthorized := errors.New("Unauthorized")

	tests := []struct {
		name    string
		rl      *ratelimit.Limiter
		h       ratelimit.RESTHandler
		times   int
		effect  string         // of the last answer; "" when it is the team's, unchanged
		context map[string]any // what the last answer's context must hold
		wantErr error          // the last call's error (Unauthorized by message)
	}{
		{name: "allowed", rl: byPrincipal, h: restAnswer("Allow", "", "alice", map[string]any{"tenant": "acme"}, nil), times: 1,
			effect: "Allow", context: map[string]any{"limit": int64(2), "remaining": int64(1), "retryAfter": int64(0), "tenant": "acme"}},
		{name: "wildcard policy allowed", rl: byPrincipal, h: restAnswer("Allow", "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3d4e5/*", "wanda", nil, nil), times: 2,
			effect: "Allow", context: map[string]any{"remaining": int64(0)}},
		{name: "denied at the limit", rl: byPrincipal, h: restAnswer("Allow", "", "bob", nil, nil), times: 3,
			effect: "Deny", context: map[string]any{"limit": int64(2), "remaining": int64(0), "retryAfter": int64(30)}},
		{name: "team deny is Unauthorized", rl: byPrincipal, h: restAnswer("Deny", "", "carol", map[string]any{"why": "suspended"}, nil), times: 5, wantErr: ratelimit.ErrUnauthorized},
		{name: "team error passes through", rl: byPrincipal, h: restAnswer("Allow", "", "dave", nil, boom), times: 3, wantErr: boom},
		{name: "team Unauthorized passes through", rl: byPrincipal, h: restAnswer("Allow", "", "", nil, unauthorized), times: 1, wantErr: unauthorized},
		{name: "empty principal", rl: byPrincipal, h: restAnswer("Allow", "", " ", nil, nil), times: 1, wantErr: ratelimit.ErrUnauthorized},
		{name: "oversized principal", rl: byPrincipal, h: restAnswer("Allow", "", strings.Repeat("x", ratelimit.MaxSubjectLen+1), nil, nil), times: 1, wantErr: ratelimit.ErrUnauthorized},
		{name: "principal not UTF-8", rl: byPrincipal, h: restAnswer("Allow", "", "eve\xff", nil, nil), times: 1, wantErr: ratelimit.ErrUnauthorized},
		{name: "context key missing", rl: byTenant, h: restAnswer("Allow", "", "frank", map[string]any{"team": "x"}, nil), times: 1, wantErr: ratelimit.ErrUnauthorized},
		{name: "context key limits the tenant", rl: byTenant, h: tenantOfMany(), times: 3,
			effect: "Deny", context: map[string]any{"tenant": "globex", "retryAfter": int64(30)}},
		{name: "contexts merged, Sluice's keys kept", rl: byPrincipal, h: restAnswer("Allow", "", "grace", map[string]any{
			"limit": "forged", "remaining": 999, "retryAfter": 0, "rateLimit": "forged", "resetAt": 1, "rule": "x", "failOpen": true,
			"tenant": "acme", "isAdmin": true, "plan": 3}, nil), times: 1,
			effect: "Allow", context: map[string]any{"limit": int64(2), "remaining": int64(1), "rateLimit": ruleRateLimit{}, "rule": ruleID{},
				"failOpen": false, "tenant": "acme", "isAdmin": true, "plan": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// team and teamErr are the team handler's last answer.
			var (
				team, got    events.APIGatewayCustomAuthorizerResponse
				teamErr, err error
			)
			wrapped := tt.rl.WrapREST(func(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
				team, teamErr = tt.h(ctx, ev)
				return team, teamErr
			})
			for range tt.times {
				got, err = wrapped(context.Background(), ev)
			}
			if tt.wantErr != nil {
				if err == nil || err.Error() != tt.wantErr.Error() || teamErr != nil && err != teamErr {
					t.Fatalf("wrapped handler error = %v, want %v", err, tt.wantErr)
				}
				if teamErr != nil && !cmp.Equal(got, team) {
					t.Errorf("on the team's error the answer changed:\n%s", cmp.Diff(team, got))
				}
				return
			}
			if err != nil {
				t.Fatalf("wrapped handler: %v", err)
			}
			if tt.effect == "" {
				if diff := cmp.Diff(team, got); diff != "" {
					t.Errorf("the team's answer changed (-team +got):\n%s", diff)
				}
				return
			}
			if e := got.PolicyDocument.Statement[0].Effect; e != tt.effect || got.PrincipalID != team.PrincipalID || got.UsageIdentifierKey != "usage-key" {
				t.Errorf("answer = %s principal %q usage key %q, want %s %q usage-key", e, got.PrincipalID, got.UsageIdentifierKey, tt.effect, team.PrincipalID)
			}
			if tt.effect == "Deny" && cmp.Diff(policy("Deny", ev.MethodArn), got.PolicyDocument) != "" {
				t.Errorf("deny policy = %+v, want a Deny of %s", got.PolicyDocument, ev.MethodArn)
			}
			checkContext(t, got.Context, tt.context)
		})
	}

	// The team's denials and errors charged nothing: carol and dave still
	// have both tokens.
	for _, who := range []string{"carol", "dave"} {
		got, err := byPrincipal.WrapREST(restAnswer("Allow", "", who, nil, nil))(context.Background(), ev)
		if err != nil || got.Context["remaining"] != int64(1) {
			t.Errorf("%s after the team's refusals: remaining %v (err %v), want 1: a refusal reached Redis", who, got.Context["remaining"], err)
		}
	}
}

// tenantOfMany answers for a new user of tenant globex on every call.
func tenantOfMany() ratelimit.RESTHandler {
	n := 0
	return func(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
		n++
		return restAnswer("Allow", "", "user-"+strings.Repeat("i", n), map[string]any{"tenant": "globex"}, nil)(ctx, ev)
	}
}

// ruleID and ruleRateLimit stand for values checkContext only checks the
// shape of: the created rule's id, and its RateLimit field value.
type (
	ruleID        struct{}
	ruleRateLimit struct{}
)

// checkContext checks that got holds every entry of want.
func checkContext(t *testing.T, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		switch w.(type) {
		case ruleID:
			if s, _ := g.(string); len(s) != 36 {
				t.Errorf("context[%q] = %v, want the rule's id", k, g)
			}
			continue
		case ruleRateLimit:
			if s, _ := g.(string); !strings.HasSuffix(s, ";r=1;t=30") {
				t.Errorf("context[%q] = %v, want Sluice's RateLimit value", k, g)
			}
			continue
		}
		if !ok || !cmp.Equal(g, w) {
			t.Errorf("context[%q] = %#v, want %#v", k, g, w)
		}
	}
	if _, ok := got["resetAt"].(int64); !ok {
		t.Errorf("context[resetAt] = %#v, want Sluice's (the legacy dialect)", got["resetAt"])
	}
}

// TestWrapHTTP runs the sample HTTP API event through wrapped handlers of
// both response kinds.
func TestWrapHTTP(t *testing.T) {
	s := newSetup(t)
	byPrincipal, byTenant := s.limiter(t, ""), s.limiter(t, "tenant")
	ev := sample[events.APIGatewayV2CustomAuthorizerV2Request](t, "authorizer-http.json")

	simple := func(ok bool, ctxv map[string]any) ratelimit.HTTPHandler {
		return func(context.Context, events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
			return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: ok, Context: ctxv}, nil
		}
	}
	t.Run("simple", func(t *testing.T) {
		h := byTenant.WrapHTTP(simple(true, map[string]any{"tenant": "initech", "limit": "forged"}))
		var got []bool
		for range 3 {
			r, err := h(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.IsAuthorized)
			checkContext(t, r.Context, map[string]any{"tenant": "initech", "limit": int64(2)})
			if !r.IsAuthorized && r.Context["retryAfter"] != int64(30) {
				t.Errorf("denied with retryAfter %v, want 30", r.Context["retryAfter"])
			}
		}
		if !cmp.Equal(got, []bool{true, true, false}) {
			t.Errorf("isAuthorized = %v, want [true true false]", got)
		}
	})
	t.Run("simple team refusal is Unauthorized", func(t *testing.T) {
		team := map[string]any{"tenant": "initech-2", "why": "expired"}
		r, err := byTenant.WrapHTTP(simple(false, team))(context.Background(), ev)
		if !errors.Is(err, ratelimit.ErrUnauthorized) || r.IsAuthorized {
			t.Errorf("= %+v, %v; want Unauthorized (401; an HTTP API's rate limit is its 403)", r, err)
		}
	})
	t.Run("simple without a context key", func(t *testing.T) {
		// A simple response has no principalId to limit by.
		if _, err := byPrincipal.WrapHTTP(simple(true, nil))(context.Background(), ev); !errors.Is(err, ratelimit.ErrUnauthorized) {
			t.Errorf("err = %v, want Unauthorized", err)
		}
	})
	t.Run("iam", func(t *testing.T) {
		h := byPrincipal.WrapHTTPIAM(func(_ context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerIAMPolicyResponse, error) {
			return events.APIGatewayV2CustomAuthorizerIAMPolicyResponse{PrincipalID: "heidi", PolicyDocument: policy("Allow", ev.RouteArn)}, nil
		})
		var effects []string
		for range 3 {
			r, err := h(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			effects = append(effects, r.PolicyDocument.Statement[0].Effect)
			if r.PrincipalID != "heidi" || r.PolicyDocument.Statement[0].Resource[0] != ev.RouteArn {
				t.Errorf("answer = %+v, want principal heidi on %s", r, ev.RouteArn)
			}
		}
		if !cmp.Equal(effects, []string{"Allow", "Allow", "Deny"}) {
			t.Errorf("effects = %v, want [Allow Allow Deny]", effects)
		}
	})
}

// TestOwnRedisClient: a Limiter on the caller's Redis client limits with
// it and leaves it open on Close.
func TestOwnRedisClient(t *testing.T) {
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, "ratelimit")
	testenv.DeleteKeys(t, rdb, prefix)
	rl, err := ratelimit.New(context.Background(), ratelimit.Options{
		Redis: rdb, Prefix: prefix, DefaultLimit: "1/1m", Out: &testenv.Buffer{},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := rl.WrapREST(restAnswer("Allow", "", "ivan", nil, nil))
	ev := sample[events.APIGatewayCustomAuthorizerRequestTypeRequest](t, "authorizer-rest.json")
	var effects []string
	for range 2 {
		r, err := h(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		effects = append(effects, r.PolicyDocument.Statement[0].Effect)
	}
	if !cmp.Equal(effects, []string{"Allow", "Deny"}) {
		t.Errorf("effects = %v, want [Allow Deny] (DEFAULT_LIMIT 1/1m)", effects)
	}
	if n := len(testenv.Keys(context.Background(), t, rdb, prefix)); n == 0 {
		t.Errorf("no key under the Limiter's prefix in the given client's Redis")
	}
	rl.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Errorf("the caller's client after Close: %v, want it open", err)
	}
}

// TestOptions: settings New and FromEnv cannot use are errors naming them.
func TestOptions(t *testing.T) {
	redisURL := testenv.RedisURL(t)
	for _, tt := range []struct {
		name string
		o    ratelimit.Options
		want []string
	}{
		{"bad values", ratelimit.Options{RedisURL: "http://x", DefaultLimit: "lots", Headers: "draft99", ContextKey: "a b"},
			[]string{"REDIS_URL", "DEFAULT_LIMIT", "RATELIMIT_HEADERS", "ContextKey"}},
		{"no redis", ratelimit.Options{}, []string{"REDIS_URL"}},
		{"authorizer sources", ratelimit.Options{RedisURL: redisURL, Sources: "context:tenant"}, []string{"Sources", "ContextKey"}},
		{"jwt without issuer", ratelimit.Options{RedisURL: redisURL, Sources: "jwt:sub"}, []string{"JWT_ISSUER", "JWT_AUDIENCE"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ratelimit.New(context.Background(), tt.o)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("New error = %v, want it to name %s", err, w)
				}
			}
		})
	}
	for _, tt := range []struct{ sources, want string }{
		{"header:x-api-key", ""}, // the middleware's sources
		{"ip,jwt:sub", "JWT_ISSUER"},
		{"principal,header:x-api-key", "SUBJECT_SOURCES"},
		{"cookie:session", "SUBJECT_SOURCES"},
		{"context:", "SUBJECT_SOURCES"},
		{"principal", ""},
		{"context:tenant", ""},
	} {
		t.Run("SUBJECT_SOURCES="+tt.sources, func(t *testing.T) {
			t.Setenv("SUBJECT_SOURCES", tt.sources)
			rl, err := ratelimit.FromEnv(context.Background())
			if err == nil {
				rl.Close()
			}
			if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("FromEnv = %v, want error naming %q", err, tt.want)
			}
		})
	}
}

// adminResponse is what the admin handler answered.
type adminResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// serveAdmin sends one request to the admin http.Handler, in process, as
// sluice local mounts it: a JSON body when body is not nil, actor recorded
// in the audit log.
func serveAdmin(svc *admin.Service, method, path string, query url.Values, body []byte, actor string) adminResponse {
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	svc.Handler(admin.HandlerOptions{Actor: func(*http.Request) string { return actor }}).ServeHTTP(w, r)
	return adminResponse{Status: w.Code, Header: w.Header(), Body: w.Body.Bytes()}
}
