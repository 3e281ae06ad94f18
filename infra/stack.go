package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticache"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsrds"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/rulefile"
	"github.com/sluicehq/sluice/migrations"
)

// StackProps configures the reference Sluice stack. The zero value (plus
// awscdk.StackProps) deploys everything: VPC, ElastiCache, Aurora, Lambdas,
// APIs, alarms. The bring-your-own fields replace the VPC, Redis or the
// database with ones you already run.
type StackProps struct {
	awscdk.StackProps

	// Profile is "production" (the default: Multi-AZ Redis nodes, Aurora
	// at 0.5 ACU or more behind an RDS Proxy, dashboards) or "small": a
	// team's first API at about a tenth of the idle cost, with every
	// guarantee kept (docs/cost.md, docs/deploy.md#profiles). Small sets
	// defaults the other fields may still override: ElastiCache
	// Serverless Valkey, Aurora scaling to 0 ACU (paused when idle) with
	// no proxy, a 256 MiB authorizer, the Secrets Manager endpoint in one AZ,
	// Lambda's platform log lines at WARN (no START, END and REPORT line
	// per invocation), the rules backstop reload daily, no dashboards.
	Profile string

	// AssetRoot holds one directory per function with its `bootstrap`.
	// Default: sluice.DefaultAssetRoot ("build/arm64", `make build` output).
	AssetRoot string

	// Vpc is an existing VPC to run in. Default: a new VPC over 2 AZs with
	// isolated subnets only (see NatGateways), an interface endpoint for
	// Secrets Manager and, with UpstreamAuthorizerArn, one for Lambda.
	Vpc awsec2.IVpc
	// VpcSubnets selects the subnets of Vpc for the Lambdas and data stores.
	// Default: the new VPC's isolated subnets (private with NatGateways); in
	// Vpc or VpcID, its private subnets with egress, else its isolated ones.
	VpcSubnets *awsec2.SubnetSelection
	// NatGateways gives the new VPC public subnets, an internet gateway and
	// this many NAT gateways (1 or 2), and puts the Lambdas in private
	// subnets routed through them: the one way to reach a JWKS URL (the
	// jwt: subject sources) from the new VPC. A NAT gateway costs about
	// 0.045 USD an hour (33 USD a month) plus 0.045 USD per GB processed
	// (us-east-1). Default 0: isolated subnets, AWS APIs through interface
	// endpoints only.
	NatGateways int
	// VpcEndpoints says how isolated subnets of Vpc or VpcID (no NAT route)
	// reach the AWS APIs the Lambdas call (Secrets Manager, and Lambda with
	// UpstreamAuthorizerArn): "create" creates interface endpoints for them
	// in that VPC, "existing" vouches that the VPC has them, with private
	// DNS. Required when the Lambdas' subnets there are isolated; unused
	// otherwise.
	VpcEndpoints string
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
	// RedisNodeType of the replication group. Default: "cache.m7g.large",
	// not burstable: Redis is on every request's path, and a burstable
	// node that runs out of CPU credits slows every decision (or costs
	// extra in unlimited mode). "cache.t4g.small" suits a trial.
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
	// DatabaseDeletionProtection turns on the Aurora cluster's deletion
	// protection: `cdk destroy` then fails on the cluster until it is
	// turned off. Default: off (a final snapshot is kept either way).
	DatabaseDeletionProtection bool
	// DatabaseBackupRetentionDays of the Aurora cluster, 1 to 35.
	// Default: 7.
	DatabaseBackupRetentionDays int

	// AuthorizerMemory in MiB. Default: 512 (more memory, more CPU: the
	// authorizer is on every request's path).
	AuthorizerMemory float64
	// AuthorizerReservedConcurrency caps the authorizer. Default 0: none.
	AuthorizerReservedConcurrency float64
	// FunctionMemory of the other Lambdas in MiB. Default: 256.
	FunctionMemory float64
	// AdminReservedConcurrency caps each admin Lambda (there are four, one
	// per privilege class). Default 0: none, in both profiles.
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
	// lambda:InvokeFunction on it. The new VPC gets a Lambda interface
	// endpoint for the invoke. Default: none.
	UpstreamAuthorizerArn string
	// JWTIssuer, JWTAudience (comma-separated), JWTTokenUse and JWTJWKSURL
	// are the authorizer's JWT_* settings, which the jwt:<claim> subject
	// sources require (issuer and audience). The authorizer fetches the
	// JWKS over HTTPS: the new VPC then needs NatGateways. Default: none.
	JWTIssuer, JWTAudience, JWTTokenUse, JWTJWKSURL string
	// LogLevel is LOG_LEVEL of every function. Default: "info".
	LogLevel string

	// AuthorizerP99Millis is the p99 duration alarm threshold. Default: 50.
	AuthorizerP99Millis float64
	// AlarmTopicArn is an existing SNS topic every alarm notifies.
	// Default: a topic created here (output AlarmTopicArn).
	AlarmTopicArn string
	// AlarmEmail subscribes an e-mail address to the alarm topic (AWS
	// sends a confirmation first). Default: none.
	AlarmEmail string
	// ProtectedAPINames are the names of APIs elsewhere that use this
	// authorizer (output AuthorizerArn): each gets a 5XXError alarm, like
	// the demo API. Default: none.
	ProtectedAPINames []string

	// MaintenanceWindow is when AWS may patch the Redis replication group
	// and the Aurora cluster and its instance, as ddd:hh:mm-ddd:hh:mm in
	// UTC, 1 to 24 hours: a Redis patch fails over (about 30 s of
	// fail-open decisions). Aurora's daily backup window is set to
	// 01:00-01:30 UTC, which it must not overlap. ElastiCache Serverless
	// has none: AWS patches it without a window. Default:
	// "sun:03:00-sun:04:00".
	MaintenanceWindow string

	// Limits is a limits file (sluice apply's format: version 1, a set,
	// rules and plans; YAML or JSON) the deploy applies after the
	// migrations, converging the set it names and touching nothing
	// outside it: a change shows in `cdk diff` as the migration's Limits
	// property, and lands with `cdk deploy`. LimitsName names it in error
	// messages. Checked at synth by the same validator as `sluice lint`.
	// Default: none (rules live only in the admin API).
	Limits, LimitsName string

	// NoDemoAPI leaves out the demo API. Default: created, throttled to
	// demoRateLimit requests a second.
	NoDemoAPI bool
	// NoExecutionLogGroups leaves the APIs' execution log groups to API
	// Gateway, which keeps them forever, past the stack. Its one use: a
	// stack deployed when they were AWS::Logs::LogGroup resources (its
	// update fails with "Update of resource type is not permitted") is
	// deployed once with it, then without (docs/deploy.md, context flags).
	// Default: the stack keeps them a month and deletes them with it.
	NoExecutionLogGroups bool
	// NoAPIGatewayAccount leaves API Gateway's account-wide CloudWatch
	// role alone, for an account where it is managed centrally. The
	// account must have one before the stack is deployed: a stage that
	// logs is refused without it. Default: the stack sets it.
	NoAPIGatewayAccount bool

	// Global makes the stack one Region (Env.Region) of a family sharing
	// global budgets (docs/global.md, -c globalRegions). Default nil: a
	// regional deployment, global rules decided as regional ones.
	Global *Global
}

