package sluice

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/internal/admin"
)

// AdminReadArns are the execute-api ARNs of the admin API's read routes
// (admin.ReadRoutes: every GET, on any stage) on api, a RestApi serving
// admin.Routes(): what a read-only operator may invoke. A path parameter
// becomes "*".
func AdminReadArns(api awsapigateway.IRestApi) []*string {
	var arns []*string
	for _, r := range admin.ReadRoutes() {
		arns = append(arns, api.ArnForExecuteApi(jsii.String(r.Method), jsii.String(arnPath(r.Resource)), jsii.String("*")))
	}
	return arns
}

// arnPath is a resource template as an execute-api ARN's path:
// "/rules/{id}/history" is "/rules/*/history".
func arnPath(resource string) string {
	parts := strings.Split(resource, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, "/")
}

// NewAdminReadPolicy is a managed policy for a read-only operator of the
// admin API api: execute-api:Invoke on its read routes (AdminReadArns)
// and nothing else. Attach it to a role or group; such a principal lists
// and reads rules, plans, their history, a subject's limits and the
// stats, and every write gets API Gateway's 403.
func NewAdminReadPolicy(scope constructs.Construct, id string, api awsapigateway.IRestApi) awsiam.ManagedPolicy {
	return awsiam.NewManagedPolicy(scope, jsii.String(id), &awsiam.ManagedPolicyProps{
		Description: jsii.String("Sluice admin API, read only: every GET route (rules, plans, history, limits, stats), no write."),
		Document: awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{
			Statements: &[]awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings("execute-api:Invoke"),
				Resources: ptrSlice(AdminReadArns(api)),
			})},
		}),
	})
}

// GrantAdminRead lets grantee invoke the admin API's read routes on api,
// and nothing else of it (see NewAdminReadPolicy for a policy to attach
// by hand).
func GrantAdminRead(grantee awsiam.IGrantable, api awsapigateway.IRestApi) awsiam.Grant {
	return awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee:      grantee,
		Actions:      jsii.Strings("execute-api:Invoke"),
		ResourceArns: ptrSlice(AdminReadArns(api)),
	})
}

func ptrSlice(s []*string) *[]*string { return &s }
