// The demo API: a mock echo behind the authorizer.

package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// The demo API's stage throttle: enough to try the limiter by hand, little
// for a flood of a public URL to cost (every request invokes the
// authorizer).
const (
	demoRateLimit  = 10 // requests a second, steady
	demoBurstLimit = 20
)

// newDemoAPI is a RestApi behind the authorizer, with a mock echo, to try
// the limiter without an application of your own.
func newDemoAPI(stack awscdk.Stack, a *sluice.Authorizer) awsapigateway.RestApi {
	deploy := stageLogging(stack, "DemoApi")
	deploy.ThrottlingRateLimit = jsii.Number(demoRateLimit)
	deploy.ThrottlingBurstLimit = jsii.Number(demoBurstLimit)
	api := awsapigateway.NewRestApi(stack, jsii.String("DemoApi"), &awsapigateway.RestApiProps{
		RestApiName:          jsii.String(*stack.StackName() + "-demo"),
		Description:          jsii.String("Sluice demo: a mock echo behind the rate limiter"),
		CloudWatchRole:       jsii.Bool(false), // newAPIGatewayAccount
		DeployOptions:        deploy,
		DefaultMethodOptions: a.MethodOptions(),
	})
	a.AddGatewayResponses(stack, "DemoApi", api)
	// The 200 carries the rate-limit fields as the 429 does: mapped from
	// the authorizer context, the one way a REST 200 gets them (sluice
	// verify checks them); in the body, numbers unquoted as the 429's.
	fields, declared := a.AllowedResponseParameters()
	echo := awsapigateway.NewMockIntegration(&awsapigateway.IntegrationOptions{
		RequestTemplates: &map[string]*string{"application/json": jsii.String(`{"statusCode": 200}`)},
		IntegrationResponses: &[]*awsapigateway.IntegrationResponse{{
			StatusCode: jsii.String("200"),
			ResponseTemplates: &map[string]*string{"application/json": jsii.String(
				`{"message":"allowed by Sluice","resource":"$context.resourcePath","remaining":$context.authorizer.remaining,"limit":$context.authorizer.limit}`)},
			ResponseParameters: &fields,
		}},
	})
	ok := &awsapigateway.MethodOptions{
		AuthorizationType: awsapigateway.AuthorizationType_CUSTOM,
		Authorizer:        a.Authorizer,
		MethodResponses:   &[]*awsapigateway.MethodResponse{{StatusCode: jsii.String("200"), ResponseParameters: &declared}},
	}
	api.Root().AddMethod(jsii.String("GET"), echo, ok)
	api.Root().AddResource(jsii.String("hello"), nil).AddMethod(jsii.String("GET"), echo, ok)
	api.Root().AddResource(jsii.String("orders"), nil).AddResource(jsii.String("{id}"), nil).AddMethod(jsii.String("ANY"), echo, ok)
	suppress(api, "AwsSolutions-COG4", "the methods' authorizer is the Sluice rate limiter itself, a Lambda "+
		"REQUEST authorizer: showing it is what the demo is for")
	suppress(api, "AwsSolutions-APIG2", "the demo's methods take no body, and their mock integration reads "+
		"no parameter")
	suppress(api, "AwsSolutions-APIG3", "a WAF web ACL (billed per ACL and per request) is the API owner's "+
		"edge policy; Sluice is the per-subject rate control this demo shows")
	return api
}