// Global is a family of stacks, one per Region, sharing the ledger of
// global budgets and the subject hash key.
type Global struct {
	// Regions hold a stack and a ledger replica each: 3, or 2 with
	// Witness, in one MRSC Region set (sluice.CheckGlobalRegions). The
	// first one's stack creates the ledger and the subject hash key,
	// which Secrets Manager replicates to the others.
	Regions []string
	// Witness is the ledger's MRSC witness Region. Default: none.
	Witness string
	// Name names the ledger table (<Name>-ledger) and the subject hash
	// key's secret (<Name>-subject-key), the same in every Region.
	Name string
	// DestroyLedger deletes the ledger with the first Region's stack.
	// Default: retained and deletion-protected.
	DestroyLedger bool
}

// ledgerTable is the name of the ledger table.
func (g *Global) ledgerTable() string { return g.Name + "-ledger" }

// subjectKeyName is the name of the subject hash key's secret.
func (g *Global) subjectKeyName() string { return g.Name + "-subject-key" }

// small reports whether the props ask for the small profile.
func (p *StackProps) small() bool { return p.Profile == "small" }

// withProfile returns a copy of p with the defaults of its profile filled
// in where p leaves them unset.
func (p *StackProps) withProfile() *StackProps {
	c := *p
	if !c.small() {
		return &c
	}
	if c.RedisURL == "" {
		c.ServerlessRedis = true
	}
	c.AuthorizerMemory = cmp.Or(c.AuthorizerMemory, smallAuthorizerMemory)
	return &c
}

// The small profile's defaults.
const (
	// smallAuthorizerMemory is the authorizer's memory: a decision is a
	// Redis round trip and about 100 µs of one core (BenchmarkInvoke's
	// p50 on 2 shared cores, docs/cost.md), so more memory (CPU) buys
	// little and costs per millisecond.
	smallAuthorizerMemory = 256
	// smallRulesRefresh is RULES_REFRESH: the backstop reload from the
	// database, which would keep Aurora from pausing; the snapshot and
	// its version carry every change in between.
	smallRulesRefresh = "24h"
)

// byoDatabase reports whether the props name an existing database.
func (p *StackProps) byoDatabase() bool { return p.DatabaseURL != "" || p.DatabaseSecretArn != "" }

