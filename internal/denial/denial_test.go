package denial

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/headers"
)

// apiGateway fills a gateway response the way API Gateway does, from the
// CDK form alone: each $context.<variable> of the template and each
// context.<variable> parameter replaced by its value as it is, each
// '<literal>' parameter unquoted, a header with an empty value left out.
func apiGateway(t *testing.T, template string, params map[string]string, c Context) (http.Header, []byte) {
	t.Helper()
	value := func(v string) string {
		if key, ok := strings.CutPrefix(v, "authorizer."); ok {
			return c.Authorizer[key]
		}
		if v == "requestId" {
			return c.RequestID
		}
		t.Fatalf("unknown $context variable %q", v)
		return ""
	}
	body := regexp.MustCompile(`\$context\.([A-Za-z0-9_.]*[A-Za-z0-9_])`).ReplaceAllStringFunc(template, func(m string) string {
		return value(strings.TrimPrefix(m, "$context."))
	})
	h := http.Header{}
	for name, p := range params {
		var v string
		switch {
		case strings.HasPrefix(p, "context."):
			v = value(strings.TrimPrefix(p, "context."))
		case len(p) >= 2 && p[0] == '\'' && p[len(p)-1] == '\'':
			v = p[1 : len(p)-1]
		default:
			t.Fatalf("parameter %s = %q: neither context.<variable> nor '<literal>'", name, p)
		}
		if v != "" {
			h[name] = []string{v}
		}
	}
	return h, []byte(body)
}

// TestRenderIsAPIGateway: for the same request, Render (what sluice local
// answers) gives the bytes and header fields API Gateway makes of Template
// and Parameters (what the construct installs).
func TestRenderIsAPIGateway(t *testing.T) {
	t.Parallel()
	full := Context{RequestID: "4e834c02-b817-4d9d-ab73-393956ad22b3", Authorizer: map[string]string{
		headers.KeyRetryAfter: "20", headers.KeyLimit: "3", headers.KeyRemaining: "0", headers.KeyReset: "60",
		headers.KeyResetAt: "1796083260", headers.KeyRule: "9d18587a-c1cb-45f8-9302-82ed9d8c21a2",
		headers.KeyRateLimitPolicy: `"9d18587a-c1cb-45f8-9302-82ed9d8c21a2";q=3;w=60`,
		headers.KeyRateLimit:       `"9d18587a-c1cb-45f8-9302-82ed9d8c21a2";r=0;t=60`,
	}}
	sparse := Context{RequestID: "r", Authorizer: map[string]string{headers.KeyRetryAfter: "7"}}
	responses := map[string]Response{
		"429 default": TooManyRequests(0),
		"429 draft11": TooManyRequests(headers.Draft11),
		"429 all":     TooManyRequests(headers.Draft11 | headers.Draft6 | headers.Legacy),
		"429 legacy":  TooManyRequests(headers.Legacy),
		"401":         Unauthorized(),
	}
	for name, r := range responses {
		for cname, c := range map[string]Context{"full": full, "sparse": sparse, "empty": {}} {
			wantH, wantB := apiGateway(t, r.Template(), r.Parameters(), c)
			gotH, gotB := r.Render(c)
			if string(gotB) != string(wantB) {
				t.Errorf("%s, %s context: Render body = %s, want %s", name, cname, gotB, wantB)
			}
			if diff := cmp.Diff(wantH, gotH); diff != "" {
				t.Errorf("%s, %s context: Render header (-API Gateway +Render):\n%s", name, cname, diff)
			}
			// Sluice's Deny fills every number in (full); a context
			// without them is not Sluice's, and only the 401 is JSON then.
			if (cname == "full" || r.Status == http.StatusUnauthorized) && !json.Valid(gotB) {
				t.Errorf("%s, %s context: body %s is not JSON", name, cname, gotB)
			}
		}
	}
}

// TestBodyTypes: the 429 API Gateway makes of the template for Sluice's
// Deny is JSON whose numbers are numbers, as the check API's are, a
// remaining in debt included, and whose rule and request id are strings.
func TestBodyTypes(t *testing.T) {
	t.Parallel()
	c := Context{RequestID: "4e834c02", Authorizer: map[string]string{
		headers.KeyRetryAfter: "20", headers.KeyLimit: "3", headers.KeyRemaining: "-2", headers.KeyReset: "60",
		"rule": "9d18587a", "failOpen": "false",
	}}
	r := TooManyRequests(0)
	_, b := apiGateway(t, r.Template(), r.Parameters(), c)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("the 429 body %s: %v", b, err)
	}
	want := map[string]any{"message": "Too Many Requests", "retryAfter": 20.0, "limit": 3.0, "remaining": -2.0, "reset": 60.0,
		"rule": "9d18587a", "requestId": "4e834c02"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the 429 body decoded (-want +got):\n%s", diff)
	}
}

// TestTemplates pins the templates the construct installs: a change here
// is a change to every deployed API.
func TestTemplates(t *testing.T) {
	t.Parallel()
	const want429 = `{"message":"Too Many Requests",` +
		`"retryAfter":$context.authorizer.retryAfter,` +
		`"limit":$context.authorizer.limit,` +
		`"remaining":$context.authorizer.remaining,` +
		`"reset":$context.authorizer.reset,` +
		`"rule":"$context.authorizer.rule",` +
		`"requestId":"$context.requestId"}`
	if got := TooManyRequests(0).Template(); got != want429 {
		t.Errorf("TooManyRequests(0).Template() = %s, want %s", got, want429)
	}
	const want401 = `{"message":"Unauthorized","requestId":"$context.requestId"}`
	if got := Unauthorized().Template(); got != want401 {
		t.Errorf("Unauthorized().Template() = %s, want %s", got, want401)
	}
}

func TestParameters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		r    Response
		want map[string]string
	}{
		{TooManyRequests(0), map[string]string{
			"Content-Type":     "'application/json'",
			"Retry-After":      "context.authorizer.retryAfter",
			"RateLimit-Policy": "context.authorizer.rateLimitPolicy",
			"RateLimit":        "context.authorizer.rateLimit",
		}},
		{TooManyRequests(headers.Draft6 | headers.Legacy), map[string]string{
			"Content-Type":          "'application/json'",
			"Retry-After":           "context.authorizer.retryAfter",
			"RateLimit-Limit":       "context.authorizer.limit",
			"RateLimit-Remaining":   "context.authorizer.remaining",
			"RateLimit-Reset":       "context.authorizer.reset",
			"X-RateLimit-Limit":     "context.authorizer.limit",
			"X-RateLimit-Remaining": "context.authorizer.remaining",
			"X-RateLimit-Reset":     "context.authorizer.resetAt",
		}},
		{Unauthorized(), map[string]string{"Content-Type": "'application/json'"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.r.Parameters()); diff != "" {
			t.Errorf("%d Parameters() (-want +got):\n%s", tt.r.Status, diff)
		}
	}
}
