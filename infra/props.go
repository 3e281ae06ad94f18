// StackProps: every setting of the reference stack, its profiles' defaults
// and the checks that refuse a combination before anything is synthesized.

package main

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/rulefile"
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
	// RedisEngineVersion of the replication group (its major version for a
	// serverless cache), pinned so that a deploy never picks up whatever
	// ElastiCache's default is that day. ElastiCache
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

	// Edge, "cloudfront" (-c edge=cloudfront), puts the demo API behind a
	// CloudFront distribution whose function denies long-denied subjects
	// at the edge (docs/edge.md), and has the authorizer require the
	// distribution's origin header. Default "": no edge. Needs the demo API.
	Edge string

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

// maxLimits is the largest Limits in bytes: the custom resource's event
// carries it as the new and, on an update, the old property, and
// CloudFormation invokes the provider asynchronously, whose payload
// Lambda caps at 256 KB.
const maxLimits = 100_000

// byoDatabase reports whether the props name an existing database.
func (p *StackProps) byoDatabase() bool { return p.DatabaseURL != "" || p.DatabaseSecretArn != "" }

func (p *StackProps) validate() error {
	var errs []error
	if p.Profile != "" && p.Profile != "production" && p.Profile != "small" {
		//lint:ignore ST1005 it names the field, as the caller spells it
		errs = append(errs, fmt.Errorf("Profile %q: want production or small", p.Profile))
	}
	if p.Edge != "" && p.Edge != EdgeCloudFront {
		//lint:ignore ST1005 it names the field, as the caller spells it
		errs = append(errs, fmt.Errorf("Edge %q: want %s or nothing", p.Edge, EdgeCloudFront))
	}
	if p.Edge != "" && p.NoDemoAPI {
		//lint:ignore ST1005 it names the field, as the caller spells it
		errs = append(errs, errors.New("Edge needs the demo API, which it fronts: not with NoDemoAPI"))
	}
	if p.Edge != "" && !p.NoVpc && p.Vpc == nil && p.VpcID == "" && p.NatGateways == 0 {
		// The publisher reads Redis in the VPC and writes the store's
		// public endpoint (no VPC endpoint serves it): the stack's own VPC
		// routes out only through a NAT gateway.
		//lint:ignore ST1005 it names the field, as the caller spells it
		errs = append(errs, errors.New("Edge needs a route from the VPC to the KeyValueStore's public endpoint, which "+
			"the stack's own VPC has only with a NAT gateway: pass -c natGateways=1"))
	}
	if p.NoVpc && p.RedisURL == "" {
		errs = append(errs, errors.New("NoVpc requires RedisURL: ElastiCache needs a VPC"))
	}
	if p.MaintenanceWindow != "" {
		if err := checkWindow(p.MaintenanceWindow); err != nil {
			errs = append(errs, err)
		}
	}
	if n := len(p.Limits); n > maxLimits {
		//lint:ignore ST1005 it names the field, as the caller spells it
		errs = append(errs, fmt.Errorf("Limits: %d bytes, want at most %d: CloudFormation sends it twice in the "+
			"migration's event (new and old properties), which Lambda caps at 256 KB; apply a larger file with sluice apply", n, maxLimits))
	} else if p.Limits != "" {
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

var (
	// secretARN matches a Secrets Manager secret ARN, complete or partial.
	secretARN = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[^:]+$`)
	// snsTopicARN matches an SNS topic ARN.
	snsTopicARN = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_.-]+$`)
)

// jwksURL is where the authorizer fetches the signing keys.
func jwksURL(p *StackProps) string {
	return cmp.Or(p.JWTJWKSURL, strings.TrimSuffix(p.JWTIssuer, "/")+"/.well-known/jwks.json")
}
