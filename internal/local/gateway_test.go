package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	authapigw "github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/memory"
)

func TestGatewayRoute(t *testing.T) {
	t.Parallel()
	g := newGateway("demo", "local", []string{"/", "/items", "/items/{id}", "/items/special", "/files/{path+}"}, nil, nil)
	tests := []struct {
		path     string
		resource string
		params   map[string]string
		ok       bool
	}{
		{"/", "/", map[string]string{}, true},
		{"/items", "/items", map[string]string{}, true},
		{"/items/", "/items", map[string]string{}, true},
		{"/items/42", "/items/{id}", map[string]string{"id": "42"}, true},
		{"/items/special", "/items/special", map[string]string{}, true},
		{"/items/42/x", "", nil, false},
		{"/files/a/b/c", "/files/{path+}", map[string]string{"path": "a/b/c"}, true},
		{"/files", "", nil, false},
		{"/nope", "", nil, false},
	}
	for _, tt := range tests {
		res, params, ok := g.route(tt.path)
		if ok != tt.ok || res.path != tt.resource || !cmp.Equal(params, tt.params) {
			t.Errorf("route(%q) = %q, %v, %v, want %q, %v, %v", tt.path, res.path, params, ok, tt.resource, tt.params, tt.ok)
		}
	}
}

// fakeAuth is an authorizer function's Lambda entry: it records the event
// bytes it is sent (and their decoding) and answers a canned policy as
// JSON, as the Lambda runtime returns it.
type fakeAuth struct {
	payload []byte
	ev      events.APIGatewayCustomAuthorizerRequestTypeRequest
	resp    events.APIGatewayCustomAuthorizerResponse
	err     error
}

func (f *fakeAuth) Invoke(_ context.Context, payload []byte) ([]byte, error) {
	f.payload = payload
	if err := json.Unmarshal(payload, &f.ev); err != nil {
		return nil, err
	}
	if f.err != nil {
		return nil, f.err
	}
	return json.Marshal(f.resp)
}

func authResponse(effect, resource string) events.APIGatewayCustomAuthorizerResponse {
	return events.APIGatewayCustomAuthorizerResponse{
		PrincipalID: "p",
		PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
			{Action: []string{"execute-api:Invoke"}, Effect: effect, Resource: []string{resource}},
		}},
		Context: map[string]any{
			headers.KeyRetryAfter: int64(7), headers.KeyLimit: int64(3), headers.KeyRemaining: int64(0),
			headers.KeyReset: int64(60), headers.KeyRateLimitPolicy: `"r";q=3;w=60`, headers.KeyRateLimit: `"r";r=0;t=60`,
			headers.KeyResetAt: int64(1796083260), headers.KeyRule: "r",
		},
	}
}

