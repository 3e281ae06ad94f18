package ratelimit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestForwardedHops: the ip source reads X-Forwarded-For only as far as
// HandlerOptions.ForwardedHops trusts it, at every edge that can carry
// the header, each entered as its users enter it (a net/http request, ALB,
// REST proxy and HTTP API events decoded from their JSON). The blocked
// address 203.0.113.66 is the client's; what lies left of the trusted
// hops is the client's to write, and must not move it to a fresh bucket.
func TestForwardedHops(t *testing.T) {
	s := newSetup(t)
	const blocked = "203.0.113.66"
	s.addRules(t,
		map[string]any{"api": "fwd", "route": "*", "subject": blocked, "limit": 0, "period": "1m"},
		map[string]any{"api": "fwd", "route": "*", "subject": "*", "limit": 1000, "period": "1m"},
	)
	rl := s.limiterWith(t, ratelimit.Options{Sources: "ip"})
	ok := func(http.ResponseWriter, *http.Request) {}

	type edge func(t *testing.T, xff []string, peer string, hops int) int
	edges := map[string]edge{
		"middleware": func(t *testing.T, xff []string, peer string, hops int) int {
			r := httptest.NewRequest("GET", "/x", nil)
			r.RemoteAddr = peer + ":4711"
			r.Header["X-Forwarded-For"] = xff
			w := httptest.NewRecorder()
			rl.Handler(http.HandlerFunc(ok), ratelimit.HandlerOptions{API: "fwd", ForwardedHops: hops}).ServeHTTP(w, r)
			return w.Code
		},
		"ALB multi-value": func(t *testing.T, xff []string, _ string, hops int) int {
			b, _ := json.Marshal(map[string]any{"httpMethod": "GET", "path": "/x", "multiValueHeaders": map[string][]string{"x-forwarded-for": xff}})
			ev := decode[events.ALBTargetGroupRequest](t, b)
			r, err := rl.LimitALB(func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
				return events.ALBTargetGroupResponse{StatusCode: 200}, nil
			}, ratelimit.HandlerOptions{API: "fwd", ForwardedHops: hops})(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			return r.StatusCode
		},
		"REST proxy": func(t *testing.T, xff []string, peer string, hops int) int {
			b, _ := json.Marshal(map[string]any{"resource": "/x", "path": "/x", "httpMethod": "GET",
				"headers": map[string]string{"X-Forwarded-For": strings.Join(xff, ", ")}, "multiValueHeaders": map[string][]string{"X-Forwarded-For": xff},
				"requestContext": map[string]any{"apiId": "fwd", "identity": map[string]string{"sourceIp": peer}}})
			ev := decode[events.APIGatewayProxyRequest](t, b)
			r, err := rl.LimitProxy(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				return events.APIGatewayProxyResponse{StatusCode: 200}, nil
			}, ratelimit.HandlerOptions{ForwardedHops: hops})(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			return r.StatusCode
		},
		"HTTP API": func(t *testing.T, xff []string, peer string, hops int) int {
			b, _ := json.Marshal(map[string]any{"version": "2.0", "routeKey": "GET /x", "rawPath": "/x",
				"headers":        map[string]string{"x-forwarded-for": strings.Join(xff, ",")},
				"requestContext": map[string]any{"apiId": "fwd", "http": map[string]string{"method": "GET", "path": "/x", "sourceIp": peer}}})
			ev := decode[events.APIGatewayV2HTTPRequest](t, b)
			r, err := rl.LimitHTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
			}, ratelimit.HandlerOptions{ForwardedHops: hops})(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			return r.StatusCode
		},
	}
	for _, tt := range []struct {
		host string
		xff  []string
		peer string // the address the transport saw: RemoteAddr, sourceIp
		hops int
		want int // 429: the blocked client's bucket; 200 another's; 401 no address
		only []string
	}{
		{"ALB append mode", []string{blocked}, "10.0.0.5", 1, 429, nil},
		{"ALB append mode, forged left", []string{"198.51.100.1, " + blocked}, "10.0.0.5", 1, 429, nil},
		{"ALB append mode, forged as its own line", []string{"198.51.100.1", blocked}, "10.0.0.5", 1, 429, nil},
		{"CloudFront then ALB", []string{"198.51.100.1, " + blocked + ", 130.176.0.9"}, "10.0.0.5", 2, 429, nil},
		{"hops 1 behind CloudFront and ALB limits CloudFront", []string{blocked + ", 130.176.0.9"}, "10.0.0.5", 1, 200, nil},
		{"fewer addresses than hops", []string{blocked}, "10.0.0.5", 2, 401, []string{"middleware", "ALB multi-value", "REST proxy", "HTTP API"}},
		{"hops 0 ignores a forged header", []string{blocked}, "198.51.100.7", 0, 200, []string{"middleware", "REST proxy", "HTTP API"}},
		{"hops 0: the transport's address", []string{"198.51.100.1"}, blocked, 0, 429, []string{"middleware", "REST proxy", "HTTP API"}},
		{"hops 0 at an ALB: no address", []string{blocked}, "", 0, 401, []string{"ALB multi-value"}},
		{"not an address", []string{"198.51.100.1, not-an-ip"}, "10.0.0.5", 1, 401, nil},
	} {
		names := tt.only
		if names == nil {
			names = []string{"middleware", "ALB multi-value", "REST proxy", "HTTP API"}
		}
		for _, name := range names {
			if got := edges[name](t, tt.xff, tt.peer, tt.hops); got != tt.want {
				t.Errorf("%s: %s with X-Forwarded-For %q, hops %d = %d, want %d", tt.host, name, tt.xff, tt.hops, got, tt.want)
			}
		}
	}
}

