// Package events holds realistic sample Lambda events for every Sluice
// function, one JSON file each, named by function:
//
//	authorizer-rest*.json  events.APIGatewayCustomAuthorizerRequestTypeRequest (REST API REQUEST authorizer)
//	authorizer-http*.json  events.APIGatewayV2CustomAuthorizerV2Request (HTTP API, payload 2.0)
//	check-url*.json        events.LambdaFunctionURLRequest (check behind a Function URL)
//	check*.json            events.APIGatewayProxyRequest (POST /check through API Gateway)
//	admin-*.json           events.APIGatewayProxyRequest (the admin API),
//	                       named by the function that serves the route
//	                       (admin-read-rules-get.json: GET /rules/{id}, which
//	                       admin-read serves)
//	migrate*.json          cfn.Event plus ServiceToken: the CloudFormation custom
//	                       resource request the CDK Provider framework passes to
//	                       migrate (ResponseURL redacted to "...")
//
// Use them with `sam local invoke -e`, the Lambda Runtime Interface
// Emulator (curl -d @events/check.json
// localhost:8080/2015-03-31/functions/function/invocations) or the AWS
// console's test events. The test here decodes every file into its type,
// refusing fields the type lacks, and needs no servers. The tests that run
// the samples through the handlers in process and through the built
// binaries under the emulator, against a real Redis and PostgreSQL, live in
// ../e2e, so the samples never drift from the code.
package events