func (p *StackProps) validate() error {
	var errs []error
	if p.Profile != "" && p.Profile != "production" && p.Profile != "small" {
		//lint:ignore ST1005 it names the field, as the caller spells it
		errs = append(errs, fmt.Errorf("Profile %q: want production or small", p.Profile))
	}
	if p.NoVpc && p.RedisURL == "" {
		errs = append(errs, errors.New("NoVpc requires RedisURL: ElastiCache needs a VPC"))
	}
	if p.MaintenanceWindow != "" {
		if err := checkWindow(p.MaintenanceWindow); err != nil {
			errs = append(errs, err)
		}
	}
	if p.Limits != "" {
		if _, err := rulefile.Parse(cmp.Or(p.LimitsName, "limits"), []byte(p.Limits)); err != nil {
			//lint:ignore ST1005 it names the field, as the caller spells it
			errs = append(errs, fmt.Errorf("Limits: %w (run sluice lint -f on it)", err))
		}
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
	// The new VPC is isolated: nothing outside it is reachable, so a Redis
	// or database brought along needs the VPC it lives in.
	newVpc := !p.NoVpc && p.Vpc == nil && p.VpcID == ""
	if newVpc && p.RedisURL != "" {
		errs = append(errs, errors.New("RedisURL (redisUrl) needs VpcID (-c vpcId=<the VPC of that Redis>, with -c securityGroupIds=<a group it admits>): "+
			"the new VPC has no route to an existing Redis, and every decision would fail open; "+
			"-c localstack=true runs without a VPC, for a Redis reachable from anywhere"))
	}
	if newVpc && p.byoDatabase() {
		errs = append(errs, errors.New("DatabaseSecretArn or DatabaseURL (databaseSecretArn, databaseUrl) needs VpcID (-c vpcId=<the VPC of that database>): "+
			"the new VPC has no route to an existing database, the migration would time out and the deploy roll back"))
	}
	if p.NatGateways < 0 || p.NatGateways > 2 {
		errs = append(errs, fmt.Errorf("NatGateways %d: want 0, 1 or 2 (the new VPC spans 2 AZs)", p.NatGateways))
	}
	if p.NatGateways > 0 && !newVpc {
		errs = append(errs, errors.New("NatGateways (natGateways) applies to the VPC the stack creates, not to Vpc, VpcID or NoVpc"))
	}
	if p.VpcEndpoints != "" && p.VpcEndpoints != "create" && p.VpcEndpoints != "existing" {
		errs = append(errs, fmt.Errorf("VpcEndpoints %q: want create or existing", p.VpcEndpoints))
	}
	if p.VpcEndpoints != "" && p.Vpc == nil && p.VpcID == "" {
		errs = append(errs, errors.New("VpcEndpoints (vpcEndpoints) applies to Vpc or VpcID only"))
	}
	if sluice.HasJWTSource(p.SubjectSources) && (p.JWTIssuer == "" || p.JWTAudience == "") {
		errs = append(errs, fmt.Errorf("SubjectSources %q reads a verified token: it needs JWTIssuer and JWTAudience "+
			"(-c jwtIssuer=https://cognito-idp.<region>.amazonaws.com/<user pool id> -c jwtAudience=<app client id>), "+
			"or the authorizer fails at every cold start", p.SubjectSources))
	}
	for _, f := range [...]struct{ field, url string }{{"JWTIssuer", p.JWTIssuer}, {"JWTJWKSURL", p.JWTJWKSURL}} {
		if u, err := url.Parse(f.url); f.url != "" && (err != nil || u.Scheme != "https" || u.Host == "") {
			errs = append(errs, fmt.Errorf("%s %q: want an https:// URL", f.field, f.url))
		}
	}
	if p.JWTIssuer != "" && newVpc && p.NatGateways == 0 {
		errs = append(errs, fmt.Errorf("JWTIssuer: the authorizer fetches the JWKS (%s) over HTTPS, and the new VPC has no route "+
			"to it: add -c natGateways=1 (a NAT gateway, about 33 USD a month plus 0.045 USD per GB, us-east-1), "+
			"or -c vpcId=<a VPC whose private subnets have a NAT route>", jwksURL(p)))
	}
	if p.AlarmTopicArn != "" && !snsTopicARN.MatchString(p.AlarmTopicArn) {
		errs = append(errs, fmt.Errorf("AlarmTopicArn %q: want an SNS topic ARN, arn:aws:sns:<region>:<account>:<name>", p.AlarmTopicArn))
	}
	if p.AlarmEmail != "" && !strings.Contains(p.AlarmEmail, "@") {
		errs = append(errs, fmt.Errorf("AlarmEmail %q: want an e-mail address", p.AlarmEmail))
	}
	if d := p.DatabaseBackupRetentionDays; d < 0 || d > 35 {
		errs = append(errs, fmt.Errorf("DatabaseBackupRetentionDays %d: want 1 to 35", d))
	}
	for _, f := range [...]struct {
		field string
		v     float64
	}{
		{"AuthorizerMemory", p.AuthorizerMemory}, {"FunctionMemory", p.FunctionMemory},
		{"AuthorizerReservedConcurrency", p.AuthorizerReservedConcurrency}, {"AdminReservedConcurrency", p.AdminReservedConcurrency},
		{"AuthorizerP99Millis", p.AuthorizerP99Millis},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v: want a positive number", f.field, f.v))
		}
	}
	if m := p.AuthorizerMemory; m != 0 && (m < 128 || m > 10240) {
		errs = append(errs, fmt.Errorf("AuthorizerMemory %v: want 128 to 10240 MiB", m))
	}
	if m := p.FunctionMemory; m != 0 && (m < 128 || m > 10240) {
		errs = append(errs, fmt.Errorf("FunctionMemory %v: want 128 to 10240 MiB", m))
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
	if p.Global != nil {
		errs = append(errs, p.Global.validate(p)...)
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

// validate reports why g cannot make p one Region of a family.
func (g *Global) validate(p *StackProps) []error {
	var errs []error
	if err := sluice.CheckGlobalRegions(g.Regions, g.Witness); err != nil {
		errs = append(errs, err)
	}
	region := ""
	if p.Env != nil && p.Env.Region != nil {
		region = *p.Env.Region
	}
	if !slices.Contains(g.Regions, region) {
		errs = append(errs, fmt.Errorf("Global: the stack's Region %q is not one of %s", region, strings.Join(g.Regions, ",")))
	}
	if !tableName.MatchString(g.ledgerTable()) {
		errs = append(errs, fmt.Errorf("Global: ledger table name %q: want 3 to 255 letters, digits, '_', '-' or '.'", g.ledgerTable()))
	}
	return errs
}

// tableName matches a DynamoDB table name.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

var (
	// secretARN matches a Secrets Manager secret ARN, complete or partial.
	secretARN = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[^:]+$`)
	// snsTopicARN matches an SNS topic ARN.
	snsTopicARN = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_.-]+$`)
	// secretSuffix is the hyphen and 6 random letters or digits Secrets
	// Manager appends to the name in a secret's complete ARN.
	secretSuffix = regexp.MustCompile(`-[A-Za-z0-9]{6}$`)
)

// jwksURL is where the authorizer fetches the signing keys.
func jwksURL(p *StackProps) string {
	if p.JWTJWKSURL != "" {
		return p.JWTJWKSURL
	}
	return strings.TrimSuffix(p.JWTIssuer, "/") + "/.well-known/jwks.json"
}

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
	// DemoAPI is nil with NoDemoAPI.
	DemoAPI awsapigateway.RestApi
	// AlarmTopic is nil with AlarmTopicArn.
	AlarmTopic awssns.Topic
	Alarms     *sluice.Alarms
	// LookupPending says the template holds CDK's placeholder VPC: the
	// lookup of VpcID has no answer in the context yet (the CLI's first
	// pass). Such a template is never deployed; it only has to synthesize
	// so the CLI can do the lookup and run the app again.
	LookupPending bool
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

// access is what one function may use: each gets what its code calls and
// nothing else, so that a function (its code, or a caller who found a flaw
// in it) cannot do what its routes do not.
type access struct {
	// write: the database's owner login (rules and plans are written, or
	// the schema migrated); else the read-only role's (migration 00007).
	write bool
	// redis: Redis, its AUTH token and the subject hash key (buckets
	// read, reset or charged; the rules snapshot published).
	redis bool
	// stats: CloudWatch (Contributor Insights) alone: no database, no
	// Redis, no VPC.
	stats bool
	// key: with stats, the subject hash key too (POST /subjects/find
	// hashes the subject it looks for in the top denied subjects).
	key bool
	// ledger: what it does with the ledger of global budgets, in a
	// family of Regions (Global).
	ledger ledgerUse
}

// ledgerUse is what a function does with the ledger of global budgets.
type ledgerUse int

const (
	noLedger     ledgerUse = iota
	ledgerDecide           // takes and gives back blocks, sweeps ended windows
	ledgerRead             // shows and resets a subject's global budget: GetItem, UpdateItem
)

// actions are the DynamoDB actions of u, nil for none.
func (u ledgerUse) actions() []string {
	switch u {
	case ledgerDecide:
		return sluice.LedgerDecideActions
	case ledgerRead:
		return sluice.LedgerReadActions
	}
	return nil
}

// adminAccess says what each admin function, a privilege class of
// routes (admin.Routes), may use. Rules and plans are read on the
// read-only role alone; their writes take the owner's login and Redis, to
// publish the snapshot; the subject and usage routes read rules
// (read-only role) and work on buckets (Redis); GET /stats and POST
// /subjects/find read CloudWatch, the latter hashing with the subject
// key. A function missing here fails the synth.
var adminAccess = map[string]access{
	admin.FunctionRead:     {},
	admin.FunctionWrite:    {write: true, redis: true},
	admin.FunctionSubjects: {redis: true, ledger: ledgerRead},
	admin.FunctionStats:    {stats: true, key: true},
}

// functionAccess is what every function may use, by function name: the
// decision functions read rules and decide on Redis, migrate owns the
// schema and publishes the rules snapshot after migrating (so a fresh
// stack's authorizers find one), and each admin function has its
// adminAccess.
var functionAccess = func() map[string]access {
	m := map[string]access{
		"authorizer": {redis: true, ledger: ledgerDecide},
		"check":      {redis: true, ledger: ledgerDecide},
		"migrate":    {write: true, redis: true},
	}
	for name, a := range adminAccess {
		m[name] = a
	}
	return m
}()

// redis is what the Lambdas need to reach Redis and what the alarms watch.
type redis struct {
	url, mode  string
	authSecret awssecretsmanager.ISecret
	cpu, mem   awscloudwatch.IMetric // nil when not ours to watch
}

// database is what the Lambdas need to reach PostgreSQL.
type database struct {
	// env and secret connect as the owner of the schema: the migrate
	// function and the admin functions that write rules and plans.
	env    map[string]string
	secret awssecretsmanager.ISecret
	// readerEnv and readerSecret connect as the read-only role
	// sluice_reader (migration 00007): every other function. The same as
	// env and secret for a database brought along.
	readerEnv    map[string]string
	readerSecret awssecretsmanager.ISecret
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
	p = p.withProfile()
	if err := checkAssets(p, p.small() && !p.byoDatabase()); err != nil {
		return nil, fmt.Errorf("sluice stack %s: %w", id, err)
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &p.StackProps)
	s := &Stack{Stack: stack, Functions: map[string]awslambda.Function{}}

	net, err := newNetwork(stack, p)
	if err != nil {
		return nil, fmt.Errorf("sluice stack %s: %w", id, err)
	}
	s.LookupPending = net.lookupPending
	vpc, subnets, fnSGs := net.vpc, net.subnets, net.groups
	if vpc == nil {
		fnSGs = nil
	}

	rd := newRedis(stack, p, vpc, subnets, fnSGs)
	// The database admits every function's group; Redis, above, not the
	// group of those that reach the database alone.
	dbClients := fnSGs
	if vpc != nil && net.dbOnly[0] != net.groups[0] {
		dbClients = append(slices.Clone(fnSGs), net.dbOnly...)
	}
	db := newDatabase(stack, p, vpc, subnets, dbClients)

	common := map[string]string{"LOG_LEVEL": cmp.Or(p.LogLevel, "info")}
	redisEnv := map[string]string{"REDIS_URL": rd.url, "REDIS_MODE": rd.mode}
	// The subject hash key: every function that names buckets (the
	// authorizer, check and admin) hashes subjects with it, so they agree on
	// the keys, and a principalId or a log line cannot be reversed.
	subjectKey, ledgerEnv, ledgerArn := newGlobal(stack, p)
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
		fp := &sluice.FunctionProps{
			Name: name, AssetDir: sluice.AssetDir(p.AssetRoot, name), Environment: merged,
			MemorySize: memory, ReservedConcurrency: reserved,
			Vpc: vpc, VpcSubnets: subnets, SecurityGroups: fnSGs,
		}
		if p.small() {
			// No START, END and REPORT line per invocation: about 0.15 USD
			// per million decisions of log ingestion (docs/cost.md).
			fp.SystemLogLevel = "WARN"
		}
		return fp
	}
	// grant lets fn read the secrets of what it may use: Redis's AUTH
	// token and the subject hash key with redisToo, the database's owner
	// login with write, else its read-only login.
	grant := func(fn awslambda.Function, a access) {
		if a.redis && rd.authSecret != nil {
			rd.authSecret.GrantRead(fn, nil)
		}
		if a.redis {
			subjectKey.GrantRead(fn, nil)
		}
		switch {
		case a.write && db.secret != nil:
			db.secret.GrantRead(fn, nil)
		case !a.write && db.readerSecret != nil:
			db.readerSecret.GrantRead(fn, nil)
		}
		if a.ledger != noLedger && ledgerArn != nil {
			sluice.GrantLedger(fn, ledgerArn, a.ledger.actions())
		}
	}
	// ledgerFor is the ledger's environment for a function that uses it.
	ledgerFor := func(name string) map[string]string {
		if functionAccess[name].ledger == noLedger {
			return nil
		}
		return ledgerEnv
	}

	authEnv := map[string]string{}
	if p.DefaultLimit != "" {
		authEnv["DEFAULT_LIMIT"] = p.DefaultLimit
	}
	decideEnv := map[string]string{}
	if p.small() {
		decideEnv["RULES_REFRESH"] = smallRulesRefresh
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
	// The authorizer and check read rules (the Redis snapshot first, the
	// database when it is missing): the read-only login.
	s.Authorizer = sluice.NewAuthorizer(stack, "Authorizer", &sluice.AuthorizerProps{
		FunctionProps: *fnProps("authorizer", cmp.Or(p.AuthorizerMemory, 512), p.AuthorizerReservedConcurrency,
			redisEnv, db.readerEnv, authEnv, decideEnv, ledgerFor("authorizer")),
		SubjectSources:   p.SubjectSources,
		RateLimitHeaders: p.RateLimitHeaders,
		Upstream:         upstream,
		JWT:              jwtProps(p),
		// Without the demo API, no API of this stack uses the REQUEST
		// authorizer (APIs elsewhere make their own from AuthorizerArn),
		// and one attached to no API cannot be synthesized.
		NoRequestAuthorizer: p.NoDemoAPI,
	})
	s.Functions["authorizer"] = s.Authorizer.Function
	grant(s.Authorizer.Function, functionAccess["authorizer"])

	for _, name := range sluice.Functions {
		if name == "authorizer" {
			continue
		}
		a, ok := functionAccess[name]
		if !ok {
			return nil, fmt.Errorf("sluice stack %s: function %s has no entry in adminAccess: say what its routes may use", id, name)
		}
		var fp *sluice.FunctionProps
		switch {
		case name == "migrate":
			// PostgreSQL, as the owner, and the read-only role's login to
			// set; Redis, where it publishes the rules snapshot after
			// migrating; long enough for a slow migration.
			env := maps.Clone(db.env)
			if db.readsOnly() {
				env["DB_READER_SECRET_ARN"] = *db.readerSecret.SecretArn()
			}
			fp = fnProps(name, cmp.Or(p.FunctionMemory, 256), 0, env, redisEnv)
			fp.Timeout = awscdk.Duration_Minutes(jsii.Number(5))
		case name == "check":
			fp = fnProps(name, cmp.Or(p.FunctionMemory, 256), 0, redisEnv, db.readerEnv, authEnv, checkEnv, decideEnv, ledgerFor(name))
		case a.stats:
			// GET /stats and POST /subjects/find read Contributor Insights
			// and nothing else (the latter hashes with the subject key):
			// no Redis, no database, so no VPC (which has no route to the
			// CloudWatch API).
			env := map[string]string{"INSIGHTS_RULE_PREFIX": insightsPrefix(stack)}
			if a.key {
				env["SUBJECT_HMAC_KEY_SECRET_ARN"] = *subjectKey.SecretArn()
			}
			fp = fnProps(name, cmp.Or(p.FunctionMemory, 256), p.AdminReservedConcurrency, env)
			fp.Vpc, fp.VpcSubnets, fp.SecurityGroups = nil, nil, nil
			fp.Timeout = awscdk.Duration_Seconds(jsii.Number(adminTimeout))
		default:
			dbEnv := db.readerEnv
			if a.write {
				dbEnv = db.env
			}
			if a.redis {
				// DEFAULT_LIMIT too, so the subject limits view shows the
				// default bucket and a reset clears it.
				fp = fnProps(name, cmp.Or(p.FunctionMemory, 256), p.AdminReservedConcurrency, redisEnv, dbEnv, authEnv, ledgerFor(name))
			} else {
				// Rules and plans read: the database's read-only login
				// alone, in the security group Redis does not admit.
				fp = fnProps(name, cmp.Or(p.FunctionMemory, 256), p.AdminReservedConcurrency, dbEnv)
				if vpc != nil {
					fp.SecurityGroups = net.dbOnly
				}
			}
			fp.Timeout = awscdk.Duration_Seconds(jsii.Number(adminTimeout))
		}
		fn := sluice.NewFunction(stack, sluice.LogicalName(name), fp)
		switch {
		case !a.stats:
			grant(fn, a)
		case a.key:
			subjectKey.GrantRead(fn, nil)
		}
		if name == "migrate" && db.readsOnly() {
			db.readerSecret.GrantRead(fn, nil)
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

	migration := newMigration(stack, s.Functions["migrate"], db, p.Limits, net.needs...)
	if db.readsOnly() {
		// The read-only login works once migrate has set it: the functions
		// that use it are created (or switched to it) after the migration.
		for name, fn := range s.Functions {
			if a := functionAccess[name]; !a.write && !a.stats {
				fn.Node().AddDependency(migration)
			}
		}
	}
	var apiAccount awsapigateway.CfnAccount
	if !p.NoAPIGatewayAccount {
		apiAccount = newAPIGatewayAccount(stack)
	}
	s.AdminAPI = newAdminAPI(stack, s.Functions)
	apis := []awsapigateway.RestApi{s.AdminAPI}
	if !p.NoDemoAPI {
		s.DemoAPI = newDemoAPI(stack, s.Authorizer)
		apis = append(apis, s.DemoAPI)
	}
	groups := make([]*string, len(apis))
	for i, api := range apis {
		groups[i] = executionLogGroupName(api)
	}
	var logRole awsiam.Role
	if !p.NoExecutionLogGroups {
		logRole = newExecutionLogsRole(stack, groups)
	}
	for i, api := range apis {
		stage := api.DeploymentStage()
		if apiAccount != nil {
			// A stage that logs is rejected until the account has the role.
			stage.Node().AddDependency(apiAccount)
		}
		if logRole != nil {
			stage.Node().AddDependency(newExecutionLogs(stack, []string{"AdminApi", "DemoApi"}[i], groups[i], logRole))
		}
	}
	newMonitoring(stack, p, s, rd)
	var insightReaders []awslambda.Function
	for _, name := range sluice.Functions {
		if functionAccess[name].stats {
			insightReaders = append(insightReaders, s.Functions[name])
		}
	}
	newInsights(stack, !p.small(), insightReaders, s.Authorizer.Function, s.Functions["check"])
	newOutputs(stack, s, net, rd, db, subjectKey)
	if p.Global != nil {
		// sluice verify reads it: a family's stack must move the ledger.
		awscdk.NewCfnOutput(stack, jsii.String("LedgerTable"), &awscdk.CfnOutputProps{
			Value: jsii.String(p.Global.ledgerTable()), Description: jsii.String("The ledger of global budgets (a DynamoDB global table)"),
		})
	}
	return s, nil
}

// newGlobal returns the subject hash key and, in a family of Regions
// (Global), the ledger's environment and this Region's replica ARN. The
// first Region's stack creates the ledger and the key, replicated to the
// others, whose stacks use them by name: no stack references another
// Region's. Without Global, the key alone, as NewSubjectKey makes it.
func newGlobal(stack awscdk.Stack, p *StackProps) (key awssecretsmanager.ISecret, env map[string]string, ledgerArn *string) {
	const smg4 = "Rotating the subject hash key renames every bucket, so every subject starts full again: rotate it by hand, when that is wanted."
	g := p.Global
	if g == nil {
		k := sluice.NewSubjectKey(stack, "SubjectHmacKey")
		suppress(k, "AwsSolutions-SMG4", smg4)
		return k, nil, nil
	}
	region := *p.Env.Region
	if region != g.Regions[0] {
		key = sluice.ImportGlobalSubjectKey(stack, "SubjectHmacKey", g.subjectKeyName())
	} else {
		k := sluice.NewGlobalSubjectKey(stack, "SubjectHmacKey", g.subjectKeyName(), g.Regions[1:])
		suppress(k, "AwsSolutions-SMG4", smg4)
		// The key and the ledger have one lifetime: the ledger's items are
		// named with subjects hashed by this key, so a ledger kept past
		// `cdk destroy` beside a new key would match nothing. Both stay
		// (or go, with DestroyLedger); the next deploy adopts both by name
		// (--import-existing-resources, TestGlobalLifetime).
		if !g.DestroyLedger {
			k.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN)
		}
		// Without that flag, the deploy fails on the key's name: before
		// ElastiCache and Aurora, not after their half hour.
		for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
			r, ok := c.(awscdk.CfnResource)
			if !ok || !*awscdk.CfnResource_IsCfnResource(c) {
				continue
			}
			switch *r.CfnResourceType() {
			case "AWS::ElastiCache::ReplicationGroup", "AWS::ElastiCache::ServerlessCache", "AWS::RDS::DBCluster":
				r.Node().AddDependency(k)
			}
		}
		key = k
		ledger := sluice.NewLedger(stack, "Ledger", &sluice.LedgerProps{
			TableName: g.ledgerTable(), Regions: g.Regions, Witness: g.Witness, Destroy: g.DestroyLedger,
		})
		suppress(ledger, "AwsSolutions-DDB3", "MRSC creates a table empty, so no backup can be restored into "+
			"one: a lost ledger is replaced by an empty table (each global budget starts its window again), "+
			"and deletion protection with a RETAIN policy guards against the usual loss")
	}
	return key, sluice.LedgerEnvironment(g.ledgerTable(), g.Regions), sluice.LedgerArn(stack, region, g.ledgerTable())
}

// jwtProps are the authorizer's JWT settings, or nil.
func jwtProps(p *StackProps) *sluice.JWT {
	if p.JWTIssuer == "" {
		return nil
	}
	return &sluice.JWT{Issuer: p.JWTIssuer, Audience: splitList(p.JWTAudience), TokenUse: p.JWTTokenUse, JWKSURL: p.JWTJWKSURL}
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
		auth := newCacheUser(stack, engine)
		const maxGB, maxECPU = 10, 100000
		c := awselasticache.NewCfnServerlessCache(stack, jsii.String("Redis"), &awselasticache.CfnServerlessCacheProps{
			Engine:              jsii.String(engine),
			ServerlessCacheName: jsii.String(name),
			Description:         jsii.String("Sluice token buckets"),
			SubnetIds:           &subnetIDs,
			SecurityGroupIds:    &[]interface{}{sg.SecurityGroupId()},
			UserGroupId:         auth.group.Ref(),
			CacheUsageLimits: &awselasticache.CfnServerlessCache_CacheUsageLimitsProperty{
				DataStorage:   &awselasticache.CfnServerlessCache_DataStorageProperty{Unit: jsii.String("GB"), Maximum: jsii.Number(maxGB)},
				EcpuPerSecond: &awselasticache.CfnServerlessCache_ECPUPerSecondProperty{Maximum: jsii.Number(maxECPU)},
			},
		})
		dims := map[string]string{"clusterId": *c.Ref()}
		return redis{
			url:        fmt.Sprintf("rediss://%s:%s", *c.AttrEndpointAddress(), *c.AttrEndpointPort()),
			mode:       "cluster",
			authSecret: auth.secret,
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
		CacheNodeType:               jsii.String(cmp.Or(p.RedisNodeType, defaultRedisNodeType)),
		NumCacheClusters:            jsii.Number(2), // a primary and a replica in the other AZ
		AutomaticFailoverEnabled:    jsii.Bool(true),
		MultiAzEnabled:              jsii.Bool(true),
		TransitEncryptionEnabled:    jsii.Bool(true),
		AtRestEncryptionEnabled:     jsii.Bool(true),
		AuthToken:                   auth.SecretValue().UnsafeUnwrap(), // a dynamic reference, resolved by CloudFormation
		CacheSubnetGroupName:        subnetGroup.Ref(),
		SecurityGroupIds:            &[]*string{sg.SecurityGroupId()},
		Port:                        jsii.Number(6379),
		PreferredMaintenanceWindow:  jsii.String(cmp.Or(p.MaintenanceWindow, defaultMaintenanceWindow)),
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

// cacheUser is the access control of a serverless cache: a user group
// whose one user is "default", with a password, and the secret that holds
// its login.
type cacheUser struct {
	group  awselasticache.CfnUserGroup
	secret awssecretsmanager.Secret
}

// newCacheUser gives the serverless cache a user group, so a client
// must AUTH as well as pass the security group. ElastiCache Serverless takes
// no AUTH token, only RBAC (ElastiCache User Guide, "Role-Based Access
// Control"), and a user group must hold a user named default
// (AWS::ElastiCache::UserGroup, UserIds): that user, with full access and a
// password, is the only one, so no connection is unauthenticated. The
// secret is JSON {"username":"default","password":...} (64 alphanumerics),
// which REDIS_AUTH_SECRET_ARN reads as an RBAC login (config.Redis); the
// functions that connect to Redis may read it, no other.
func newCacheUser(stack awscdk.Stack, engine string) cacheUser {
	secret := awssecretsmanager.NewSecret(stack, jsii.String("RedisUserSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("Sluice Redis login (ElastiCache RBAC user default)"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			SecretStringTemplate: jsii.String(`{"username":"default"}`),
			GenerateStringKey:    jsii.String("password"),
			PasswordLength:       jsii.Number(64),
			ExcludePunctuation:   jsii.Bool(true),
		},
	})
	suppress(secret, "AwsSolutions-SMG4", "Secrets Manager has no rotation for an ElastiCache user's password, "+
		"and the functions read it once per cold start, so a rotated password would lock warm functions out")
	user := awselasticache.NewCfnUser(stack, jsii.String("RedisUser"), &awselasticache.CfnUserProps{
		UserId:       jsii.String(resourceName(stack, "cache-user")),
		UserName:     jsii.String("default"),
		Engine:       jsii.String(engine),
		AccessString: jsii.String("on ~* +@all"),
		AuthenticationMode: map[string]any{
			"Type":      "password",
			"Passwords": []*string{secret.SecretValueFromJson(jsii.String("password")).UnsafeUnwrap()}, // a dynamic reference
		},
	})
	group := awselasticache.NewCfnUserGroup(stack, jsii.String("RedisUserGroup"), &awselasticache.CfnUserGroupProps{
		UserGroupId: jsii.String(resourceName(stack, "cache-users")),
		Engine:      jsii.String(engine),
		UserIds:     &[]*string{user.Ref()}, // the user id, once the user exists
	})
	return cacheUser{group: group, secret: secret}
}

// defaultRedisNodeType is the replication group's node type: the smallest
// Graviton node that is not burstable (2 vCPUs, 6.38 GiB). See
// StackProps.RedisNodeType.
const defaultRedisNodeType = "cache.m7g.large"

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
		env := map[string]string{"DATABASE_URL": p.DatabaseURL}
		return database{env: env, readerEnv: env}
	case p.DatabaseSecretArn != "":
		// The read-only role needs a password only this database's owner
		// can set: a database brought along is used with its one secret.
		secret := importSecret(stack, "DbSecret", p.DatabaseSecretArn)
		env := map[string]string{"DB_SECRET_ARN": p.DatabaseSecretArn}
		if p.DatabaseHost != "" {
			env["DB_HOST"] = p.DatabaseHost
		}
		return database{env: env, secret: secret, readerEnv: env, readerSecret: secret}
	}
	// The small profile's cluster scales to 0 ACU, paused after 5 idle
	// minutes (only the admin functions connect, and the authorizers when
	// the Redis snapshot is missing): storage alone is billed then, and
	// the first query after a pause waits about 15 s for it to resume.
	minACU := 0.5
	var pause awscdk.Duration
	if p.small() {
		minACU, pause = 0, awscdk.Duration_Minutes(jsii.Number(5))
	}
	window := cmp.Or(p.MaintenanceWindow, defaultMaintenanceWindow)
	cluster := awsrds.NewDatabaseCluster(stack, jsii.String("Db"), &awsrds.DatabaseClusterProps{
		ServerlessV2AutoPauseDuration: pause,
		Engine: awsrds.DatabaseClusterEngine_AuroraPostgres(&awsrds.AuroraPostgresClusterEngineProps{
			Version: awsrds.AuroraPostgresEngineVersion_VER_16_9(),
		}),
		Writer: awsrds.ClusterInstance_ServerlessV2(jsii.String("writer"), &awsrds.ServerlessV2ClusterInstanceProps{
			PreferredMaintenanceWindow: jsii.String(window),
		}),
		PreferredMaintenanceWindow: jsii.String(window),
		ServerlessV2MinCapacity:    jsii.Number(minACU),
		ServerlessV2MaxCapacity:    jsii.Number(4),
		Credentials:                awsrds.Credentials_FromGeneratedSecret(jsii.String("sluice"), nil),
		DefaultDatabaseName:        jsii.String("sluice"),
		StorageEncrypted:           jsii.Bool(true),
		Vpc:                        vpc,
		VpcSubnets:                 subnets,
		RemovalPolicy:              awscdk.RemovalPolicy_SNAPSHOT,
		DeletionProtection:         jsii.Bool(p.DatabaseDeletionProtection),
		Backup: &awsrds.BackupProps{
			Retention:       awscdk.Duration_Days(jsii.Number(float64(cmp.Or(p.DatabaseBackupRetentionDays, 7)))),
			PreferredWindow: jsii.String(backupWindow),
		},
	})
	if !p.DatabaseDeletionProtection {
		suppress(cluster, "AwsSolutions-RDS10", "RemovalPolicy SNAPSHOT keeps a final snapshot whenever "+
			"CloudFormation deletes the cluster; deletion protection (DatabaseDeletionProtection, off by default) "+
			"would make `cdk destroy` fail")
	}
	suppress(cluster, "AwsSolutions-RDS6", "the functions reach the cluster only through the RDS Proxy, which "+
		"authenticates with the Secrets Manager credentials; IAM database authentication would be unused")
	suppress(cluster, "AwsSolutions-SMG4", "the functions read the database credentials once per cold start "+
		"and keep them, so a rotation would lock warm functions out of the proxy until they restart")
	// The read-only role's login (migration 00007): the migrate function
	// sets the role's password from it, every function that only reads
	// connects with it. Attached to the cluster, it names the host and port.
	readerSecret := awsrds.NewDatabaseSecret(stack, jsii.String("DbReaderSecret"), &awsrds.DatabaseSecretProps{
		Username: jsii.String(readerRole),
		Dbname:   jsii.String("sluice"),
	})
	reader := readerSecret.Attach(cluster)
	suppress(readerSecret, "AwsSolutions-SMG4", "the functions read the read-only role's credentials once per cold start "+
		"and keep them, and the migrate function sets the role's password from this secret at each migration: "+
		"a rotation would lock warm functions out until the next deploy")
	if p.small() {
		// No RDS Proxy (8 ACU minimum, 88 USD a month): the functions
		// connect to the cluster, their number bounded by the admin
		// functions' reserved concurrency and the authorizers reading the
		// snapshot first.
		for _, fnSG := range fnSGs {
			cluster.Connections().AllowFrom(fnSG, awsec2.Port_Tcp(jsii.Number(5432)), jsii.String("Sluice Lambdas"))
		}
		return database{
			env:          map[string]string{"DB_SECRET_ARN": *cluster.Secret().SecretArn()},
			secret:       cluster.Secret(),
			readerEnv:    map[string]string{"DB_SECRET_ARN": *reader.SecretArn()},
			readerSecret: reader,
			dependable:   cluster,
		}
	}
	// Lambdas connect through the proxy: it pools connections across
	// invocations so a burst of cold starts cannot exhaust PostgreSQL.
	proxy := cluster.AddProxy(jsii.String("Proxy"), &awsrds.DatabaseProxyOptions{
		// Unique per account and region, as the stack name is: CDK names
		// the proxy "Proxy" otherwise (without the
		// databaseProxyUniqueResourceName flag), and a second stack there
		// (staging beside prod) fails to create.
		DbProxyName: jsii.String(proxyName(stack)),
		Vpc:         vpc,
		VpcSubnets:  subnets,
		Secrets:     &[]awssecretsmanager.ISecret{cluster.Secret(), reader},
		RequireTLS:  jsii.Bool(true),
	})
	for _, fnSG := range fnSGs {
		proxy.Connections().AllowFrom(fnSG, awsec2.Port_Tcp(jsii.Number(5432)), jsii.String("Sluice Lambdas"))
	}
	return database{
		env: map[string]string{
			"DB_SECRET_ARN": *cluster.Secret().SecretArn(),
			"DB_HOST":       *proxy.Endpoint(),
		},
		secret: cluster.Secret(),
		readerEnv: map[string]string{
			"DB_SECRET_ARN": *reader.SecretArn(),
			"DB_HOST":       *proxy.Endpoint(),
		},
		readerSecret: reader,
		dependable:   cluster,
	}
}

// adminTimeout is the admin functions' timeout in seconds: under API
// Gateway's 29 s integration limit, so that a call that runs out (a
// database resuming from its pause in about 15 s, then the query) ends
// with the function's own error and log line rather than the gateway's
// 504 with the function still running.
const adminTimeout = 25

// defaultMaintenanceWindow is MaintenanceWindow's default, and
// backupWindow Aurora's daily backup window (UTC), which it must not
// overlap.
const (
	defaultMaintenanceWindow = "sun:03:00-sun:04:00"
	backupWindow             = "01:00-01:30"
)

// readerRole is the read-only database role migration 00007 creates.
const readerRole = "sluice_reader"

// readsOnly reports whether the database has a read-only login of its own.
func (d database) readsOnly() bool { return d.readerSecret != nil && d.readerSecret != d.secret }

// proxyName is the RDS Proxy's name: letters, digits and single hyphens,
// starting with a letter, at most 60 characters, from the stack name.
func proxyName(stack awscdk.Stack) string {
	name := resourceName(stack, "db-proxy")
	name = regexp.MustCompile(`-{2,}`).ReplaceAllString(name, "-")
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		name = "s-" + name
	}
	return name
}

