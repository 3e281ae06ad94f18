package sluice_test

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// Attach Sluice to your own RestApi: one authorizer Lambda, compiled by the
// construct from the sluice version in your go.mod, the authorizer on the
// methods to limit, and the gateway responses that turn its Deny into a 429
// with Retry-After and RateLimit headers. (The Example sets AssetDir to a
// prebuilt stand-in so that it runs in a moment; your app leaves it out.)
func Example() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Shop"), nil)
	api := awsapigateway.NewRestApi(stack, jsii.String("ShopApi"), nil)
	orders := api.Root().AddResource(jsii.String("orders"), nil)
	db := awssecretsmanager.Secret_FromSecretNameV2(stack, jsii.String("Db"), jsii.String("sluice/db")) // RDS-style
	limiter := sluice.NewAuthorizer(stack, "RateLimit", &sluice.AuthorizerProps{
		FunctionProps: sluice.FunctionProps{AssetDir: "testdata/authorizer", Environment: map[string]string{
			"REDIS_URL": "rediss://my-redis.abc123.euw1.cache.amazonaws.com:6379", "DB_SECRET_ARN": *db.SecretArn()}},
		SubjectSources: "header:x-api-key", // and FunctionProps.Vpc when Redis lives in a VPC
	})
	db.GrantRead(limiter.Function, nil)
	limiter.AddGatewayResponses(stack, "RateLimit", api)
	orders.AddMethod(jsii.String("GET"), awsapigateway.NewHttpIntegration(jsii.String("https://backend.example.com/orders"), nil), limiter.MethodOptions())

	template := app.Synth(nil).GetStackByName(jsii.String("Shop")).Template().(map[string]any)
	for _, r := range template["Resources"].(map[string]any) {
		r := r.(map[string]any)
		switch p := r["Properties"].(map[string]any); r["Type"] {
		case "AWS::ApiGateway::Authorizer":
			fmt.Println("authorizer:", p["Type"], "ttl", p["AuthorizerResultTtlInSeconds"], "identity", p["IdentitySource"])
		case "AWS::ApiGateway::GatewayResponse":
			if p["ResponseType"] == "ACCESS_DENIED" {
				fmt.Println("deny becomes", p["StatusCode"])
			}
		}
	}
	// Unordered output:
	// authorizer: REQUEST ttl 0 identity method.request.header.x-api-key
	// deny becomes 429
}
