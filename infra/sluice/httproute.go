package sluice

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/internal/headers"
)

// HTTPRouteProps configure AddHTTPRoute.
type HTTPRouteProps struct {
	// API is the HTTP API the route is added to. Required.
	API awsapigatewayv2.IHttpApi
	// Path is the route's path, such as "/orders/{id}" (the resource the
	// rules name). Required.
	Path string
	// Methods are the route's methods, one route each. Default: ANY.
	Methods []awsapigatewayv2.HttpMethod
	// Handler is the route's Lambda integration: a Go function whose
	// handler is wrapped by ratelimit's LimitHTTPAPI, so a request over
	// its limit gets a 429 with Retry-After and the RateLimit fields, the
	// answer an HTTP API authorizer cannot give. Required.
	Handler awslambda.Function
	// Deployment, when set, is the Sluice deployment whose rules and
	// buckets the handler shares: its Environment (REDIS_URL,
	// DB_SECRET_ARN, SUBJECT_HMAC_KEY_SECRET_ARN, …) is added to the
	// handler's, and its secrets are made readable by it. Create the
	// function in the deployment's VPC (Deployment.Vpc, Subnets,
	// SecurityGroups): a function's VPC cannot be added afterwards.
	Deployment *Deployment
	// SubjectSources is the handler's SUBJECT_SOURCES: where the caller is
	// read from (header:<name>, query:<name>, ip, jwt:<claim>). Default:
	// unset, header:x-api-key.
	SubjectSources string
	// RateLimitHeaders is the handler's RATELIMIT_HEADERS, the dialects
	// of its RateLimit fields (draft11, draft6, legacy). Default: draft11.
	RateLimitHeaders string
}

// AddHTTPRoute adds routes of p.Path, one a method, to p.API, whose
// integration is p.Handler with payload format 2.0 (the event
// ratelimit.LimitHTTPAPI reads), and gives the handler what it needs to
// decide with the deployment's rules. It returns the routes. Like CDK's
// own constructs it panics on props it cannot synthesize, naming the
// field.
func AddHTTPRoute(scope constructs.Construct, id string, p *HTTPRouteProps) []awsapigatewayv2.HttpRoute {
	switch {
	case p == nil || p.API == nil:
		panic("sluice.AddHTTPRoute " + id + ": HTTPRouteProps.API is required")
	case !strings.HasPrefix(p.Path, "/"):
		panic(fmt.Sprintf("sluice.AddHTTPRoute %s: HTTPRouteProps.Path %q must start with /", id, p.Path))
	case p.Handler == nil:
		panic("sluice.AddHTTPRoute " + id + ": HTTPRouteProps.Handler is required")
	}
	if p.RateLimitHeaders != "" {
		if _, err := headers.Parse(p.RateLimitHeaders); err != nil {
			panic(fmt.Sprintf("sluice.AddHTTPRoute %s: HTTPRouteProps.RateLimitHeaders: %v", id, err))
		}
	}
	if d := p.Deployment; d != nil {
		if msg := outsideVpc(scope, p.Handler, d); msg != "" {
			panic(fmt.Sprintf("sluice.AddHTTPRoute %s: HTTPRouteProps.Handler %s", id, msg))
		}
		for k, v := range d.Environment() {
			p.Handler.AddEnvironment(jsii.String(k), jsii.String(v), nil)
		}
		d.GrantRead(p.Handler)
	}
	for k, v := range map[string]string{"SUBJECT_SOURCES": p.SubjectSources, "RATELIMIT_HEADERS": p.RateLimitHeaders} {
		if v != "" {
			p.Handler.AddEnvironment(jsii.String(k), jsii.String(v), nil)
		}
	}
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(id+"Integration"), p.Handler,
		&awsapigatewayv2integrations.HttpLambdaIntegrationProps{PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0()})
	methods := p.Methods
	if len(methods) == 0 {
		methods = []awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_ANY}
	}
	routes := make([]awsapigatewayv2.HttpRoute, 0, len(methods))
	for _, m := range methods {
		routes = append(routes, awsapigatewayv2.NewHttpRoute(scope, jsii.String(id+LogicalName(strings.ToLower(string(m)))), &awsapigatewayv2.HttpRouteProps{
			HttpApi:     p.API,
			RouteKey:    awsapigatewayv2.HttpRouteKey_With(jsii.String(p.Path), m),
			Integration: integration,
		}))
	}
	return routes
}

// outsideVpc says why fn cannot reach d's Redis and database, or "": a
// deployment in a VPC (its Redis admits no one else) needs fn in one of
// its subnets. A function's VPC cannot be changed after it is created.
func outsideVpc(scope constructs.Construct, fn awslambda.Function, d *Deployment) string {
	if d.vpc == nil {
		return ""
	}
	if !*fn.IsBoundToVpc() {
		return fmt.Sprintf("is outside any VPC, and the deployment's Redis and database are in VPC %s: "+
			"create the function with Deployment.Apply (its Vpc, Subnets and SecurityGroups)", d.attrs.VpcID)
	}
	cfn, ok := fn.Node().DefaultChild().(awslambda.CfnFunction)
	if !ok {
		return ""
	}
	resolved := awscdk.Stack_Of(scope).Resolve(cfn.VpcConfig())
	vc, _ := resolved.(map[string]any)
	ids, _ := vc["subnetIds"].([]any)
	for _, id := range ids {
		if s, ok := id.(string); !ok || !slices.Contains(d.attrs.SubnetIDs, s) {
			return fmt.Sprintf("is in subnet %v, not one of the deployment's %v: create the function with "+
				"Deployment.Apply (its Vpc, Subnets and SecurityGroups)", id, d.attrs.SubnetIDs)
		}
	}
	return ""
}