// newMigration runs the migrate function through a custom resource whose
// Migrations property is the digest of the migrations the function carries
// (migrations.Digest): CloudFormation sends Create on the first deploy and
// Update when the migrations change, and an unchanged app shows no change
// in `cdk diff`. (A triggers.Trigger would re-run on every code change.)
// The function (app.Migrator.Handle) migrates on Create and on an Update to
// its own set, and touches no database on Delete, on a rollback (an Update
// back to another set) or on an Update to the same set, so neither deleting
// the stack nor rolling it back waits on PostgreSQL. A cold start still
// reads the database secret before any event is handled (app.NewDecider), so the
// custom resource depends on needs (the interface endpoints):
// CloudFormation deletes in reverse dependency order, and the Delete event
// then runs while the endpoint is still there rather than hanging on
// Secrets Manager until it times out.
//
// limits, when not "", is the stack's limits file (StackProps.Limits),
// the Limits property: the function applies it after migrating, and an
// Update that changes only it applies it without migrating again.
func newMigration(stack awscdk.Stack, fn awslambda.Function, db database, limits string, needs ...constructs.IDependable) awscdk.CustomResource {
	provider := customresources.NewProvider(stack, jsii.String("MigrateProvider"), &customresources.ProviderProps{
		OnEventHandler: fn,
		// The framework function's log group, with an expiry (Lambda
		// would create one that never expires, left behind on destroy).
		LogGroup: awslogs.NewLogGroup(stack, jsii.String("MigrateProviderLogs"), &awslogs.LogGroupProps{
			Retention:     awslogs.RetentionDays_ONE_MONTH,
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		}),
	})
	suppress(provider, "AwsSolutions-IAM5", "the CDK Provider framework may invoke the migrate function's "+
		"versions and aliases (<function ARN>:*), and nothing else",
		`/^Resource::<Migrate[0-9A-F]{8}\.Arn>:\*$/`)
	props := map[string]interface{}{"Migrations": migrations.Digest()}
	if limits != "" {
		props["Limits"] = limits
	}
	cr := awscdk.NewCustomResource(stack, jsii.String("Migration"), &awscdk.CustomResourceProps{
		ServiceToken: provider.ServiceToken(),
		ResourceType: jsii.String("Custom::SluiceMigrate"),
		Properties:   &props,
	})
	if db.dependable != nil {
		cr.Node().AddDependency(db.dependable)
	}
	if len(needs) > 0 {
		cr.Node().AddDependency(needs...)
	}
	return cr
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
// kept a month (newExecutionLogs). Execution logging stays at ERROR without
// data tracing: full request logging would write the callers' API keys to
// the log.
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

// newExecutionLogs keeps the log group API Gateway writes the execution
// logs of a deployment stage to, group (executionLogGroupName), a month and
// deletes it with the stack: left to API Gateway, it never expires and
// outlives the stack. The stage must depend on it.
//
// It is CDK's LogRetention, a custom resource that creates the group or,
// when it exists, sets its retention. A stack deployed before this was
// managed has the group API Gateway created, which an AWS::Logs::LogGroup of
// the same name would fail to create ("already exists"), and CloudFormation's
// import of existing resources (`cdk deploy --import-existing-resources`)
// adopts only resources with a static name, not one joined from the API's id
// (TestExecutionLogsUpgrade). A stack deployed when the group was an
// AWS::Logs::LogGroup of this logical id cannot change its type in place:
// one deploy with NoExecutionLogGroups deletes that group, the next adopts
// the one API Gateway makes again (TestExecutionLogsFromLogGroups).
func newExecutionLogs(stack awscdk.Stack, id string, group *string, role awsiam.Role) awslogs.LogRetention {
	lr := awslogs.NewLogRetention(stack, jsii.String(id+"ExecutionLogs"), &awslogs.LogRetentionProps{
		LogGroupName:  group,
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		// Policy updates dropped: CDK would add logs:PutRetentionPolicy
		// on "*"; newExecutionLogsRole grants the groups themselves.
		Role: role.WithoutPolicyUpdates(nil),
	})
	// The function, one per stack, is named so that its role can name its
	// log group, which exists before it.
	fn := stack.Node().FindChild(jsii.String(logRetentionFunctionID)).Node().DefaultChild().(awscdk.CfnResource)
	fn.AddPropertyOverride(jsii.String("FunctionName"), jsii.String(logRetentionFunctionName(stack)))
	fn.Node().AddDependency(stack.Node().FindChild(jsii.String("LogRetentionLogs")))
	return lr
}

// logRetentionFunctionID is the construct id of LogRetention's function,
// one per stack (aws-cdk-lib's aws-logs/lib/log-retention.ts).
const logRetentionFunctionID = "LogRetentionaae0aa3c5b4d4f87b02d85b201efdd8a"

// logRetentionFunctionName is the name of LogRetention's function.
func logRetentionFunctionName(stack awscdk.Stack) string {
	return resourceName(stack, "log-retention")
}

// executionLogGroupName is API-Gateway-Execution-Logs_<api id>/<stage>, the
// log group API Gateway writes api's execution logs to.
func executionLogGroupName(api awsapigateway.RestApi) *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("API-Gateway-Execution-Logs_"), api.RestApiId(), jsii.String("/"), jsii.String(stageName),
	})
}

