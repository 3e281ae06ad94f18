// Command infra is the Sluice CDK app: `npx cdk synth|diff|deploy` runs it
// (cdk.json: "go run ./infra"). It deploys the reference stack; the context
// flags (-c key=value) are the fields of StackProps, listed with what each
// creates and needs in docs/deploy.md (contextFlags below is the list).
package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/envvar"
)

func main() {
	defer jsii.Close()
	if err := synthApp(nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// validateFlag is the context key that makes a template that fails the
// CloudFormation schema check fail the synth (cdk.json sets it).
const validateFlag = "@aws-cdk/core:validateAgainstDefaultRules"

// synthApp builds the app the context (and props, in tests) describes and
// synthesizes it. When a VPC lookup has no answer yet, the template holds
// CDK's placeholder VPC, whose subnet ids ("p-12345") the schema check
// rejects; the CLI looks the VPC up only after this first pass exits 0,
// then runs the app again with the answer. So that pass is built again
// with the check's findings as warnings: its template is never deployed,
// and the second pass is checked as every other.
func synthApp(props *awscdk.AppProps) error {
	app, stacks, err := build(props)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(stacks, func(s *Stack) bool { return s.LookupPending }) {
		p := awscdk.AppProps{}
		if props != nil {
			p = *props
		}
		post := map[string]any{}
		if p.PostCliContext != nil {
			maps.Copy(post, *p.PostCliContext)
		}
		post[validateFlag] = false
		p.PostCliContext = &post
		if app, _, err = build(&p); err != nil {
			return err
		}
	}
	app.Synth(nil)
	return nil
}

// build returns a new app with the stacks the context describes.
func build(props *awscdk.AppProps) (awscdk.App, []*Stack, error) {
	app := awscdk.NewApp(props)
	stacks, err := run(app)
	return app, stacks, err
}

// run adds the stacks the context describes to app: one, or with
// globalRegions one per Region, named <stackName>-<Region>, each a whole
// deployment. The first Region's creates the ledger and the subject hash
// key; the others depend on it, so `cdk deploy --all` deploys it first.
func run(app awscdk.App) ([]*Stack, error) {
	props, name, err := propsFromContext(app)
	if err != nil {
		return nil, err
	}
	var stacks []*Stack
	if props.Global == nil {
		stack, err := NewStack(app, name, props)
		if err != nil {
			return nil, err
		}
		stacks = append(stacks, stack)
	} else {
		for _, region := range props.Global.Regions {
			p := *props
			p.Env = &awscdk.Environment{Account: props.Env.Account, Region: jsii.String(region)}
			stack, err := NewStack(app, name+"-"+region, &p)
			if err != nil {
				return nil, err
			}
			if len(stacks) > 0 {
				stack.AddStackDependency(stacks[0].Stack, jsii.String("the ledger and the subject hash key are created in "+props.Global.Regions[0]))
			}
			stacks = append(stacks, stack)
		}
	}
	if fmt.Sprint(app.Node().TryGetContext(jsii.String("nag"))) == "true" {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Reports: jsii.Bool(false)}), nil)
	}
	return stacks, nil
}

// contextFlags are the context keys the app reads, each with the
// StackProps field it sets (docs/deploy.md has a row for each: TestDeployDocFlags).
var contextFlags = []string{
	"stackName", "profile", "assetRoot", "nag",
	"vpcId", "securityGroupIds", "natGateways", "vpcEndpoints", "localstack",
	"redisUrl", "redisMode", "redisAuthSecretArn", "serverlessRedis", "redisEngine", "redisEngineVersion", "redisNodeType",
	"databaseUrl", "databaseSecretArn", "databaseHost", "databaseDeletionProtection", "databaseBackupRetentionDays",
	"subjectSources", "defaultLimit", "rateLimitHeaders", "upstreamAuthorizerArn",
	"jwtIssuer", "jwtAudience", "jwtTokenUse", "jwtJwksUrl",
	"authorizerMemory", "authorizerReservedConcurrency", "functionMemory", "adminReservedConcurrency", "logLevel",
	"alarmEmail", "alarmTopicArn", "authorizerP99Millis", "protectedApiNames", "maintenanceWindow", "limitsFile",
	"demoApi", "apiGatewayAccount", "executionLogGroups", "globalRegions", "globalWitness", "ledgerDestroy", "globalRegionSet",
	"edge",
}

