package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticache"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsrds"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/admin"
)

// StackProps configures the reference Sluice stack. The zero value (plus
// awscdk.StackProps) deploys everything: VPC, ElastiCache, Aurora, Lambdas,
// APIs, alarms. The bring-your-own fields replace the VPC, Redis or the
// database with ones you already run.
type StackProps struct {
	awscdk.StackProps

	// AssetRoot holds one directory per function with its `bootstrap`.
	// Default: sluice.DefaultAssetRoot ("build/arm64", `make build` output).
	AssetRoot string

	// Vpc is an existing VPC to run in. Default: a new VPC over 2 AZs with
	// isolated subnets only and a Secrets Manager endpoint.
	Vpc awsec2.IVpc
	// VpcSubnets selects the subnets of Vpc for the Lambdas and data stores.
	// Default: the isolated subnets of the new VPC; CDK's default for Vpc.
	VpcSubnets *awsec2.SubnetSelection
	// SecurityGroups are given to every Lambda, e.g. the groups your own Redis
	// and database admit. Default: one group created here.
	SecurityGroups []awsec2.ISecurityGroup
	// VpcID looks up an existing VPC by id (needs the stack's account and
	// region; the CLI provides them). Ignored when Vpc is set.
	VpcID string
	// SecurityGroupIDs are looked up and given to every Lambda, like
	// SecurityGroups.
	SecurityGroupIDs []string
	// NoVpc runs the Lambdas outside any VPC and creates none (LocalStack).
	// Requires RedisURL and a database.
	NoVpc bool

	// RedisURL of an existing Redis (redis:// or rediss://). Set, no
	// ElastiCache is created. Default: a new ElastiCache replication group.
	RedisURL string
	// RedisMode is REDIS_MODE for RedisURL: "single", "cluster" or
	// "sentinel" (RedisURL then names the sentinels and master_name).
	// Default: "single".
	RedisMode string
	// RedisAuthSecretArn is a Secrets Manager secret holding the AUTH token
	// of RedisURL, by complete ARN (with the 6-character suffix) or partial
	// ARN (without). Default: none.
	RedisAuthSecretArn string
	// ServerlessRedis creates ElastiCache Serverless instead of a replication
	// group (only without RedisURL).
	ServerlessRedis bool
	// RedisNodeType of the replication group. Default: "cache.t4g.small".
	RedisNodeType string
	// RedisEngine is "valkey" or "redis". Default: "valkey".
	RedisEngine string
	// RedisEngineVersion of the replication group, pinned so that a deploy
	// never picks up whatever ElastiCache's default is that day. ElastiCache
	// upgrades in place but cannot downgrade: a stack created before the pin
	// must set the major.minor version its nodes run (describe-cache-clusters)
	// or a newer one. Default: "7.2" for valkey, "7.1" for redis (the last Redis OSS).
	RedisEngineVersion string

	// DatabaseURL of an existing PostgreSQL, passed as DATABASE_URL in plain
	// environment: for LocalStack and development only. Set, no Aurora is
	// created.
	DatabaseURL string
	// DatabaseSecretArn is an existing RDS-style connection secret (JSON:
	// username, password, host, port, dbname), by complete or partial ARN.
	// Set, no Aurora is created.
	DatabaseSecretArn string
	// DatabaseHost overrides the secret's host (DB_HOST), e.g. an RDS Proxy.
	DatabaseHost string

	// AuthorizerMemory in MiB. Default: 512 (more memory, more CPU: the
	// authorizer is on every request's path).
	AuthorizerMemory float64
	// AuthorizerReservedConcurrency caps the authorizer. Default 0: none.
	AuthorizerReservedConcurrency float64
	// FunctionMemory of the other Lambdas in MiB. Default: 256.
	FunctionMemory float64
	// AdminReservedConcurrency caps each admin Lambda. Default 0: none.
	AdminReservedConcurrency float64

	// SubjectSources is the authorizer's SUBJECT_SOURCES. Default: the
	// authorizer's default.
	SubjectSources string
	// DefaultLimit is the authorizer's DEFAULT_LIMIT ("" = allow when no rule
	// matches; "100/1m,burst=200").
	DefaultLimit string
	// RateLimitHeaders is the authorizer's and the check function's
	// RATELIMIT_HEADERS, and the fields of the demo API's 429 (see
	// sluice.AuthorizerProps.RateLimitHeaders). Default: "draft11".
	RateLimitHeaders string
	// UpstreamAuthorizerArn is an existing Lambda authorizer the Sluice
	// authorizer invokes first (UPSTREAM_AUTHORIZER), granted
	// lambda:InvokeFunction on it. Default: none.
	UpstreamAuthorizerArn string
	// LogLevel is LOG_LEVEL of every function. Default: "info".
	LogLevel string

	// AuthorizerP99Millis is the p99 duration alarm threshold. Default: 50.
	AuthorizerP99Millis float64
	// MigrateNonce is passed to the migrate custom resource: a new value runs
	// the migrations again. Default: the synth time, so every deploy migrates.
	MigrateNonce string
}

// byoDatabase reports whether the props name an existing database.
func (p *StackProps) byoDatabase() bool { return p.DatabaseURL != "" || p.DatabaseSecretArn != "" }