// newExecutionLogsRole is the role of LogRetention's function: it may
// create, expire and delete the execution log groups and its own log group
// (which it expires after a day), and nothing else. Its own group is the
// stack's, so it goes with the stack too.
func newExecutionLogsRole(stack awscdk.Stack, groups []*string) awsiam.Role {
	arns := func(names ...*string) *[]*string {
		var out []*string
		for _, n := range names {
			arn := stack.FormatArn(&awscdk.ArnComponents{
				Service: jsii.String("logs"), Resource: jsii.String("log-group"), ResourceName: n,
				ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
			})
			out = append(out, arn, awscdk.Fn_Join(jsii.String(""), &[]*string{arn, jsii.String(":*")}))
		}
		return &out
	}
	own := jsii.String("/aws/lambda/" + logRetentionFunctionName(stack))
	awslogs.NewLogGroup(stack, jsii.String("LogRetentionLogs"), &awslogs.LogGroupProps{
		LogGroupName:  own,
		Retention:     awslogs.RetentionDays_ONE_DAY,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	role := awsiam.NewRole(stack, jsii.String("LogRetentionRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("CDK LogRetention: the API Gateway execution log groups' retention"),
		InlinePolicies: &map[string]awsiam.PolicyDocument{
			"LogGroups": awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
				awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Actions:   jsii.Strings("logs:CreateLogGroup", "logs:PutRetentionPolicy", "logs:DeleteRetentionPolicy", "logs:DeleteLogGroup"),
					Resources: arns(groups...),
				}),
				awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Actions:   jsii.Strings("logs:CreateLogGroup", "logs:PutRetentionPolicy", "logs:CreateLogStream", "logs:PutLogEvents"),
					Resources: arns(own),
				}),
			}}),
		},
	})
	suppress(role, "AwsSolutions-IAM5", "log streams of the execution log groups and of the function's own "+
		"log group (<group ARN>:*), and nothing else", `/^Resource::.*:\*$/`)
	return role
}