func TestGatewayEventAndPolicy(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:execute-api:local:000000000000:demo/local/GET/items/42"
	tests := []struct {
		name   string
		resp   events.APIGatewayCustomAuthorizerResponse
		err    error
		status int
	}{
		{"allow", authResponse("Allow", arn), nil, 200},
		{"allow wildcard", authResponse("Allow", "arn:aws:execute-api:local:000000000000:demo/*"), nil, 200},
		{"deny", authResponse("Deny", arn), nil, 429},
		{"allow another arn", authResponse("Allow", "arn:aws:execute-api:local:000000000000:demo/local/POST/*"), nil, 429},
		{"unauthorized", events.APIGatewayCustomAuthorizerResponse{}, authapigw.ErrUnauthorized, 401},
		{"authorizer failure", events.APIGatewayCustomAuthorizerResponse{}, errors.New("boom"), 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fa := &fakeAuth{resp: tt.resp, err: tt.err}
			g := newGateway("demo", "local", demoResources, fa, discardLogger())
			req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/items/42?a=1&a=2", nil)
			req.Header.Set("X-Api-Key", "k")
			req.RemoteAddr = "192.0.2.7:5555"
			w := httptest.NewRecorder()
			g.ServeHTTP(w, req)
			if w.Code != tt.status {
				t.Fatalf("ServeHTTP = %d %s, want %d", w.Code, w.Body, tt.status)
			}
			ev := fa.ev
			want := events.APIGatewayCustomAuthorizerRequestTypeRequest{
				Type: "REQUEST", MethodArn: arn, Resource: "/items/{id}", Path: "/items/42", HTTPMethod: "GET",
				QueryStringParameters:           map[string]string{"a": "2"},
				MultiValueQueryStringParameters: map[string][]string{"a": {"1", "2"}},
				PathParameters:                  map[string]string{"id": "42"},
			}
			got := ev
			got.Headers, got.MultiValueHeaders, got.RequestContext = nil, nil, events.APIGatewayCustomAuthorizerRequestTypeRequestContext{}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("authorizer event mismatch (-want +got):\n%s", diff)
			}
			rc := ev.RequestContext
			if rc.APIID != "demo" || rc.Stage != "local" || rc.Identity.SourceIP != "192.0.2.7" || rc.ResourcePath != "/items/{id}" || rc.Path != "/local/items/42" || rc.RequestID == "" {
				t.Errorf("requestContext = %+v, want api demo, stage local, sourceIp 192.0.2.7, resourcePath /items/{id}", rc)
			}
			if ev.Headers["X-Api-Key"] != "k" {
				t.Errorf("event headers = %v, want X-Api-Key k", ev.Headers)
			}
			// The bytes are API Gateway's REQUEST event: its key names,
			// which the authorizer's own decoder (authEvent) reads.
			var raw map[string]any
			if err := json.Unmarshal(fa.payload, &raw); err != nil {
				t.Fatalf("event bytes %s: %v", fa.payload, err)
			}
			for _, key := range []string{"type", "methodArn", "resource", "path", "httpMethod", "headers", "multiValueHeaders",
				"queryStringParameters", "multiValueQueryStringParameters", "pathParameters", "requestContext"} {
				if _, ok := raw[key]; !ok {
					t.Errorf("event bytes lack %q: %s", key, fa.payload)
				}
			}
			if id, _ := raw["requestContext"].(map[string]any)["identity"].(map[string]any); id["sourceIp"] != "192.0.2.7" {
				t.Errorf("event requestContext.identity = %v, want sourceIp 192.0.2.7", id)
			}
			if tt.status == 429 {
				if got := w.Header().Get("Retry-After"); got != "7" {
					t.Errorf("429 Retry-After = %q, want 7", got)
				}
				if got := hdr(w.Header(), "RateLimit-Policy"); got != `"r";q=3;w=60` {
					t.Errorf("429 RateLimit-Policy = %q", got)
				}
			}
			// The body is internal/denial's, as API Gateway fills the
			// construct's template (denial's test holds the two equal).
			id := w.Header().Get("X-Amzn-Requestid")
			wantBody := map[int]string{
				429: `{"message":"Too Many Requests","retryAfter":7,"limit":3,"remaining":0,"reset":60,"rule":"r","requestId":"` + id + `"}`,
				401: `{"message":"Unauthorized","requestId":"` + id + `"}`,
			}[tt.status]
			if wantBody != "" {
				if got := w.Body.String(); got != wantBody {
					t.Errorf("%d body = %s, want %s", tt.status, got, wantBody)
				}
				if got := w.Header().Get("Content-Length"); got != strconv.Itoa(len(wantBody)) {
					t.Errorf("%d Content-Length = %s, want %d", tt.status, got, len(wantBody))
				}
				if got := w.Header().Get("Content-Type"); got != "application/json" {
					t.Errorf("%d Content-Type = %q, want application/json", tt.status, got)
				}
			}
			if tt.status == 200 && hdr(w.Header(), "RateLimit") != `"r";r=0;t=60` {
				t.Errorf("200 RateLimit = %q, want the context's", hdr(w.Header(), "RateLimit"))
			}
		})
	}
}

