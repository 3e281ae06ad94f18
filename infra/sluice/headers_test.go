package sluice_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/denial"
)

// TestGatewayResponseDialects synthesizes one stack per RateLimitHeaders
// value (in one app: each synth is a node round trip) and checks the 429's
// response parameters, exactly, and the authorizer's RATELIMIT_HEADERS.
func TestGatewayResponseDialects(t *testing.T) {
	skipSynth(t)
	draft11 := map[string]string{"RateLimit-Policy": "rateLimitPolicy", "RateLimit": "rateLimit"}
	draft6 := map[string]string{"RateLimit-Limit": "limit", "RateLimit-Remaining": "remaining", "RateLimit-Reset": "reset"}
	legacy := map[string]string{"X-RateLimit-Limit": "limit", "X-RateLimit-Remaining": "remaining", "X-RateLimit-Reset": "resetAt"}
	tests := []struct {
		headers string
		env     any // RATELIMIT_HEADERS, nil when not set
		fields  []map[string]string
		method  bool // Authorizer.AddGatewayResponses rather than the package function
	}{
		{"", nil, []map[string]string{draft11}, false},
		{"", nil, []map[string]string{draft11}, true},
		{"draft11", "draft11", []map[string]string{draft11}, true},
		{"draft6", "draft6", []map[string]string{draft6}, true},
		{"legacy", "legacy", []map[string]string{legacy}, true},
		{" Legacy, draft11 ,draft6", "draft11,draft6,legacy", []map[string]string{draft11, draft6, legacy}, true},
	}
	app := awscdk.NewApp(nil)
	stacks := make([]awscdk.Stack, len(tests))
	for i, tt := range tests {
		stack := awscdk.NewStack(app, jsii.String(fmt.Sprintf("S%d", i)), nil)
		a, api := authorizedAPI(stack, sluice.AuthorizerProps{RateLimitHeaders: tt.headers}, nil)
		if tt.method {
			a.AddGatewayResponses(stack, "RateLimit", api)
		} else {
			sluice.AddGatewayResponses(stack, "RateLimit", api)
		}
		stacks[i] = stack
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%q method=%v", tt.headers, tt.method), func(t *testing.T) {
			js := jsonOf(t, assertions.Template_FromStack(stacks[i], nil))
			want := map[string]any{
				"gatewayresponse.header.Retry-After":  "context.authorizer.retryAfter",
				"gatewayresponse.header.Content-Type": "'application/json'",
			}
			for _, m := range tt.fields {
				for h, key := range m {
					want["gatewayresponse.header."+h] = "context.authorizer." + key
				}
			}
			var got any
			var env any
			bodies := map[string]any{}
			for _, r := range js["Resources"].(map[string]any) {
				r := r.(map[string]any)
				props, _ := r["Properties"].(map[string]any)
				switch r["Type"] {
				case "AWS::ApiGateway::GatewayResponse":
					typ, _ := props["ResponseType"].(string)
					bodies[typ] = props["ResponseTemplates"].(map[string]any)["application/json"]
					if typ == "ACCESS_DENIED" {
						got = props["ResponseParameters"]
					}
				case "AWS::Lambda::Function":
					if e, ok := props["Environment"].(map[string]any); ok {
						env = e["Variables"].(map[string]any)["RATELIMIT_HEADERS"]
					}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("429 ResponseParameters (-want +got):\n%s", diff)
			}
			// The bodies are internal/denial's, which sluice local renders
			// (its test holds the two equal).
			wantBodies := map[string]any{
				"ACCESS_DENIED": denial.TooManyRequests(0).Template(),
				"UNAUTHORIZED":  denial.Unauthorized().Template(),
			}
			if diff := cmp.Diff(wantBodies, bodies); diff != "" {
				t.Errorf("gateway response bodies (-want +got):\n%s", diff)
			}
			if env != tt.env {
				t.Errorf("RATELIMIT_HEADERS = %v, want %v", env, tt.env)
			}
		})
	}
}

func TestAuthorizerUnknownDialect(t *testing.T) {
	skipSynth(t)
	defer func() {
		r := recover()
		if msg := fmt.Sprint(r); r == nil || !strings.Contains(msg, "RateLimitHeaders") || !strings.Contains(msg, `"x-ratelimit"`) {
			t.Errorf("NewAuthorizer(RateLimitHeaders: x-ratelimit) panic = %v, want one naming the prop and the dialect", r)
		}
	}()
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), nil)
	sluice.NewAuthorizer(stack, "RateLimit", &sluice.AuthorizerProps{
		FunctionProps:    sluice.FunctionProps{AssetDir: "testdata/authorizer"},
		RateLimitHeaders: "x-ratelimit",
	})
}