// stageName is the deployment stage of both APIs (CDK's default).
const stageName = "prod"

// The demo API's stage throttle: enough to try the limiter by hand, little
// for a flood of a public URL to cost (every request invokes the
// authorizer).
const (
	demoRateLimit  = 10 // requests a second, steady
	demoBurstLimit = 20
)

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
	// verify checks them).
	fields, declared := a.AllowedResponseParameters()
	echo := awsapigateway.NewMockIntegration(&awsapigateway.IntegrationOptions{
		RequestTemplates: &map[string]*string{"application/json": jsii.String(`{"statusCode": 200}`)},
		IntegrationResponses: &[]*awsapigateway.IntegrationResponse{{
			StatusCode: jsii.String("200"),
			ResponseTemplates: &map[string]*string{"application/json": jsii.String(
				`{"message":"allowed by Sluice","resource":"$context.resourcePath","remaining":"$context.authorizer.remaining","limit":"$context.authorizer.limit"}`)},
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

// newMonitoring creates the alarm topic, the alarms and the dashboard.
func newMonitoring(stack awscdk.Stack, p *StackProps, s *Stack, rd redis) {
	var topic awssns.ITopic
	if p.AlarmTopicArn != "" {
		topic = awssns.Topic_FromTopicArn(stack, jsii.String("AlarmTopic"), jsii.String(p.AlarmTopicArn))
	} else {
		t := awssns.NewTopic(stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
			DisplayName: jsii.String("Sluice alarms"),
			EnforceSSL:  jsii.Bool(true),
		})
		suppress(t, "AwsSolutions-SNS2", "CloudWatch alarms cannot publish to a topic encrypted with the AWS managed "+
			"key (aws/sns), and the messages carry alarm names and metric values, no request data")
		topic = t
		s.AlarmTopic = t
	}
	if p.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
	} else if p.AlarmTopicArn == "" {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("sluice:alarmTopicWithoutSubscriber"), jsii.String(
			"the alarms notify the topic AlarmTopic, which has no subscriber: pass -c alarmEmail=<address> "+
				"or subscribe to the AlarmTopicArn output"), nil)
	}
	if len(p.ProtectedAPINames) == 0 {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("sluice:noProtectedApi"), jsii.String(
			"no API behind the authorizer is named, so no alarm watches your APIs' 5XX (the authorizer failing, timing out "+
				"or throttled): pass -c protectedApiNames=<ApiName>,... once an API uses the AuthorizerArn output "+
				"(AuthorizerStartFailuresAlarm watches the authorizer's own starts and timeouts meanwhile)"), nil)
	}
	var apis []awsapigateway.IRestApi
	if s.DemoAPI != nil {
		apis = append(apis, s.DemoAPI)
	}
	check := s.Functions["check"]
	s.Alarms = s.Authorizer.NewAlarms(stack, "", &sluice.AlarmsProps{
		Topic: topic, APIs: apis, APINames: p.ProtectedAPINames,
		Deciders: []awslambda.IFunction{check}, P99Millis: p.AuthorizerP99Millis,
	})
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	if rd.cpu != nil {
		for _, a := range []struct {
			id, desc string
			m        awscloudwatch.IMetric
		}{
			{"RedisCpuAlarm", "Sluice Redis CPU is high", rd.cpu},
			{"RedisMemoryAlarm", "Sluice Redis memory is high", rd.mem},
		} {
			al := awscloudwatch.NewAlarm(stack, jsii.String(a.id), &awscloudwatch.AlarmProps{
				AlarmDescription: jsii.String(a.desc), Metric: a.m, Threshold: jsii.Number(80), EvaluationPeriods: jsii.Number(5),
				ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
				TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
			})
			al.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
			al.AddOkAction(awscloudwatchactions.NewSnsAction(topic))
		}
	}

	if p.small() {
		return // no dashboards: 3 USD a month each beyond an account's first three
	}
	authorizer := s.Authorizer.Function
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
			Namespace: jsii.String(sluice.MetricsNamespace), MetricName: jsii.String(name), DimensionsMap: &dm,
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
		graph("Deny-cache hits, breaker open", sluiceMetric("DenyCacheHits", "Sum", nil), s.Alarms.BreakerOpenMetric),
	)
	// The authorizer's Errors include every 401 (a REST authorizer answers
	// 401 by failing), so they are graphed, never alarmed on.
	errs := authorizer.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute})
	invocations := []awscloudwatch.IMetric{
		authorizer.MetricInvocations(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute}), errs,
		authorizer.MetricThrottles(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute}),
	}
	dash.AddWidgets(
		graph("Authorizer invocations, errors (incl. 401), throttles, API 5XX", append(invocations, s.Alarms.ServerErrorMetrics...)...),
		graph("Authorizer duration (ms)",
			authorizer.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p50"), Period: minute}),
			authorizer.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99"), Period: minute})),
		graph("Fail-open and fail-closed decisions", s.Alarms.FailOpenMetric, s.Alarms.FailClosedMetric),
	)
	if rd.cpu != nil {
		dash.AddWidgets(graph("Redis CPU %", rd.cpu), graph("Redis memory %", rd.mem))
	}
}

