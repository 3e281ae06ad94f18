// Command infra is the Sluice CDK app: `npx cdk synth|diff|deploy` runs it
// (cdk.json: "go run ./infra"). It deploys the reference stack; context
// flags (-c key=value) select the bring-your-own and LocalStack variants:
//
//	vpcId=vpc-...          run in an existing VPC (looked up) instead of a new one
//	securityGroupIds=sg-a,sg-b     security groups for the Lambdas in that VPC
//	localstack=true        no VPC, no ElastiCache, no RDS (needs redisUrl and databaseUrl)
//	redisUrl=rediss://...  an existing Redis instead of ElastiCache
//	redisMode=cluster      REDIS_MODE for redisUrl: single (default), cluster or sentinel
//	redisAuthSecretArn=... Secrets Manager secret with the AUTH token of redisUrl
//	serverlessRedis=true   ElastiCache Serverless instead of a replication group
//	redisEngineVersion=7.2 the replication group's engine version (pinned)
//	databaseUrl=postgres://...     an existing PostgreSQL, in plain environment (dev only)
//	databaseSecretArn=...  an existing RDS connection secret instead of Aurora
//	databaseHost=...       host override for databaseSecretArn (e.g. an RDS Proxy)
//	stackName=Sluice       the CloudFormation stack name
//	assetRoot=build/arm64  where `make build` put the bootstraps
//	subjectSources=..., defaultLimit=...   authorizer settings
//	rateLimitHeaders=draft11,legacy        the 429's rate-limit fields (draft11, draft6, legacy)
//	nag=true               check the stack with cdk-nag's AwsSolutions pack: an
//	                       unsuppressed finding fails the synth (what TestNag checks)
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	props, name := propsFromContext(app)
	if _, err := NewStack(app, name, props); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if fmt.Sprint(app.Node().TryGetContext(jsii.String("nag"))) == "true" {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Reports: jsii.Bool(false)}), nil)
	}
	app.Synth(nil)
}

// propsFromContext reads the stack props from the CDK context.
func propsFromContext(app awscdk.App) (*StackProps, string) {
	get := func(key string) string {
		v := app.Node().TryGetContext(jsii.String(key))
		if v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
	p := &StackProps{
		StackProps: awscdk.StackProps{
			Description: jsii.String("Sluice: a serverless rate limiter for API Gateway"),
			Env: &awscdk.Environment{
				Account: envOrNil("CDK_DEFAULT_ACCOUNT"),
				Region:  envOrNil("CDK_DEFAULT_REGION"),
			},
		},
		AssetRoot:             get("assetRoot"),
		RedisURL:              get("redisUrl"),
		RedisMode:             get("redisMode"),
		RedisAuthSecretArn:    get("redisAuthSecretArn"),
		ServerlessRedis:       get("serverlessRedis") == "true",
		RedisEngineVersion:    get("redisEngineVersion"),
		DatabaseURL:           get("databaseUrl"),
		DatabaseSecretArn:     get("databaseSecretArn"),
		DatabaseHost:          get("databaseHost"),
		SubjectSources:        get("subjectSources"),
		DefaultLimit:          get("defaultLimit"),
		UpstreamAuthorizerArn: get("upstreamAuthorizerArn"),
		RateLimitHeaders:      get("rateLimitHeaders"),
		NoVpc:                 get("localstack") == "true",
		VpcID:                 get("vpcId"),
		SecurityGroupIDs:      splitList(get("securityGroupIds")),
	}
	name := get("stackName")
	if name == "" {
		name = "Sluice"
	}
	return p, name
}

func envOrNil(k string) *string {
	if v := os.Getenv(k); v != "" {
		return jsii.String(v)
	}
	return nil
}

// splitList splits a comma-separated context value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