// TestGatewayHeaderDialects: the local gateway writes the fields of the
// chosen dialects from the authorizer context, exactly those (names as
// written, not canonicalised), Retry-After on every 429 and never on a 200,
// and nothing on an allow that no rule limited.
func TestGatewayHeaderDialects(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:execute-api:local:000000000000:demo/local/GET/items/42"
	draft11 := map[string]string{"RateLimit-Policy": `"r";q=3;w=60`, "RateLimit": `"r";r=0;t=60`}
	draft6 := map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Reset": "60"}
	legacy := map[string]string{"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1796083260"}
	union := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			maps.Copy(out, m)
		}
		return out
	}
	tests := []struct {
		dialects headers.Dialects
		want     map[string]string
	}{
		{0, draft11}, // unset: the default
		{headers.Draft11, draft11},
		{headers.Draft6, draft6},
		{headers.Legacy, legacy},
		{headers.Draft6 | headers.Legacy, union(draft6, legacy)},
		{headers.Draft11 | headers.Draft6 | headers.Legacy, union(draft11, draft6, legacy)},
	}
	rateLimitFields := func(h http.Header) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			if strings.Contains(strings.ToLower(k), "ratelimit") || strings.EqualFold(k, "Retry-After") {
				out[k] = v[0]
			}
		}
		return out
	}
	for _, tt := range tests {
		for _, effect := range []string{"Deny", "Allow", "Allow without a rule"} {
			t.Run(tt.dialects.String()+"/"+effect, func(t *testing.T) {
				t.Parallel()
				resp := authResponse(strings.Fields(effect)[0], arn)
				want := maps.Clone(tt.want)
				switch effect {
				case "Deny":
					want["Retry-After"] = "7"
				case "Allow without a rule":
					resp.Context[headers.KeyRule] = ""
					want = map[string]string{}
				}
				g := newGateway("demo", "local", demoResources, &fakeAuth{resp: resp}, discardLogger())
				g.headers = tt.dialects
				req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/items/42", nil)
				w := httptest.NewRecorder()
				g.ServeHTTP(w, req)
				if diff := cmp.Diff(want, rateLimitFields(w.Header())); diff != "" {
					t.Errorf("%s fields (-want +got):\n%s", effect, diff)
				}
			})
		}
	}
}

func TestRequireToken(t *testing.T) {
	t.Parallel()
	h := RequireToken("s3cret", "a test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	tests := []struct {
		auth string
		want int
	}{
		{"", 401}, {"Bearer", 401}, {"Bearer ", 401}, {"Bearer s3cre", 401}, {"Bearer s3cretx", 401},
		{"bearer s3cret", 401}, {"Basic s3cret", 401}, {"Bearer s3cret", 204},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodGet, "/rules", nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tt.want {
			t.Errorf("RequireToken(Authorization %q) = %d, want %d", tt.auth, w.Code, tt.want)
		}
	}
}

// The built-in seed is a copy of examples/rules.json (go:embed cannot reach
// outside internal/local); this keeps them equal.
func TestEmbeddedSeedMatchesExamples(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../examples/rules.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, embeddedSeed) {
		t.Errorf("internal/local/seed_rules.json differs from examples/rules.json: cp examples/rules.json internal/local/seed_rules.json")
	}
}

