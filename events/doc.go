// Package events holds realistic sample Lambda events for every Sluice
// function, one JSON file each, named by function:
//
//	authorizer-rest*.json  events.APIGatewayCustomAuthorizerRequestTypeRequest (REST API REQUEST authorizer)
//	authorizer-http*.json  events.APIGatewayV2CustomAuthorizerV2Request (HTTP API, payload 2.0)
//	check-url*.json        events.LambdaFunctionURLRequest (check behind a Function URL)
//	check*.json            events.APIGatewayProxyRequest (POST /check through API Gateway)
//	admin-*.json           events.APIGatewayProxyRequest (the admin API)
//	migrate*.json          cfn.Event plus ServiceToken: the CloudFormation custom
//	                       resource request the CDK Provider framework passes to
//	                       migrate (ResponseURL redacted to "...")
//
// Use them with `sam local invoke -e`, the Lambda Runtime Interface
// Emulator (curl -d @events/check.json
// localhost:8080/2015-03-31/functions/function/invocations) or the AWS
// console's test events. The tests here decode every file into its type and
// run it through its handler against a real Redis and PostgreSQL, so the
// samples never drift from the code: in process (all but migrate, whose
// handler is its main package), and through the built bootstrap binaries
// under the emulator, configured from the environment as in Lambda: the
// authorizer and check; migrate, on an empty database it then migrates;
// admin-plans-create, admin-rules-create, -get and -list on that database.
package events