func (p *StackProps) validate() error {
	var errs []error
	if p.NoVpc && p.RedisURL == "" {
		errs = append(errs, errors.New("NoVpc requires RedisURL: ElastiCache needs a VPC"))
	}
	if p.NoVpc && !p.byoDatabase() {
		errs = append(errs, errors.New("NoVpc requires DatabaseURL or DatabaseSecretArn: Aurora needs a VPC"))
	}
	if p.NoVpc && (p.Vpc != nil || p.VpcID != "") {
		errs = append(errs, errors.New("NoVpc and Vpc/VpcID are exclusive"))
	}
	if p.DatabaseURL != "" && p.DatabaseSecretArn != "" {
		errs = append(errs, errors.New("DatabaseURL and DatabaseSecretArn are exclusive"))
	}
	if _, err := sluice.ResponseHeaders(p.RateLimitHeaders); err != nil {
		errs = append(errs, fmt.Errorf("RateLimitHeaders: %w", err))
	}
	if p.RedisURL != "" && !strings.HasPrefix(p.RedisURL, "redis://") && !strings.HasPrefix(p.RedisURL, "rediss://") {
		errs = append(errs, fmt.Errorf("RedisURL %q: want redis:// or rediss://", p.RedisURL))
	}
	if p.RedisMode != "" && p.RedisMode != "single" && p.RedisMode != "cluster" && p.RedisMode != "sentinel" {
		errs = append(errs, fmt.Errorf("RedisMode %q: want single, cluster or sentinel", p.RedisMode))
	}
	for _, f := range [...]struct{ field, arn string }{
		{"RedisAuthSecretArn", p.RedisAuthSecretArn},
		{"DatabaseSecretArn", p.DatabaseSecretArn},
	} {
		if f.arn != "" && !secretARN.MatchString(f.arn) {
			errs = append(errs, fmt.Errorf("%s %q: want a Secrets Manager secret ARN, arn:aws:secretsmanager:<region>:<account>:secret:<name>[-<6-character suffix>]", f.field, f.arn))
		}
	}
	return errors.Join(errs...)
}

