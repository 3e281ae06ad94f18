package sluice_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// skipSynth skips, with -short (make check), a test that synthesizes
// through jsii.
func skipSynth(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("synthesizes through jsii (node), seconds each: skipped with -short (make check)")
	}
}

// shopStack is the one stack, "Shop", of a new app, as a user's CDK app
// makes it.
func shopStack() awscdk.Stack {
	return awscdk.NewStack(awscdk.NewApp(nil), jsii.String("Shop"), nil)
}

// authorizedAPI adds to stack the authorizer "RateLimit" of p, on the
// prebuilt testdata/authorizer, and the RestApi "Api" of api, whose GET
// it guards.
func authorizedAPI(stack awscdk.Stack, p sluice.AuthorizerProps, api *awsapigateway.RestApiProps) (*sluice.Authorizer, awsapigateway.RestApi) {
	p.AssetDir = "testdata/authorizer"
	a := sluice.NewAuthorizer(stack, "RateLimit", &p)
	rest := awsapigateway.NewRestApi(stack, jsii.String("Api"), api)
	rest.Root().AddMethod(jsii.String("GET"), awsapigateway.NewMockIntegration(nil), a.MethodOptions())
	return a, rest
}

// resource is one resource of a synthesized template.
type resource struct {
	Type       string
	Properties map[string]any
}

// resourcesOf synthesizes stack and returns its template's resources by
// logical id, and the whole template as JSON.
func resourcesOf(t *testing.T, stack awscdk.Stack) (map[string]resource, string) {
	t.Helper()
	b, err := json.Marshal(assertions.Template_FromStack(stack, nil).ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct{ Resources map[string]resource }
	if err := json.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	return tmpl.Resources, string(b)
}

// jsonOf turns a template into plain maps and slices.
func jsonOf(t *testing.T, tmpl assertions.Template) map[string]any {
	t.Helper()
	b, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// panicOf returns what f panicked with, or "".
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func fmtValue(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