// Seeding twice (a restart on the same database) keeps what is there.
func TestSeedTwice(t *testing.T) {
	t.Parallel()
	st := memory.New()
	ctx := context.Background()
	c := Config{Seed: "../../examples/rules.json", SeedSet: true}
	if _, err := seed(ctx, st, c); err != nil {
		t.Fatalf("seed: %v", err)
	}
	desc, err := seed(ctx, st, c)
	if err != nil {
		t.Fatalf("seed again: %v", err)
	}
	set, err := st.LoadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, ps := set.Rules, set.Plans
	if len(rs) != 7 || len(ps) != 1 {
		t.Errorf("after seeding twice: %d rules, %d plans, want 7 and 1 (%s)", len(rs), len(ps), desc)
	}
	if want := "1 plan(s) and 7 rule(s) from ../../examples/rules.json: 0 created, 8 already in the store from an earlier run (kept unchanged)"; desc != want {
		t.Errorf("seeding again says %q, want %q", desc, want)
	}
	for _, r := range rs {
		if err := r.Validate(); err != nil {
			t.Errorf("seeded rule %+v: %v", r, err)
		}
	}
	snap := rules.NewSnapshot(rs, ps, rules.SnapshotOptions{})
	if m := snap.Match("demo", "GET", "/search", "anyone"); m.API == nil || m.Route == nil || m.Route.Limit != 3 || m.API.Limit != 10 {
		t.Errorf("seed Match(demo GET /search) = %+v, want the API-wide 10/min and the route 3/min rules", m)
	}
	// A missing default seed falls back to the embedded copy; a missing
	// --seed file is an error.
	if _, err := seed(ctx, memory.New(), Config{Seed: "nope.json"}); err != nil {
		t.Errorf("seed(default path missing) = %v, want the embedded copy", err)
	}
	if _, err := seed(ctx, memory.New(), Config{Seed: "nope.json", SeedSet: true}); err == nil {
		t.Errorf("seed(--seed nope.json) = nil, want an error")
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// hdr reads a header field as the gateway wrote it (not canonicalised).
func hdr(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// TestWarnings: a rule the local stack can tell will never match is named
// with the reason and what would match.
func TestWarnings(t *testing.T) {
	t.Parallel()
	rs := Resources{APIs: []APIResources{{API: "demo", Stage: "local", Resources: demoResources}}}
	tests := []struct {
		api, route string
		want       string // "" for none
	}{
		{"demo", "*", ""},
		{"*", "*", ""},
		{"demo", "GET /items/{id}", ""},
		{"demo", "DELETE /search", ""},
		{"*", "GET /hello", ""},
		{"demo", "GET /items/42", `route "GET /items/42" is a path, not a resource of api "demo": did you mean "GET /items/{id}"?`},
		{"demo", "GET /nope", `route "GET /nope" names no resource of api "demo" (it has / /hello /items /items/{id} /search)`},
		{"*", "GET /items/42", `did you mean "GET /items/{id}"?`},
		{"dmeo", "*", `api "dmeo" is not an API of this stack (it has "demo"): the rule will never match`},
		{"dmeo", "GET /items/42", `api "dmeo" is not an API of this stack`},
		{"", "GET /nope", ""}, // no api: the admin API says so
	}
	for _, tt := range tests {
		got := strings.Join(rs.Warnings(tt.api, tt.route), "\n")
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("Warnings(%q, %q) = %q, want %q", tt.api, tt.route, got, tt.want)
		}
	}
}

// TestBanner: a token the user chose is not printed, and the console line
// says where it goes; a generated one is in the console URL.
func TestBanner(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		generated bool
		want      string
	}{
		{true, "console    http://127.0.0.1:1/console/#token=sl_abc\n"},
		{false, "console    http://127.0.0.1:1/console/#token=<SLUICE_ADMIN_TOKEN>  (put your token after #token=; one you chose is not printed)\n"},
	} {
		var b strings.Builder
		banner(&b, bannerInfo{base: "http://127.0.0.1:1", api: "demo", stage: "local", token: "sl_abc", generated: tt.generated})
		if !strings.Contains(b.String(), tt.want) {
			t.Errorf("banner (generated %v):\n%s\nwant %q", tt.generated, b.String(), tt.want)
		}
		if !tt.generated && strings.Contains(b.String(), "sl_abc") {
			t.Errorf("banner prints the token the user chose:\n%s", b.String())
		}
	}
}
