package ratelimit_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/ratelimit"
)

// lambdaTestdata reads one of aws-lambda-go's own recorded events
// (events/testdata of the module version go.mod requires).
func lambdaTestdata(t *testing.T, name string) []byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Fatalf("go list aws-lambda-go: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "events", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var ev T
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// answer is what a wrapped integration handler answered, whatever its
// event kind.
type answer struct {
	status  int
	headers map[string]string // single-value, or each multi-value field's first value
	multi   bool              // the answer's headers are multi-value
	body    string
}

// TestLambdaIntegrations sends aws-lambda-go's recorded HTTP API (payload
// 2.0), REST proxy and ALB events (single- and multi-value headers)
// through the wrappers of a Limiter limiting by source IP, with a rule of
// 2 a minute on each: the user's handler answers the first two, with the
// RateLimit fields added (its own Cache-Control kept); the third is a 429
// with Retry-After, the fields and a problem document, in the event's
// header form, and the handler is not called.
func TestLambdaIntegrations(t *testing.T) {
	s := newSetup(t)
	s.addRules(t,
		map[string]any{"api": "aaaaaaaaaa", "route": "*", "subject": "*", "limit": 2, "period": "1m"}, // the HTTP API event's api id
		map[string]any{"api": "gy415nuibc", "route": "*", "subject": "*", "limit": 2, "period": "1m"}, // the REST event's
		map[string]any{"api": "web", "route": "GET /", "subject": "*", "limit": 2, "period": "1m"},    // the ALB's, named by the caller
	)
	rl := s.limiterWith(t, ratelimit.Options{Sources: "ip", Headers: "draft11,draft6"})
	var calls int
	own := map[string]string{"Cache-Control": "max-age=5", "Content-Type": "text/plain"}
	alb := ratelimit.HandlerOptions{API: "web", AllowHeaders: true, Resource: func(method, path string) string { return path },
		ForwardedHops: 1} // the load balancer appends the client address it saw

	for _, tt := range []struct {
		file string
		send func() answer
	}{
		{"apigw-v2-request-no-authorizer.json", func() answer {
			ev := decode[events.APIGatewayV2HTTPRequest](t, lambdaTestdata(t, "apigw-v2-request-no-authorizer.json"))
			r, err := rl.LimitHTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				calls++
				return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: clone(own), Body: "hi"}, nil
			}, ratelimit.HandlerOptions{AllowHeaders: true})(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			return answer{r.StatusCode, r.Headers, false, r.Body}
		}},
		{"apigw-request.json", func() answer {
			ev := decode[events.APIGatewayProxyRequest](t, lambdaTestdata(t, "apigw-request.json"))
			r, err := rl.LimitProxy(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				calls++
				return events.APIGatewayProxyResponse{StatusCode: 200, Headers: clone(own), Body: "hi"}, nil
			}, ratelimit.HandlerOptions{AllowHeaders: true})(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			return answer{r.StatusCode, r.Headers, false, r.Body}
		}},
		{"alb-lambda-target-request-headers-only.json", func() answer {
			ev := decode[events.ALBTargetGroupRequest](t, lambdaTestdata(t, "alb-lambda-target-request-headers-only.json"))
			r, err := rl.LimitALB(func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
				calls++
				return events.ALBTargetGroupResponse{StatusCode: 200, Headers: clone(own), Body: "hi"}, nil
			}, alb)(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			if r.MultiValueHeaders != nil {
				t.Errorf("ALB single-value answer has multi-value headers %v", r.MultiValueHeaders)
			}
			return answer{r.StatusCode, r.Headers, false, r.Body}
		}},
		{"alb-lambda-target-request-multivalue-headers.json", func() answer {
			ev := decode[events.ALBTargetGroupRequest](t, lambdaTestdata(t, "alb-lambda-target-request-multivalue-headers.json"))
			r, err := rl.LimitALB(func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
				calls++
				mv := map[string][]string{}
				for k, v := range own {
					mv[k] = []string{v}
				}
				return events.ALBTargetGroupResponse{StatusCode: 200, MultiValueHeaders: mv, Body: "hi"}, nil
			}, alb)(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			if r.Headers != nil {
				t.Errorf("ALB multi-value answer has single-value headers %v", r.Headers)
			}
			h := map[string]string{}
			for k, v := range r.MultiValueHeaders {
				h[k] = v[0]
			}
			return answer{r.StatusCode, h, true, r.Body}
		}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			calls = 0
			for i, want := range []string{"1", "0"} {
				a := tt.send()
				if a.status != 200 || a.body != "hi" || a.headers["Cache-Control"] != "max-age=5" || a.headers["RateLimit-Remaining"] != want || a.headers["RateLimit-Limit"] != "2" {
					t.Errorf("request %d = %+v, want the handler's answer with RateLimit-Remaining %s", i+1, a, want)
				}
			}
			a := tt.send()
			var p problem
			if err := json.Unmarshal([]byte(a.body), &p); a.status != 429 || err != nil || p.Status != 429 {
				t.Fatalf("third request = %+v, want 429 with a problem document", a)
			}
			for name, want := range map[string]string{"Retry-After": "30", "RateLimit-Remaining": "0", "Content-Type": "application/problem+json"} {
				if a.headers[name] != want {
					t.Errorf("429 %s = %q, want %q (headers %v)", name, a.headers[name], want, a.headers)
				}
			}
			if !strings.Contains(a.headers["RateLimit"], ";r=0;") {
				t.Errorf("429 RateLimit = %q, want r=0", a.headers["RateLimit"])
			}
			if calls != 2 {
				t.Errorf("handler called %d times, want 2: the denied event reached it", calls)
			}
		})
	}

	// An event whose source names no caller is 401, and never charged.
	ev := decode[events.APIGatewayV2HTTPRequest](t, lambdaTestdata(t, "apigw-v2-request-no-authorizer.json"))
	ev.RequestContext.HTTP.SourceIP = ""
	r, err := rl.LimitHTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		t.Error("handler called for an event without a subject")
		return events.APIGatewayV2HTTPResponse{}, nil
	}, ratelimit.HandlerOptions{})(context.Background(), ev)
	if err != nil || r.StatusCode != 401 || !strings.Contains(r.Body, ratelimit.ProblemTypeBase+"unauthorized") {
		t.Errorf("event without a source IP = %d %s (%v), want 401", r.StatusCode, r.Body, err)
	}
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