// newOutputs writes the stack's outputs: the APIs, the authorizer, the alarm
// topic, and what a function of another app needs to share this
// deployment's Redis, database and subject hash key (the sluice.Output*
// names, which sluice.ReadOutputs reads).
func newOutputs(stack awscdk.Stack, s *Stack, net *network, rd redis, db database, subjectKey awssecretsmanager.ISecret) {
	out := func(key string, value *string, desc string) {
		awscdk.NewCfnOutput(stack, jsii.String(key), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
	}
	join := func(l *[]*string) *string { return awscdk.Fn_Join(jsii.String(","), l) }
	out("AdminApiUrl", s.AdminAPI.Url(), "Admin REST API (IAM-signed requests)")
	if s.DemoAPI != nil {
		out("DemoApiUrl", s.DemoAPI.Url(), "Demo REST API behind the Sluice authorizer")
	}
	out("AuthorizerArn", s.Authorizer.Function.FunctionArn(), "Sluice authorizer Lambda ARN")
	if s.AlarmTopic != nil {
		out("AlarmTopicArn", s.AlarmTopic.TopicArn(), "SNS topic every alarm notifies: subscribe to it")
	}
	if net.vpc != nil {
		selected := net.vpc.SelectSubnets(net.subnets)
		var groups []*string
		for _, g := range net.groups {
			groups = append(groups, g.SecurityGroupId())
		}
		out(sluice.OutputVpcID, net.vpc.VpcId(), "VPC of the Lambdas, Redis and the database proxy")
		out(sluice.OutputAvailabilityZones, join(selected.AvailabilityZones), "Availability zones of the subnets below")
		out(sluice.OutputSubnetIDs, join(selected.SubnetIds), "Subnets of the Lambdas: a function here reaches Redis, the database proxy and Secrets Manager")
		out(sluice.OutputSecurityGroupIDs, join(&groups), "Security groups of the Lambdas, which Redis and the database proxy admit")
	}
	out(sluice.OutputRedisURL, jsii.String(rd.url), "REDIS_URL")
	out(sluice.OutputRedisMode, jsii.String(rd.mode), "REDIS_MODE")
	if rd.authSecret != nil {
		out(sluice.OutputRedisAuthSecretArn, rd.authSecret.SecretArn(), "REDIS_AUTH_SECRET_ARN: the Redis AUTH token")
	}
	out(sluice.OutputSubjectKeySecretArn, subjectKey.SecretArn(), "SUBJECT_HMAC_KEY_SECRET_ARN: the subject hash key, which names the buckets")
	// The read-only role's login: a function of another app that shares
	// this deployment reads rules and never writes them (the owner's
	// login stays with the migration and the rule writes).
	if v, ok := db.readerEnv["DB_SECRET_ARN"]; ok {
		out(sluice.OutputDatabaseSecretArn, jsii.String(v), "DB_SECRET_ARN: the rules database's read-only login")
	}
	if v, ok := db.env["DB_HOST"]; ok {
		out(sluice.OutputDatabaseHost, jsii.String(v), "DB_HOST: the RDS Proxy endpoint the Lambdas connect to")
	}
}
