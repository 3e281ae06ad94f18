// The admin API: every admin route, IAM-signed, on its own RestApi.

package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/internal/admin"
)

// adminRoute is one admin API method and the function serving it.
type adminRoute struct{ method, path, function string }

// adminRoutes are the admin API's methods: every admin route, in the
// order of admin.Routes, then the check function's.
var adminRoutes = func() []adminRoute {
	var rs []adminRoute
	for _, r := range admin.Routes() {
		rs = append(rs, adminRoute{r.Method, r.Resource, r.Function})
	}
	// The check function serves services not behind API Gateway; IAM-signed
	// like the admin routes.
	return append(rs, adminRoute{"POST", "/check", "check"})
}()

// newAdminAPI puts every admin route on its own RestApi with AWS_IAM auth, so
// its IAM denials stay 403 and are never rewritten to 429 by the gateway
// responses the authorizer needs.
func newAdminAPI(stack awscdk.Stack, fns map[string]awslambda.Function) awsapigateway.RestApi {
	api := awsapigateway.NewRestApi(stack, jsii.String("AdminApi"), &awsapigateway.RestApiProps{
		RestApiName:    jsii.String(*stack.StackName() + "-admin"),
		Description:    jsii.String("Sluice admin API: rules, plans, subjects, check"),
		CloudWatchRole: jsii.Bool(false), // newAPIGatewayAccount
		DeployOptions:  stageLogging(stack, "AdminApi"),
		DefaultMethodOptions: &awsapigateway.MethodOptions{
			AuthorizationType: awsapigateway.AuthorizationType_IAM,
		},
	})
	integrations := map[string]awsapigateway.LambdaIntegration{}
	for _, r := range adminRoutes {
		res := api.Root().ResourceForPath(jsii.String(r.path))
		in, ok := integrations[r.function]
		if !ok {
			in = awsapigateway.NewLambdaIntegration(fns[r.function], nil)
			integrations[r.function] = in
		}
		res.AddMethod(jsii.String(r.method), in, &awsapigateway.MethodOptions{
			AuthorizationType: awsapigateway.AuthorizationType_IAM,
		})
	}
	suppress(api, "AwsSolutions-COG4", "every admin method is AWS_IAM: callers are IAM principals with "+
		"SigV4-signed requests (cmd/sluice signs them), and IAM policy is the access control")
	suppress(api, "AwsSolutions-APIG2", "the admin functions validate every body and parameter themselves "+
		"(strict JSON decoding, a problem+json 400 per field, internal/httpapi); a gateway model would "+
		"duplicate that contract and drift from it")
	suppress(api, "AwsSolutions-APIG3", "IAM-signed requests only, for operators; a WAF web ACL (billed per "+
		"ACL and per request) is the account owner's edge policy, not part of Sluice")
	return api
}
