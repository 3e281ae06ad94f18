package sluice_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/admin"
)

// TestAdminReadPolicy synthesizes a RestApi serving every admin route, as
// the reference stack builds it, with NewAdminReadPolicy and
// GrantAdminRead, then walks the template's methods: each method's ARN
// (stage prod, a sample value for each path parameter) must be allowed
// by the policy when it is a GET and by no statement otherwise.
func TestAdminReadPolicy(t *testing.T) {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("S"), nil)
	api := awsapigateway.NewRestApi(stack, jsii.String("AdminApi"), nil)
	for _, r := range admin.Routes() {
		res := api.Root()
		for _, part := range strings.Split(strings.Trim(r.Resource, "/"), "/") {
			if child := res.GetResource(jsii.String(part)); child != nil {
				res = child
			} else {
				res = res.AddResource(jsii.String(part), nil)
			}
		}
		res.AddMethod(jsii.String(r.Method), awsapigateway.NewMockIntegration(nil), nil)
	}
	sluice.NewAdminReadPolicy(stack, "AdminRead", api)
	role := awsiam.NewRole(stack, jsii.String("Auditor"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
	sluice.GrantAdminRead(role, api)
	js := jsonOf(t, assertions.Template_FromStack(stack, nil))
	res := js["Resources"].(map[string]any)

	// The policies' resources: the literal tail of each Fn::Join, after
	// the API's id ("/*/GET/rules/*").
	var managed, granted []string
	for _, v := range res {
		r := v.(map[string]any)
		props, _ := r["Properties"].(map[string]any)
		var doc map[string]any
		switch r["Type"] {
		case "AWS::IAM::ManagedPolicy":
			doc = props["PolicyDocument"].(map[string]any)
		case "AWS::IAM::Policy":
			doc = props["PolicyDocument"].(map[string]any)
		default:
			continue
		}
		for _, st := range doc["Statement"].([]any) {
			s := st.(map[string]any)
			if s["Action"] != "execute-api:Invoke" || s["Effect"] != "Allow" {
				t.Errorf("%s statement %v, want only Allow execute-api:Invoke", r["Type"], s)
			}
			arns, ok := s["Resource"].([]any)
			if !ok {
				arns = []any{s["Resource"]}
			}
			for _, a := range arns {
				parts := a.(map[string]any)["Fn::Join"].([]any)[1].([]any)
				tail := parts[len(parts)-1].(string)
				if r["Type"] == "AWS::IAM::ManagedPolicy" {
					managed = append(managed, tail)
				} else {
					granted = append(granted, tail)
				}
			}
		}
	}
	if len(managed) == 0 || len(granted) == 0 {
		t.Fatalf("policy resources: managed %v, granted %v; want both", managed, granted)
	}

	// Each synthesized method's path, from its resource chain.
	pathOf := func(id any) string {
		var parts []string
		for {
			ref, ok := id.(map[string]any)["Ref"].(string)
			if !ok {
				break // Fn::GetAtt RootResourceId
			}
			r := res[ref].(map[string]any)["Properties"].(map[string]any)
			part := r["PathPart"].(string)
			if strings.HasPrefix(part, "{") {
				part = "sample-value"
			}
			parts = append([]string{part}, parts...)
			id = r["ParentId"]
		}
		return "/" + strings.Join(parts, "/")
	}
	methods := 0
	for _, v := range res {
		r := v.(map[string]any)
		if r["Type"] != "AWS::ApiGateway::Method" {
			continue
		}
		props := r["Properties"].(map[string]any)
		method := props["HttpMethod"].(string)
		if method == "OPTIONS" {
			continue
		}
		methods++
		arn := "/prod/" + method + pathOf(props["ResourceId"])
		for name, tails := range map[string][]string{"NewAdminReadPolicy": managed, "GrantAdminRead": granted} {
			allowed := false
			for _, tail := range tails {
				if globMatch(tail, arn) {
					allowed = true
				}
			}
			if want := method == "GET"; allowed != want {
				t.Errorf("%s allows %s = %v, want %v", name, arn, allowed, want)
			}
		}
	}
	if methods != len(admin.Routes()) {
		t.Errorf("template has %d admin methods, want %d", methods, len(admin.Routes()))
	}
}

// globMatch is IAM's wildcard match: "*" is any run of characters, "/"
// included.
func globMatch(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	if pattern[0] == '*' {
		for i := 0; i <= len(s); i++ {
			if globMatch(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	}
	return s != "" && (pattern[0] == s[0] || pattern[0] == '?') && globMatch(pattern[1:], s[1:])
}
