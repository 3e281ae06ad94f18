package sluice_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// upstreamAuthorizer is authorizedAPI of p in stack, the authorizer
// reading the subject from context:tenant and invoking team-authorizer
// first.
func upstreamAuthorizer(stack awscdk.Stack, p sluice.AuthorizerProps) (*sluice.Authorizer, awsapigateway.RestApi) {
	p.SubjectSources = "context:tenant"
	p.Upstream = awslambda.Function_FromFunctionArn(stack, jsii.String("TeamAuthorizer"),
		jsii.String("arn:aws:lambda:eu-west-1:123456789012:function:team-authorizer"))
	return authorizedAPI(stack, p, nil)
}

// TestAuthorizerUpstream: with Upstream set, the authorizer gets the
// upstream's ARN as UPSTREAM_AUTHORIZER and lambda:InvokeFunction on it
// (and nothing else); with SubjectKey, the secret's ARN and a read grant.
func TestAuthorizerUpstream(t *testing.T) {
	skipSynth(t)
	stack := shopStack()
	upstreamAuthorizer(stack, sluice.AuthorizerProps{SubjectKey: sluice.NewSubjectKey(stack, "SubjectKey")})
	res, js := resourcesOf(t, stack)
	for _, want := range []string{
		`"UPSTREAM_AUTHORIZER":"arn:aws:lambda:eu-west-1:123456789012:function:team-authorizer"`,
		`"SUBJECT_SOURCES":"context:tenant"`,
		`"SUBJECT_HMAC_KEY_SECRET_ARN":{"Ref":"SubjectKey`,
	} {
		if !strings.Contains(js, want) {
			t.Errorf("template lacks %s", want)
		}
	}
	var invoke bool
	for _, r := range res {
		if r.Type != "AWS::IAM::Policy" {
			continue
		}
		pb, _ := json.Marshal(r.Properties)
		if strings.Contains(string(pb), `"Action":"lambda:InvokeFunction"`) &&
			strings.Contains(string(pb), "function:team-authorizer") {
			invoke = true
		}
	}
	if !invoke {
		t.Errorf("no policy grants lambda:InvokeFunction on the upstream:\n%s", js)
	}
}

// TestUpstreamDenialResponse: an upstream authorizer's denial reaches the
// client through the UNAUTHORIZED gateway response (the authorizer answers
// the error "Unauthorized": apigw's TestUpstreamChain), which is a 401
// without Retry-After or any rate-limit field; only ACCESS_DENIED, the
// Deny Sluice answers over a limit, is the 429 with Retry-After. API
// Gateway fixes one status per response type, so the two never share one.
func TestUpstreamDenialResponse(t *testing.T) {
	skipSynth(t)
	stack := shopStack()
	a, api := upstreamAuthorizer(stack, sluice.AuthorizerProps{})
	a.AddGatewayResponses(stack, "RateLimit", api)
	res, _ := resourcesOf(t, stack)
	byType := map[string]map[string]any{}
	for _, r := range res {
		if r.Type == "AWS::ApiGateway::GatewayResponse" {
			byType[r.Properties["ResponseType"].(string)] = r.Properties
		}
	}
	unauth, denied := byType["UNAUTHORIZED"], byType["ACCESS_DENIED"]
	if unauth == nil || denied == nil {
		t.Fatalf("gateway responses = %v, want UNAUTHORIZED and ACCESS_DENIED", byType)
	}
	if unauth["StatusCode"] != "401" || denied["StatusCode"] != "429" {
		t.Errorf("UNAUTHORIZED %v, ACCESS_DENIED %v; want 401 and 429", unauth["StatusCode"], denied["StatusCode"])
	}
	params, _ := unauth["ResponseParameters"].(map[string]any)
	for h, v := range params {
		if strings.Contains(strings.ToLower(h), "retry-after") || strings.Contains(strings.ToLower(h), "ratelimit") ||
			strings.Contains(fmtValue(v), "context.authorizer") {
			t.Errorf("UNAUTHORIZED maps %s = %v; an authorization failure carries no Retry-After or rate-limit field", h, v)
		}
	}
	body, _ := json.Marshal(unauth["ResponseTemplates"])
	if strings.Contains(string(body), "retryAfter") || !strings.Contains(string(body), "Unauthorized") {
		t.Errorf("UNAUTHORIZED body = %s, want Unauthorized and no retryAfter", body)
	}
	if p, _ := denied["ResponseParameters"].(map[string]any); p["gatewayresponse.header.Retry-After"] != "context.authorizer.retryAfter" {
		t.Errorf("ACCESS_DENIED Retry-After = %v, want context.authorizer.retryAfter", p["gatewayresponse.header.Retry-After"])
	}
}
