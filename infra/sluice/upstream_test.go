package sluice_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// TestAuthorizerUpstream: with Upstream set, the authorizer gets the
// upstream's ARN as UPSTREAM_AUTHORIZER and lambda:InvokeFunction on it
// (and nothing else); with SubjectKey, the secret's ARN and a read grant.
func TestAuthorizerUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("synthesizes through jsii (node), seconds each: skipped with -short (make check)")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Shop"), nil)
	team := awslambda.Function_FromFunctionArn(stack, jsii.String("TeamAuthorizer"),
		jsii.String("arn:aws:lambda:eu-west-1:123456789012:function:team-authorizer"))
	key := sluice.NewSubjectKey(stack, "SubjectKey")
	a := sluice.NewAuthorizer(stack, "RateLimit", &sluice.AuthorizerProps{
		FunctionProps:  sluice.FunctionProps{AssetDir: dir},
		SubjectSources: "context:tenant",
		Upstream:       team,
		SubjectKey:     key,
	})
	api := awsapigateway.NewRestApi(stack, jsii.String("Api"), nil)
	api.Root().AddMethod(jsii.String("GET"), awsapigateway.NewMockIntegration(nil), a.MethodOptions())
	tmpl := app.Synth(nil).GetStackByName(jsii.String("Shop")).Template()
	b, _ := json.Marshal(tmpl)
	js := string(b)
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
	for _, r := range tmpl.(map[string]any)["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] != "AWS::IAM::Policy" {
			continue
		}
		pb, _ := json.Marshal(r["Properties"])
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
	if testing.Short() {
		t.Skip("synthesizes through jsii (node), seconds each: skipped with -short (make check)")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Shop"), nil)
	team := awslambda.Function_FromFunctionArn(stack, jsii.String("TeamAuthorizer"),
		jsii.String("arn:aws:lambda:eu-west-1:123456789012:function:team-authorizer"))
	a := sluice.NewAuthorizer(stack, "RateLimit", &sluice.AuthorizerProps{
		FunctionProps: sluice.FunctionProps{AssetDir: dir}, SubjectSources: "context:tenant", Upstream: team,
	})
	api := awsapigateway.NewRestApi(stack, jsii.String("Api"), nil)
	api.Root().AddMethod(jsii.String("GET"), awsapigateway.NewMockIntegration(nil), a.MethodOptions())
	a.AddGatewayResponses(stack, "RateLimit", api)
	tmpl := app.Synth(nil).GetStackByName(jsii.String("Shop")).Template()
	byType := map[string]map[string]any{}
	for _, r := range tmpl.(map[string]any)["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] == "AWS::ApiGateway::GatewayResponse" {
			p := r["Properties"].(map[string]any)
			byType[p["ResponseType"].(string)] = p
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

func fmtValue(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