// TestShadowAttribution: a shadow rule's would-be denial belongs to that
// rule, also when an enforcing rule applies to the same request: the
// observer (Prometheus) and the decision log line name the shadow rule,
// entered through the middleware as a service's users enter it.
func TestShadowAttribution(t *testing.T) {
	s := newSetup(t)
	ids := s.addRules(t,
		map[string]any{"api": "shadow", "route": "*", "subject": "*", "limit": 100, "period": "1m"},
		map[string]any{"api": "shadow", "route": "GET /items/{id}", "subject": "*", "limit": 1, "period": "1m", "mode": "shadow"},
	)
	rl := s.limiterWith(t, ratelimit.Options{LogLevel: slog.LevelInfo}) // a line per shadow deny
	enforcing, shadow := ids[0], ids[1]
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(http.ResponseWriter, *http.Request) {})
	obs := recorder{got: make(chan ratelimit.Decision, 3)}
	h := rl.Handler(mux, ratelimit.HandlerOptions{API: "shadow", Observer: obs})
	before := len(s.out.String())
	for i := range 3 {
		r := httptest.NewRequest("GET", "/items/7", nil)
		r.Header.Set("X-Api-Key", "shadow-caller")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("request %d = %d, want 200: a shadow rule never denies", i+1, w.Code)
		}
		d := <-obs.got
		want := ratelimit.Decision{API: "shadow", Rule: enforcing, Outcome: ratelimit.OutcomeAllow}
		if i > 0 {
			want.Rule, want.Outcome = shadow, ratelimit.OutcomeShadowDeny
		}
		if d.Rule != want.Rule || d.Outcome != want.Outcome {
			t.Errorf("request %d observed rule %s %s, want %s %s (enforcing %s, shadow %s)", i+1, d.Rule, d.Outcome, want.Rule, want.Outcome, enforcing, shadow)
		}
	}
	var lines int
	sc := bufio.NewScanner(strings.NewReader(s.out.String()[before:]))
	for sc.Scan() {
		var l struct{ Decision, RuleID string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Decision == "shadow-deny" {
			lines++
			if l.RuleID != shadow {
				t.Errorf("shadow-deny line names rule %s, want the shadow rule %s: %s", l.RuleID, shadow, sc.Text())
			}
		}
	}
	if lines != 2 {
		t.Errorf("%d shadow-deny lines, want 2", lines)
	}
}