var (
	// secretARN matches a Secrets Manager secret ARN, complete or partial.
	secretARN = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[^:]+$`)
	// secretSuffix is the hyphen and 6 random letters or digits Secrets
	// Manager appends to the name in a secret's complete ARN.
	secretSuffix = regexp.MustCompile(`-[A-Za-z0-9]{6}$`)
)

// importSecret imports an existing secret by its ARN. A complete ARN (the
// name plus Secrets Manager's 6-character suffix) is granted as it is. A
// partial ARN (the name alone) must be imported as partial: CDK then grants
// on <arn>-?????? to match the suffix, where a grant on the partial ARN itself
// would match no secret and every read would be denied. The suffix cannot be
// told from a name that ends the same way (a secret named "db-prod01"): give
// such a secret's complete ARN.
func importSecret(stack awscdk.Stack, id, arn string) awssecretsmanager.ISecret {
	if secretIsComplete(arn) {
		return awssecretsmanager.Secret_FromSecretCompleteArn(stack, jsii.String(id), jsii.String(arn))
	}
	return awssecretsmanager.Secret_FromSecretPartialArn(stack, jsii.String(id), jsii.String(arn))
}

// secretIsComplete reports whether the secret ARN ends in the suffix.
func secretIsComplete(arn string) bool {
	_, name, _ := strings.Cut(arn, ":secret:")
	return secretSuffix.MatchString(name)
}

// Stack is the reference Sluice deployment.
type Stack struct {
	awscdk.Stack
	Authorizer *sluice.Authorizer
	Functions  map[string]awslambda.Function
	AdminAPI   awsapigateway.RestApi
	DemoAPI    awsapigateway.RestApi
}

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

// redis is what the Lambdas need to reach Redis and what the alarms watch.
type redis struct {
	url, mode  string
	authSecret awssecretsmanager.ISecret
	cpu, mem   awscloudwatch.IMetric // nil when not ours to watch
}

// database is what the Lambdas need to reach PostgreSQL.
type database struct {
	env    map[string]string
	secret awssecretsmanager.ISecret
	// dependable is what the migration must wait for (nil for BYO).
	dependable constructs.IConstruct
}

// NewStack builds the reference stack.
func NewStack(scope constructs.Construct, id string, p *StackProps) (*Stack, error) {
	if p == nil {
		p = &StackProps{}
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("sluice stack %s: %w", id, err)
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &p.StackProps)
	s := &Stack{Stack: stack, Functions: map[string]awslambda.Function{}}

	vpc, subnets := p.Vpc, p.VpcSubnets
	if vpc == nil && p.VpcID != "" {
		vpc = awsec2.Vpc_FromLookup(stack, jsii.String("Vpc"), &awsec2.VpcLookupOptions{VpcId: jsii.String(p.VpcID)})
	}
	sgs := append([]awsec2.ISecurityGroup(nil), p.SecurityGroups...)
	for i, id := range p.SecurityGroupIDs {
		sgs = append(sgs, awsec2.SecurityGroup_FromSecurityGroupId(stack, jsii.String(fmt.Sprintf("FunctionsSg%d", i)), jsii.String(id), nil))
	}
	// What the migration's Delete needs until it has run: the Secrets
	// Manager endpoint of the VPC created here (a VPC you bring keeps its
	// own route to Secrets Manager).
	var migrationNeeds []constructs.IDependable
	if vpc == nil && !p.NoVpc {
		var endpoint awsec2.InterfaceVpcEndpoint
		vpc, endpoint = newVpc(stack)
		migrationNeeds = append(migrationNeeds, endpoint)
		subnets = &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED}
	}
	var fnSGs []awsec2.ISecurityGroup
	if vpc != nil {
		fnSGs = sgs
		if len(fnSGs) == 0 {
			fnSGs = []awsec2.ISecurityGroup{awsec2.NewSecurityGroup(stack, jsii.String("FunctionsSg"), &awsec2.SecurityGroupProps{
				Vpc:              vpc,
				Description:      jsii.String("Sluice Lambdas"),
				AllowAllOutbound: jsii.Bool(true),
			})}
		}
	}

	rd := newRedis(stack, p, vpc, subnets, fnSGs)
	db := newDatabase(stack, p, vpc, subnets, fnSGs)

	common := map[string]string{"LOG_LEVEL": cmp.Or(p.LogLevel, "info")}
	redisEnv := map[string]string{"REDIS_URL": rd.url, "REDIS_MODE": rd.mode}
	// The subject hash key: every function that names buckets (the
	// authorizer, check and admin) hashes subjects with it, so they agree on
	// the keys, and a principalId or a log line cannot be reversed.
	subjectKey := sluice.NewSubjectKey(stack, "SubjectHmacKey")
	suppress(subjectKey, "AwsSolutions-SMG4", "Rotating the subject hash key renames every bucket, so every subject starts full again: rotate it by hand, when that is wanted.")
	redisEnv["SUBJECT_HMAC_KEY_SECRET_ARN"] = *subjectKey.SecretArn()
	if rd.authSecret != nil {
		redisEnv["REDIS_AUTH_SECRET_ARN"] = *rd.authSecret.SecretArn()
	}
	fnProps := func(name string, memory, reserved float64, env ...map[string]string) *sluice.FunctionProps {
		merged := map[string]string{}
		for _, m := range append([]map[string]string{common}, env...) {
			for k, v := range m {
				merged[k] = v
			}
		}
		return &sluice.FunctionProps{
			Name: name, AssetDir: sluice.AssetDir(p.AssetRoot, name), Environment: merged,
			MemorySize: memory, ReservedConcurrency: reserved,
			Vpc: vpc, VpcSubnets: subnets, SecurityGroups: fnSGs,
		}
	}
	grant := func(fn awslambda.Function, redisToo bool) {
		if redisToo && rd.authSecret != nil {
			rd.authSecret.GrantRead(fn, nil)
		}
		if redisToo {
			subjectKey.GrantRead(fn, nil)
		}
		if db.secret != nil {
			db.secret.GrantRead(fn, nil)
		}
	}

	authEnv := map[string]string{}
	if p.DefaultLimit != "" {
		authEnv["DEFAULT_LIMIT"] = p.DefaultLimit
	}
	checkEnv := map[string]string{}
	if p.RateLimitHeaders != "" {
		// The check API sends the same fields (NewAuthorizer sets the
		// authorizer's).
		checkEnv["RATELIMIT_HEADERS"] = p.RateLimitHeaders
	}
	var upstream awslambda.IFunction
	if p.UpstreamAuthorizerArn != "" {
		upstream = awslambda.Function_FromFunctionArn(stack, jsii.String("UpstreamAuthorizer"), jsii.String(p.UpstreamAuthorizerArn))
	}
	s.Authorizer = sluice.NewAuthorizer(stack, "Authorizer", &sluice.AuthorizerProps{
		FunctionProps: *fnProps("authorizer", cmp.Or(p.AuthorizerMemory, 512), p.AuthorizerReservedConcurrency,
			redisEnv, db.env, authEnv),
		SubjectSources:   p.SubjectSources,
		RateLimitHeaders: p.RateLimitHeaders,
		Upstream:         upstream,
	})
	s.Functions["authorizer"] = s.Authorizer.Function
	grant(s.Authorizer.Function, true)

	for _, name := range sluice.Functions {
		if name == "authorizer" {
			continue
		}
		var fp *sluice.FunctionProps
		switch {
		case name == "migrate":
			// Only PostgreSQL; long enough for a slow migration.
			fp = fnProps(name, cmp.Or(p.FunctionMemory, 256), 0, db.env)
			fp.Timeout = awscdk.Duration_Minutes(jsii.Number(5))
		case name == "check":
			fp = fnProps(name, cmp.Or(p.FunctionMemory, 256), 0, redisEnv, db.env, authEnv, checkEnv)
		case name == statsFunction:
			// GET /stats reads Contributor Insights and nothing else: no
			// Redis, no database, so no VPC (which has no route to the
			// CloudWatch API).
			fp = fnProps(name, cmp.Or(p.FunctionMemory, 256), p.AdminReservedConcurrency,
				map[string]string{"INSIGHTS_RULE_PREFIX": insightsPrefix(stack)})
			fp.Vpc, fp.VpcSubnets, fp.SecurityGroups = nil, nil, nil
			fp.Timeout = awscdk.Duration_Seconds(jsii.Number(29))
		default:
			// The admin functions get DEFAULT_LIMIT too, so the subject limits
			// view shows the default bucket and a reset clears it.
			fp = fnProps(name, cmp.Or(p.FunctionMemory, 256), p.AdminReservedConcurrency, redisEnv, db.env, authEnv)
			fp.Timeout = awscdk.Duration_Seconds(jsii.Number(29)) // API Gateway's integration limit
		}
		fn := sluice.NewFunction(stack, sluice.LogicalName(name), fp)
		if name != statsFunction {
			grant(fn, name != "migrate")
		}
		s.Functions[name] = fn
	}

	// The Lambda roles (the provider framework's included) carry AWS
	// managed policies, these two only; any other would still be reported.
	suppressInStack(stack, "AwsSolutions-IAM4", "AWSLambdaBasicExecutionRole (write the function's logs) and "+
		"AWSLambdaVPCAccessExecutionRole (create and delete the function's network interfaces in the VPC) "+
		"are the AWS-maintained minimum a Lambda needs; the ec2 network interface actions take no resource "+
		"scope, so an inline copy would grant the same",
		"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
		"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole")

	newMigration(stack, p, s.Functions["migrate"], db, migrationNeeds...)
	apiAccount := newAPIGatewayAccount(stack)
	s.AdminAPI = newAdminAPI(stack, s.Functions)
	s.DemoAPI = newDemoAPI(stack, s.Authorizer)
	for _, api := range []awsapigateway.RestApi{s.AdminAPI, s.DemoAPI} {
		// A stage that logs is rejected until the account has the role.
		api.DeploymentStage().Node().AddDependency(apiAccount)
	}
	newMonitoring(stack, p, s.Authorizer.Function, s.Functions["check"], s.DemoAPI, rd)
	newInsights(stack, s.Functions[statsFunction], s.Authorizer.Function, s.Functions["check"])

	awscdk.NewCfnOutput(stack, jsii.String("AdminApiUrl"), &awscdk.CfnOutputProps{
		Value: s.AdminAPI.Url(), Description: jsii.String("Admin REST API (IAM-signed requests)"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("DemoApiUrl"), &awscdk.CfnOutputProps{
		Value: s.DemoAPI.Url(), Description: jsii.String("Demo REST API behind the Sluice authorizer"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("AuthorizerArn"), &awscdk.CfnOutputProps{
		Value: s.Authorizer.Function.FunctionArn(), Description: jsii.String("Sluice authorizer Lambda ARN"),
	})
	return s, nil
}

// newVpc creates a VPC without NAT or internet gateway. The only AWS API the
// Lambdas call is Secrets Manager, through the interface endpoint returned;
// their logs need none (the Lambda service ships them).
func newVpc(stack awscdk.Stack) (awsec2.Vpc, awsec2.InterfaceVpcEndpoint) {
	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs:      jsii.Number(2),
		NatGateways: jsii.Number(0),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{{
			Name:       jsii.String("isolated"),
			SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED,
			CidrMask:   jsii.Number(24),
		}},
	})
	endpoint := vpc.AddInterfaceEndpoint(jsii.String("SecretsManagerEndpoint"), &awsec2.InterfaceVpcEndpointOptions{
		Service:           awsec2.InterfaceVpcEndpointAwsService_SECRETS_MANAGER(),
		PrivateDnsEnabled: jsii.Bool(true),
		Subnets:           &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED},
	})
	suppress(endpoint, "CdkNagValidationFailure", "the endpoint's group admits 443 from the VPC's own CIDR block, "+
		"a Fn::GetAtt that AwsSolutions-EC23 cannot resolve; it is not open to the internet",
		"/^AwsSolutions-EC23$/")
	// Rejected connections only: that is where a missing security group
	// rule shows (a Lambda dialing a port Redis does not admit), and all
	// traffic would log every Redis round trip of every decision.
	vpc.AddFlowLog(jsii.String("RejectedFlows"), &awsec2.FlowLogOptions{
		TrafficType: awsec2.FlowLogTrafficType_REJECT,
		Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(awslogs.NewLogGroup(stack, jsii.String("VpcRejectedFlows"), &awslogs.LogGroupProps{
			Retention:     awslogs.RetentionDays_ONE_MONTH,
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		}), nil),
	})
	return vpc, endpoint
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// resourceName makes an ElastiCache-safe name (lowercase, letters, digits and
// hyphens, at most 40 characters) from the stack name.
func resourceName(stack awscdk.Stack, suffix string) string {
	base := nonName.ReplaceAllString(strings.ToLower(*stack.StackName()), "-")
	if max := 40 - len(suffix) - 1; len(base) > max {
		base = base[:max]
	}
	return strings.Trim(base, "-") + "-" + suffix
}

// newRedis returns the bring-your-own Redis, or creates ElastiCache.
func newRedis(stack awscdk.Stack, p *StackProps, vpc awsec2.IVpc, subnets *awsec2.SubnetSelection, fnSGs []awsec2.ISecurityGroup) redis {
	if p.RedisURL != "" {
		r := redis{url: p.RedisURL, mode: cmp.Or(p.RedisMode, "single")}
		if p.RedisAuthSecretArn != "" {
			r.authSecret = importSecret(stack, "RedisAuth", p.RedisAuthSecretArn)
		}
		return r
	}
	sg := awsec2.NewSecurityGroup(stack, jsii.String("RedisSg"), &awsec2.SecurityGroupProps{
		Vpc: vpc, Description: jsii.String("Sluice Redis"), AllowAllOutbound: jsii.Bool(false),
	})
	// ElastiCache Serverless also serves reads from replicas on 6380 and
	// advertises both ports in its cluster topology, so a cluster client
	// may dial either; a replication group listens on 6379 alone.
	ports := []float64{6379}
	if p.ServerlessRedis {
		ports = append(ports, 6380)
	}
	for _, fnSG := range fnSGs {
		for _, port := range ports {
			sg.AddIngressRule(fnSG, awsec2.Port_Tcp(jsii.Number(port)), jsii.String("Sluice Lambdas"), nil)
		}
	}
	// The L1 constructs take the subnet ids as []interface{}.
	var subnetIDs []interface{}
	for _, id := range *vpc.SelectSubnets(subnets).SubnetIds {
		subnetIDs = append(subnetIDs, id)
	}
	engine := cmp.Or(p.RedisEngine, "valkey")

	if p.ServerlessRedis {
		// ElastiCache Serverless is always TLS, always highly available, and
		// speaks the cluster protocol; the hash-tagged keys keep each
		// subject's buckets in one slot.
		name := resourceName(stack, "cache")
		const maxGB, maxECPU = 10, 100000
		c := awselasticache.NewCfnServerlessCache(stack, jsii.String("Redis"), &awselasticache.CfnServerlessCacheProps{
			Engine:              jsii.String(engine),
			ServerlessCacheName: jsii.String(name),
			Description:         jsii.String("Sluice token buckets"),
			SubnetIds:           &subnetIDs,
			SecurityGroupIds:    &[]interface{}{sg.SecurityGroupId()},
			CacheUsageLimits: &awselasticache.CfnServerlessCache_CacheUsageLimitsProperty{
				DataStorage:   &awselasticache.CfnServerlessCache_DataStorageProperty{Unit: jsii.String("GB"), Maximum: jsii.Number(maxGB)},
				EcpuPerSecond: &awselasticache.CfnServerlessCache_ECPUPerSecondProperty{Maximum: jsii.Number(maxECPU)},
			},
		})
		dims := map[string]string{"clusterId": *c.Ref()}
		return redis{
			url:  fmt.Sprintf("rediss://%s:%s", *c.AttrEndpointAddress(), *c.AttrEndpointPort()),
			mode: "cluster",
			// ECPUs per second over a minute and data stored, against the
			// configured caps.
			cpu: mathExpression(fmt.Sprintf("100 * e / (60 * %d)", maxECPU), "ECPU % of limit",
				map[string]awscloudwatch.IMetric{"e": cacheMetric("ElastiCacheProcessingUnits", "Sum", dims)}),
			mem: mathExpression(fmt.Sprintf("100 * b / (%d * 1000000000)", maxGB), "Data % of limit",
				map[string]awscloudwatch.IMetric{"b": cacheMetric("BytesUsedForCache", "Maximum", dims)}),
		}
	}

	subnetGroup := awselasticache.NewCfnSubnetGroup(stack, jsii.String("RedisSubnets"), &awselasticache.CfnSubnetGroupProps{
		Description: jsii.String("Sluice Redis"),
		SubnetIds:   &subnetIDs,
	})
	// The AUTH token: 64 alphanumerics (ElastiCache forbids some punctuation),
	// stored as the plain secret string.
	auth := awssecretsmanager.NewSecret(stack, jsii.String("RedisAuthToken"), &awssecretsmanager.SecretProps{
		Description: jsii.String("Sluice Redis AUTH token"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength:     jsii.Number(64),
			ExcludePunctuation: jsii.Bool(true),
		},
	})
	suppress(auth, "AwsSolutions-SMG4", "Secrets Manager has no rotation for an ElastiCache AUTH token "+
		"(the replication group must ROTATE then SET it while clients switch), and the functions read the "+
		"token once per cold start, so a rotated token would lock warm functions out")
	name := resourceName(stack, "redis")
	rg := awselasticache.NewCfnReplicationGroup(stack, jsii.String("Redis"), &awselasticache.CfnReplicationGroupProps{
		ReplicationGroupId:          jsii.String(name),
		ReplicationGroupDescription: jsii.String("Sluice token buckets"),
		Engine:                      jsii.String(engine),
		EngineVersion:               jsii.String(redisEngineVersion(engine, p.RedisEngineVersion)),
		CacheNodeType:               jsii.String(cmp.Or(p.RedisNodeType, "cache.t4g.small")),
		NumCacheClusters:            jsii.Number(2), // a primary and a replica in the other AZ
		AutomaticFailoverEnabled:    jsii.Bool(true),
		MultiAzEnabled:              jsii.Bool(true),
		TransitEncryptionEnabled:    jsii.Bool(true),
		AtRestEncryptionEnabled:     jsii.Bool(true),
		AuthToken:                   auth.SecretValue().UnsafeUnwrap(), // a dynamic reference, resolved by CloudFormation
		CacheSubnetGroupName:        subnetGroup.Ref(),
		SecurityGroupIds:            &[]*string{sg.SecurityGroupId()},
		Port:                        jsii.Number(6379),
	})
	// Node ids are <group id>-001, -002; the primary may be either after a
	// failover, so watch the worse of the two.
	worst := func(metric, label string) awscloudwatch.IMetric {
		node := func(n string) awscloudwatch.IMetric {
			return cacheMetric(metric, "Maximum", map[string]string{"CacheClusterId": name + "-" + n})
		}
		return mathExpression("MAX([a, b])", label, map[string]awscloudwatch.IMetric{"a": node("001"), "b": node("002")})
	}
	return redis{
		url:        fmt.Sprintf("rediss://%s:%s", *rg.AttrPrimaryEndPointAddress(), *rg.AttrPrimaryEndPointPort()),
		mode:       "single",
		authSecret: auth,
		cpu:        worst("EngineCPUUtilization", "Engine CPU %"),
		mem:        worst("DatabaseMemoryUsagePercentage", "Memory %"),
	}
}

// redisEngineVersion is the replication group's EngineVersion: version, or
// the default of engine, the 7.x line the limiter's tests run on
// (redis-server 7; Valkey 7.2 is the fork of Redis OSS 7.2).
func redisEngineVersion(engine, version string) string {
	if version != "" {
		return version
	}
	if engine == "redis" {
		return "7.1"
	}
	return "7.2"
}

// cacheMetric is an AWS/ElastiCache metric per minute.
func cacheMetric(name, stat string, dims map[string]string) awscloudwatch.IMetric {
	dm := make(map[string]*string, len(dims))
	for k, v := range dims {
		dm[k] = jsii.String(v)
	}
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String("AWS/ElastiCache"), MetricName: jsii.String(name),
		DimensionsMap: &dm, Statistic: jsii.String(stat), Period: awscdk.Duration_Minutes(jsii.Number(1)),
	})
}

// mathExpression is a per-minute metric math expression over metrics.
func mathExpression(expr, label string, metrics map[string]awscloudwatch.IMetric) awscloudwatch.IMetric {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(expr), Label: jsii.String(label),
		UsingMetrics: &metrics, Period: awscdk.Duration_Minutes(jsii.Number(1)),
	})
}

// newDatabase returns the bring-your-own database, or creates Aurora
// PostgreSQL Serverless v2 behind an RDS Proxy.
func newDatabase(stack awscdk.Stack, p *StackProps, vpc awsec2.IVpc, subnets *awsec2.SubnetSelection, fnSGs []awsec2.ISecurityGroup) database {
	switch {
	case p.DatabaseURL != "":
		return database{env: map[string]string{"DATABASE_URL": p.DatabaseURL}}
	case p.DatabaseSecretArn != "":
		secret := importSecret(stack, "DbSecret", p.DatabaseSecretArn)
		env := map[string]string{"DB_SECRET_ARN": p.DatabaseSecretArn}
		if p.DatabaseHost != "" {
			env["DB_HOST"] = p.DatabaseHost
		}
		return database{env: env, secret: secret}
	}
	cluster := awsrds.NewDatabaseCluster(stack, jsii.String("Db"), &awsrds.DatabaseClusterProps{
		Engine: awsrds.DatabaseClusterEngine_AuroraPostgres(&awsrds.AuroraPostgresClusterEngineProps{
			Version: awsrds.AuroraPostgresEngineVersion_VER_16_9(),
		}),
		Writer:                  awsrds.ClusterInstance_ServerlessV2(jsii.String("writer"), nil),
		ServerlessV2MinCapacity: jsii.Number(0.5),
		ServerlessV2MaxCapacity: jsii.Number(4),
		Credentials:             awsrds.Credentials_FromGeneratedSecret(jsii.String("sluice"), nil),
		DefaultDatabaseName:     jsii.String("sluice"),
		StorageEncrypted:        jsii.Bool(true),
		Vpc:                     vpc,
		VpcSubnets:              subnets,
		RemovalPolicy:           awscdk.RemovalPolicy_SNAPSHOT,
	})
	suppress(cluster, "AwsSolutions-RDS10", "RemovalPolicy SNAPSHOT keeps a final snapshot whenever "+
		"CloudFormation deletes the cluster; deletion protection would only make `cdk destroy` fail")
	suppress(cluster, "AwsSolutions-RDS6", "the functions reach the cluster only through the RDS Proxy, which "+
		"authenticates with the Secrets Manager credentials; IAM database authentication would be unused")
	suppress(cluster, "AwsSolutions-SMG4", "the functions read the database credentials once per cold start "+
		"and keep them, so a rotation would lock warm functions out of the proxy until they restart")
	// Lambdas connect through the proxy: it pools connections across
	// invocations so a burst of cold starts cannot exhaust PostgreSQL.
	proxy := cluster.AddProxy(jsii.String("Proxy"), &awsrds.DatabaseProxyOptions{
		Vpc:        vpc,
		VpcSubnets: subnets,
		Secrets:    &[]awssecretsmanager.ISecret{cluster.Secret()},
		RequireTLS: jsii.Bool(true),
	})
	for _, fnSG := range fnSGs {
		proxy.Connections().AllowFrom(fnSG, awsec2.Port_Tcp(jsii.Number(5432)), jsii.String("Sluice Lambdas"))
	}
	return database{
		env: map[string]string{
			"DB_SECRET_ARN": *cluster.Secret().SecretArn(),
			"DB_HOST":       *proxy.Endpoint(),
		},
		secret:     cluster.Secret(),
		dependable: cluster,
	}
}

// newMigration runs the migrate function on every deploy through a custom
// resource whose Nonce property changes at each synth. (A triggers.Trigger
// would re-run only when the function's code changes.) The function receives
// the CloudFormation event; it migrates on Create and Update and does not
// touch the database on Delete (app.Migrator.Handle), so deleting the stack
// never waits on PostgreSQL. A cold start still reads the database secret
// before any event is handled (app.New), so the custom resource depends on
// needs (the Secrets Manager endpoint): CloudFormation deletes in reverse
// dependency order, and the Delete event then runs while the endpoint is
// still there rather than hanging on Secrets Manager until it times out.
func newMigration(stack awscdk.Stack, p *StackProps, fn awslambda.Function, db database, needs ...constructs.IDependable) {
	provider := customresources.NewProvider(stack, jsii.String("MigrateProvider"), &customresources.ProviderProps{
		OnEventHandler: fn,
	})
	suppress(provider, "AwsSolutions-IAM5", "the CDK Provider framework may invoke the migrate function's "+
		"versions and aliases (<function ARN>:*), and nothing else",
		`/^Resource::<Migrate[0-9A-F]{8}\.Arn>:\*$/`)
	nonce := p.MigrateNonce
	if nonce == "" {
		nonce = time.Now().UTC().Format(time.RFC3339Nano)
	}
	cr := awscdk.NewCustomResource(stack, jsii.String("Migration"), &awscdk.CustomResourceProps{
		ServiceToken: provider.ServiceToken(),
		ResourceType: jsii.String("Custom::SluiceMigrate"),
		Properties:   &map[string]interface{}{"Nonce": nonce},
	})
	if db.dependable != nil {
		cr.Node().AddDependency(db.dependable)
	}
	if len(needs) > 0 {
		cr.Node().AddDependency(needs...)
	}
}

// accessLogFormat is one JSON line per request in the APIs' access logs: who
// called (the IAM principal on the admin API), what, the answer, and why
// when API Gateway answered itself (errorType: AUTHORIZER_FAILURE,
// THROTTLED, ACCESS_DENIED for a rate-limited request, ...). Every value is
// a quoted string, so the line stays JSON whatever API Gateway substitutes
// (free-text error messages are left out for that reason). Headers are not
// logged: they carry API keys.
const accessLogFormat = `{"requestId":"$context.requestId","time":"$context.requestTime",` +
	`"ip":"$context.identity.sourceIp","user":"$context.identity.userArn",` +
	`"method":"$context.httpMethod","resource":"$context.resourcePath","status":"$context.status",` +
	`"responseLength":"$context.responseLength","latencyMs":"$context.responseLatency",` +
	`"authorizerLatencyMs":"$context.authorizer.latency","integrationLatencyMs":"$context.integration.latency",` +
	`"errorType":"$context.error.responseType"}`

// stageLogging is the deployment stage of an API: access logs (one JSON line
// per request, accessLogFormat) and execution logs of errors in log groups
// kept a month. Execution logging stays at ERROR without data tracing: full
// request logging would write the callers' API keys to the log.
func stageLogging(stack awscdk.Stack, id string) *awsapigateway.StageOptions {
	logs := awslogs.NewLogGroup(stack, jsii.String(id+"AccessLogs"), &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	return &awsapigateway.StageOptions{
		AccessLogDestination: awsapigateway.NewLogGroupLogDestination(logs),
		AccessLogFormat:      awsapigateway.AccessLogFormat_Custom(jsii.String(accessLogFormat)),
		LoggingLevel:         awsapigateway.MethodLoggingLevel_ERROR,
		DataTraceEnabled:     jsii.Bool(false),
	}
}

// newAPIGatewayAccount sets the role API Gateway writes logs with, which a
// stage that logs requires. It is one setting per account and region: this
// replaces a role set before (any role with the same AWS managed policy
// serves every API alike), and both the role and the setting are retained
// when the stack is deleted, so the other APIs of the account keep logging.
func newAPIGatewayAccount(stack awscdk.Stack) awsapigateway.CfnAccount {
	role := awsiam.NewRole(stack, jsii.String("ApiGatewayLogsRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("apigateway.amazonaws.com"), nil),
		ManagedPolicies: &[]awsiam.IManagedPolicy{
			awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String("service-role/AmazonAPIGatewayPushToCloudWatchLogs")),
		},
	})
	role.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN)
	suppress(role, "AwsSolutions-IAM4", "AmazonAPIGatewayPushToCloudWatchLogs is the AWS-maintained policy "+
		"for API Gateway's account-wide logging role, which writes to log groups of every API in the account",
		"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs")
	account := awsapigateway.NewCfnAccount(stack, jsii.String("ApiGatewayAccount"), &awsapigateway.CfnAccountProps{
		CloudWatchRoleArn: role.RoleArn(),
	})
	account.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN, nil)
	return account
}

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
		res := api.Root()
		for _, part := range strings.Split(strings.Trim(r.path, "/"), "/") {
			if child := res.GetResource(jsii.String(part)); child != nil {
				res = child
			} else {
				res = res.AddResource(jsii.String(part), nil)
			}
		}
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

// newDemoAPI is a RestApi behind the authorizer, with a mock echo, to try
// the limiter without an application of your own.
func newDemoAPI(stack awscdk.Stack, a *sluice.Authorizer) awsapigateway.RestApi {
	api := awsapigateway.NewRestApi(stack, jsii.String("DemoApi"), &awsapigateway.RestApiProps{
		RestApiName:          jsii.String(*stack.StackName() + "-demo"),
		Description:          jsii.String("Sluice demo: a mock echo behind the rate limiter"),
		CloudWatchRole:       jsii.Bool(false), // newAPIGatewayAccount
		DeployOptions:        stageLogging(stack, "DemoApi"),
		DefaultMethodOptions: a.MethodOptions(),
	})
	a.AddGatewayResponses(stack, "DemoApi", api)
	echo := awsapigateway.NewMockIntegration(&awsapigateway.IntegrationOptions{
		RequestTemplates: &map[string]*string{"application/json": jsii.String(`{"statusCode": 200}`)},
		IntegrationResponses: &[]*awsapigateway.IntegrationResponse{{
			StatusCode: jsii.String("200"),
			ResponseTemplates: &map[string]*string{"application/json": jsii.String(
				`{"message":"allowed by Sluice","resource":"$context.resourcePath","remaining":"$context.authorizer.remaining","limit":"$context.authorizer.limit"}`)},
		}},
	})
	ok := &awsapigateway.MethodOptions{
		AuthorizationType: awsapigateway.AuthorizationType_CUSTOM,
		Authorizer:        a.Authorizer,
		MethodResponses:   &[]*awsapigateway.MethodResponse{{StatusCode: jsii.String("200")}},
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

// newMonitoring creates the alarms and the dashboard. api is the REST API
// behind the authorizer.
func newMonitoring(stack awscdk.Stack, p *StackProps, authorizer, check awslambda.Function, api awsapigateway.RestApi, rd redis) {
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	// The authorizer and check functions write Embedded Metric Format lines
	// in namespace Sluice with dimension Function = the Lambda's name;
	// "FailOpen" counts decisions allowed because Redis failed and the rule
	// fails open. FILL keeps a quiet function from blanking the sum.
	failOpenOf := func(fn awslambda.IFunction) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("Sluice"), MetricName: jsii.String("FailOpen"),
			DimensionsMap: &map[string]*string{"Function": fn.FunctionName()},
			Statistic:     jsii.String("Sum"), Period: minute,
		})
	}
	failOpen := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String("SUM([FILL(a, 0), FILL(c, 0)])"),
		Label:      jsii.String("Fail-open decisions"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{
			"a": failOpenOf(authorizer), "c": failOpenOf(check),
		},
		Period: minute,
	})
	alarm := func(id, desc string, m awscloudwatch.IMetric, threshold float64, periods float64) {
		awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(desc),
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
	}
	alarm("FailOpenAlarm", "Sluice allowed requests without checking Redis (fail-open)", failOpen, 0, 1)
	// Authorizer failures: alarm on the API's 5XXError, not on the
	// function's Errors. A REST authorizer can answer 401 only by failing
	// with the error "Unauthorized", so Errors counts every request without
	// a subject, and an alarm on it fires on any client that forgets its
	// key. Subtracting the authorizer's EMF Decisions{Outcome=unauthorized}
	// count is not exact either: the authorizer batches its EMF counts and
	// writes them with an invocation at least 10 s after its last write
	// (internal/authorizer/apigw.Metrics), so the 401 of a fresh instance
	// reaches CloudWatch a minute late, or never when that instance is not
	// invoked again, and `errors - unauthorized` would still fire on it.
	// API Gateway counts 5XXError itself, per response, with no lag, and
	// answers 500 when the authorizer fails, times out, returns a malformed
	// policy or is throttled: the symptom itself. The demo API's integration
	// is a mock, so its 5XX come from API Gateway alone. An API elsewhere
	// using this authorizer (the AuthorizerArn output) wants the same alarm
	// on its own 5XXError.
	serverErrors := api.MetricServerError(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute})
	alarm("AuthorizerFailuresAlarm", "API Gateway answered 500: the Sluice authorizer failed, timed out or was throttled", serverErrors, 0, 1)
	// A throttled authorizer is a 500 too (Lambda's Throttles count it on
	// every API using the function); AuthorizerReservedConcurrency or the
	// account's concurrency limit is what throttles it.
	throttles := authorizer.MetricThrottles(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute})
	alarm("AuthorizerThrottlesAlarm", "Sluice authorizer invocations were throttled (API Gateway answers 500)", throttles, 0, 1)
	errs := authorizer.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute})
	p99 := authorizer.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99"), Period: minute})
	alarm("AuthorizerP99Alarm", "Sluice authorizer p99 duration is high", p99, cmp.Or(p.AuthorizerP99Millis, 50), 5)
	if rd.cpu != nil {
		alarm("RedisCpuAlarm", "Sluice Redis CPU is high", rd.cpu, 80, 5)
		alarm("RedisMemoryAlarm", "Sluice Redis memory is high", rd.mem, 80, 5)
	}

	dash := awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(*stack.StackName() + "-sluice"),
	})
	graph := func(title string, ms ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &ms, Width: jsii.Number(8)})
	}
	sluiceMetric := func(name, stat string, dims map[string]string) awscloudwatch.IMetric {
		dm := map[string]*string{"Function": authorizer.FunctionName()}
		for k, v := range dims {
			dm[k] = jsii.String(v)
		}
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("Sluice"), MetricName: jsii.String(name), DimensionsMap: &dm,
			Statistic: jsii.String(stat), Period: minute, Label: jsii.String(strings.TrimSpace(name + " " + strings.Join(slices.Collect(maps.Values(dims)), " ") + " " + stat)),
		})
	}
	var decisions []awscloudwatch.IMetric
	for _, outcome := range []string{"allow", "deny", "shadowDeny", "unauthorized"} {
		decisions = append(decisions, sluiceMetric("Decisions", "Sum", map[string]string{"Outcome": outcome}))
	}
	dash.AddWidgets(
		graph("Authorizer decisions", decisions...),
		graph("Redis latency (ms)", sluiceMetric("RedisLatency", "p50", nil), sluiceMetric("RedisLatency", "p99", nil)),
		graph("Deny-cache hits, breaker open", sluiceMetric("DenyCacheHits", "Sum", nil), sluiceMetric("BreakerOpen", "Maximum", nil)),
	)
	dash.AddWidgets(
		// Errors include every 401 (see the failures alarm above).
		graph("Authorizer invocations, errors (incl. 401), throttles, API 5XX",
			authorizer.MetricInvocations(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute}), errs, throttles, serverErrors),
		graph("Authorizer duration (ms)",
			authorizer.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p50"), Period: minute}), p99),
		graph("Fail-open decisions", failOpen),
	)
	if rd.cpu != nil {
		dash.AddWidgets(graph("Redis CPU %", rd.cpu), graph("Redis memory %", rd.mem))
	}
}