// propsFromContext reads the stack props from the CDK context, reporting
// every malformed value at once.
func propsFromContext(app awscdk.App) (*StackProps, string, error) {
	get := func(key string) string {
		v := app.Node().TryGetContext(jsii.String(key))
		if v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
	var errs []error
	num := func(key string) float64 {
		v := get(key)
		if v == "" {
			return 0
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			errs = append(errs, fmt.Errorf("-c %s=%s: want a number", key, v))
		}
		return f
	}
	boolean := func(key string, def bool) bool {
		switch v := get(key); v {
		case "":
			return def
		case "true", "false":
			return v == "true"
		default:
			errs = append(errs, fmt.Errorf("-c %s=%s: want true or false", key, v))
			return def
		}
	}
	p := &StackProps{
		StackProps: awscdk.StackProps{
			Description: jsii.String("Sluice: a serverless rate limiter for API Gateway"),
			Env: &awscdk.Environment{
				Account: envOrNil("CDK_DEFAULT_ACCOUNT"),
				Region:  envOrNil("CDK_DEFAULT_REGION"),
			},
		},
		Profile:                       get("profile"),
		AssetRoot:                     get("assetRoot"),
		RedisURL:                      get("redisUrl"),
		RedisMode:                     get("redisMode"),
		RedisAuthSecretArn:            get("redisAuthSecretArn"),
		ServerlessRedis:               boolean("serverlessRedis", false),
		RedisEngine:                   get("redisEngine"),
		RedisEngineVersion:            get("redisEngineVersion"),
		RedisNodeType:                 get("redisNodeType"),
		DatabaseURL:                   get("databaseUrl"),
		DatabaseSecretArn:             get("databaseSecretArn"),
		DatabaseHost:                  get("databaseHost"),
		DatabaseDeletionProtection:    boolean("databaseDeletionProtection", false),
		DatabaseBackupRetentionDays:   int(num("databaseBackupRetentionDays")),
		SubjectSources:                get("subjectSources"),
		DefaultLimit:                  get("defaultLimit"),
		UpstreamAuthorizerArn:         get("upstreamAuthorizerArn"),
		RateLimitHeaders:              get("rateLimitHeaders"),
		JWTIssuer:                     get("jwtIssuer"),
		JWTAudience:                   get("jwtAudience"),
		JWTTokenUse:                   get("jwtTokenUse"),
		JWTJWKSURL:                    get("jwtJwksUrl"),
		AuthorizerMemory:              num("authorizerMemory"),
		AuthorizerReservedConcurrency: num("authorizerReservedConcurrency"),
		FunctionMemory:                num("functionMemory"),
		AdminReservedConcurrency:      num("adminReservedConcurrency"),
		LogLevel:                      get("logLevel"),
		AuthorizerP99Millis:           num("authorizerP99Millis"),
		AlarmTopicArn:                 get("alarmTopicArn"),
		AlarmEmail:                    get("alarmEmail"),
		ProtectedAPINames:             envvar.List(get("protectedApiNames")),
		MaintenanceWindow:             get("maintenanceWindow"),
		LimitsName:                    get("limitsFile"),
		NoDemoAPI:                     !boolean("demoApi", true),
		Edge:                          get("edge"),
		NoAPIGatewayAccount:           !boolean("apiGatewayAccount", true),
		NoExecutionLogGroups:          !boolean("executionLogGroups", true),
		NoVpc:                         boolean("localstack", false),
		VpcID:                         get("vpcId"),
		SecurityGroupIDs:              envvar.List(get("securityGroupIds")),
		NatGateways:                   int(num("natGateways")),
		VpcEndpoints:                  get("vpcEndpoints"),
	}
	if p.LimitsName != "" {
		// Read at synth: the file's content is the migration's Limits
		// property, so a change to it is a change of the template.
		b, err := os.ReadFile(p.LimitsName)
		if err != nil {
			errs = append(errs, fmt.Errorf("-c limitsFile=%s: %w", p.LimitsName, err))
		}
		p.Limits = string(b)
	}
	name := cmp.Or(get("stackName"), "Sluice")
	if regions := envvar.List(get("globalRegions")); len(regions) > 0 || get("globalWitness") != "" {
		p.Global = &Global{Regions: regions, Witness: get("globalWitness"), Name: name, DestroyLedger: boolean("ledgerDestroy", false),
			RegionSet: envvar.List(get("globalRegionSet"))}
		if err := sluice.CheckGlobalRegions(regions, p.Global.Witness, p.Global.RegionSet...); err != nil {
			errs = append(errs, fmt.Errorf("-c globalRegions: %w", err))
		}
		// Each of these names one Region's resource, and every Region's
		// stack would get it.
		for _, k := range []string{"vpcId", "securityGroupIds", "redisUrl", "redisAuthSecretArn", "databaseUrl",
			"databaseSecretArn", "databaseHost", "alarmTopicArn", "upstreamAuthorizerArn", "localstack"} {
			if get(k) != "" {
				errs = append(errs, fmt.Errorf("-c %s with -c globalRegions: it names one Region's resource, and every "+
					"Region's stack creates its own; bring per-Region resources with StackProps (infra/props.go) instead", k))
			}
		}
	} else {
		for _, k := range []string{"ledgerDestroy", "globalRegionSet"} {
			if get(k) != "" {
				errs = append(errs, fmt.Errorf("-c %s applies with -c globalRegions only", k))
			}
		}
	}
	return p, name, errors.Join(errs...)
}
func envOrNil(k string) *string {
	if v := os.Getenv(k); v != "" {
		return jsii.String(v)
	}
	return nil
}
