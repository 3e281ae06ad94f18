package sluice_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// TestAddHTTPRoute: the routes take the wrapped Lambda as a payload 2.0
// integration, one route a method; the handler gets the deployment's
// environment, SUBJECT_SOURCES and RATELIMIT_HEADERS, and may read the
// deployment's secrets; props it cannot synthesize panic naming the field.
func TestAddHTTPRoute(t *testing.T) {
	stack := shopStack()
	api := awsapigatewayv2.NewHttpApi(stack, jsii.String("Api"), nil)
	fn := awslambda.NewFunction(stack, jsii.String("Orders"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PROVIDED_AL2023(), Handler: jsii.String("bootstrap"),
		Code: awslambda.Code_FromAsset(jsii.String("testdata/authorizer"), nil),
	})
	d := sluice.ImportDeployment(stack, "Sluice", &sluice.DeploymentAttributes{
		RedisURL: "rediss://redis.example:6379", DatabaseSecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice-db-AbCdEf",
		SubjectKeySecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice-key-GhIjKl",
	})
	for _, tt := range []struct {
		p    *sluice.HTTPRouteProps
		want string
	}{
		{&sluice.HTTPRouteProps{Path: "/x", Handler: fn}, "API is required"},
		{&sluice.HTTPRouteProps{API: api, Path: "x", Handler: fn}, "must start with /"},
		{&sluice.HTTPRouteProps{API: api, Path: "/x"}, "Handler is required"},
		{&sluice.HTTPRouteProps{API: api, Path: "/x", Handler: fn, RateLimitHeaders: "draft99"}, "RateLimitHeaders"},
	} {
		if msg := panicOf(func() { sluice.AddHTTPRoute(stack, "Bad", tt.p) }); !strings.Contains(msg, tt.want) {
			t.Errorf("AddHTTPRoute(%+v) panicked %q, want it to say %q", tt.p, msg, tt.want)
		}
	}
	routes := sluice.AddHTTPRoute(stack, "Orders", &sluice.HTTPRouteProps{
		API: api, Path: "/orders/{id}", Methods: []awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_GET, awsapigatewayv2.HttpMethod_POST},
		Handler: fn, Deployment: d, SubjectSources: "header:x-api-key,ip", RateLimitHeaders: "draft11,legacy",
	})
	if len(routes) != 2 {
		t.Fatalf("routes = %d, want 2", len(routes))
	}
	res, _ := resourcesOf(t, stack)
	keys := map[string]bool{}
	var env map[string]any
	var integrations, grants int
	for _, r := range res {
		switch r.Type {
		case "AWS::ApiGatewayV2::Route":
			keys[r.Properties["RouteKey"].(string)] = true
		case "AWS::ApiGatewayV2::Integration":
			integrations++
			if r.Properties["PayloadFormatVersion"] != "2.0" || r.Properties["IntegrationType"] != "AWS_PROXY" {
				t.Errorf("integration = %v, want AWS_PROXY with payload format 2.0", r.Properties)
			}
		case "AWS::Lambda::Function":
			env, _ = r.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		case "AWS::IAM::Policy":
			if s, _ := json.Marshal(r.Properties); strings.Contains(string(s), "secretsmanager:GetSecretValue") && strings.Contains(string(s), "sluice-key") {
				grants++
			}
		}
	}
	if !keys["GET /orders/{id}"] || !keys["POST /orders/{id}"] || len(keys) != 2 || integrations != 1 {
		t.Errorf("route keys %v, %d integrations; want GET and POST /orders/{id} on one integration", keys, integrations)
	}
	for k, want := range map[string]string{"REDIS_URL": "rediss://redis.example:6379", "SUBJECT_SOURCES": "header:x-api-key,ip",
		"RATELIMIT_HEADERS": "draft11,legacy", "SUBJECT_HMAC_KEY_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice-key-GhIjKl"} {
		if env[k] != want {
			t.Errorf("handler %s = %v, want %q", k, env[k], want)
		}
	}
	if grants != 1 {
		t.Errorf("%d policies let the handler read the subject key's secret, want 1", grants)
	}
}

// TestAddHTTPRouteVpc: a handler that shares a deployment in a VPC must
// run in the deployment's subnets, where its Redis and database admit it:
// one outside any VPC, or in other subnets, panics saying how to build
// it; one built with Deployment.Apply is taken.
func TestAddHTTPRouteVpc(t *testing.T) {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Shop"), &awscdk.StackProps{Env: &awscdk.Environment{Account: jsii.String("123456789012"), Region: jsii.String("eu-west-1")}})
	api := awsapigatewayv2.NewHttpApi(stack, jsii.String("Api"), nil)
	d := sluice.ImportDeployment(stack, "Sluice", &sluice.DeploymentAttributes{
		RedisURL: "rediss://redis.example:6379", DatabaseSecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice-db-AbCdEf",
		SubjectKeySecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice-key-GhIjKl",
		VpcID:               "vpc-0abc0000000000001", AvailabilityZones: []string{"eu-west-1a", "eu-west-1b"},
		SubnetIDs: []string{"subnet-0aaa0000000000001", "subnet-0aaa0000000000002"}, SecurityGroupIDs: []string{"sg-0aaa0000000000001"},
	})
	code := awslambda.Code_FromAsset(jsii.String("testdata/authorizer"), nil)
	outside := awslambda.NewFunction(stack, jsii.String("Outside"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PROVIDED_AL2023(), Handler: jsii.String("bootstrap"), Code: code,
	})
	other := awsec2.NewVpc(stack, jsii.String("Other"), nil)
	elsewhere := awslambda.NewFunction(stack, jsii.String("Elsewhere"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PROVIDED_AL2023(), Handler: jsii.String("bootstrap"), Code: code, Vpc: other,
	})
	inside := awslambda.NewFunction(stack, jsii.String("Inside"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PROVIDED_AL2023(), Handler: jsii.String("bootstrap"), Code: code,
		Vpc: d.Vpc(), VpcSubnets: d.Subnets(), SecurityGroups: &[]awsec2.ISecurityGroup{d.SecurityGroups()[0]},
	})
	for _, tt := range []struct {
		fn   awslambda.Function
		want string
	}{{outside, "outside any VPC"}, {elsewhere, "not one of the deployment's"}, {inside, ""}} {
		msg := panicOf(func() {
			sluice.AddHTTPRoute(stack, *tt.fn.Node().Id()+"Route", &sluice.HTTPRouteProps{API: api, Path: "/" + *tt.fn.Node().Id(), Handler: tt.fn, Deployment: d})
		})
		if tt.want == "" && msg != "" || tt.want != "" && !strings.Contains(msg, tt.want) {
			t.Errorf("AddHTTPRoute(%s) panicked %q, want %q", *tt.fn.Node().Id(), msg, tt.want)
		}
	}
}
