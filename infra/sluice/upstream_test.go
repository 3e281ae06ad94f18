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
