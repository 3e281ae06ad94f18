package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/migrations"
)

// Each synth goes through jsii (a node process) and takes seconds, so every
// variant is synthesized once and shared by the tests (read-only).

var assetRoot string // dummy bootstraps, so synth needs no `make build`

// cdkContext is the context of cdk.json, the feature flags among it, which
// `cdk synth` gives the app: every test synthesizes with it.
var cdkContext map[string]any

func readCdkContext() (map[string]any, error) {
	b, err := os.ReadFile("../cdk.json")
	if err != nil {
		return nil, err
	}
	var c struct{ Context map[string]any }
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("cdk.json: %w", err)
	}
	return c.Context, nil
}

// newApp is an app as `cdk synth` makes it: cdk.json's context, plus ctx.
func newApp(ctx map[string]any) awscdk.App {
	all := map[string]any{}
	for k, v := range cdkContext {
		all[k] = v
	}
	for k, v := range ctx {
		all[k] = v
	}
	return awscdk.NewApp(&awscdk.AppProps{Context: &all})
}

// fakeBootstrap stands for a Lambda binary built with the RDS CA bundle
// (`make rds-ca build-arm64`): what checkAssets looks for in it.
var fakeBootstrap = []byte("#!/bin/sh\n" + strings.Repeat("-----BEGIN CERTIFICATE-----\n", 108))

func TestMain(m *testing.M) {
	// jsii warns loudly on every run under Node 20; the tests do not care.
	if os.Getenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION") == "" {
		os.Setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
	}
	dir, err := os.MkdirTemp("", "sluice-assets-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, name := range sluice.Functions {
		err := os.MkdirAll(filepath.Join(dir, name), 0o755)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name, "bootstrap"), fakeBootstrap, 0o755)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	assetRoot = dir
	if cdkContext, err = readCdkContext(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type variant string

const (
	full        variant = "full"        // everything created: VPC, replication group, Aurora
	serverless  variant = "serverless"  // ElastiCache Serverless, an upstream authorizer
	byo         variant = "byo"         // existing VPC (looked up, private subnets with NAT), Redis and database (secret)
	byoIsolated variant = "byoIsolated" // existing VPC with isolated subnets only, endpoints created there, an upstream
	jwt         variant = "jwt"         // jwt:sub behind Cognito, a NAT gateway for the JWKS
	lean        variant = "lean"        // no demo API, no account logging role, a topic of one's own, APIs elsewhere
	localstack  variant = "localstack"  // what `make localstack-deploy` synthesizes
	small       variant = "small"       // the small profile (-c profile=small): docs/cost.md
	edged       variant = "edged"       // the CDN edge (-c edge=cloudfront): edge_test.go, not in allVariants
)

// Looked-up VPCs (the CLI's VPC lookup answers, here in the context).
const (
	byoAccount, byoRegion = "123456789012", "eu-west-1"
	byoVpcID              = "vpc-0123456789abcdef0"
	isolatedVpcID         = "vpc-0aaaaaaaaaaaaaaa1"
	byoVpcCidr            = "10.10.0.0/16"
	isolatedVpcCidr       = "10.20.0.0/16"
	byoRedisHost          = "redis.internal.example"
	cognitoIssuer         = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbCdEfGhI"
)

// variantContext is each variant's context besides cdk.json's: the answer
// of the VPC lookup of the variants that bring a VPC (what the CLI's lookup
// would write to cdk.context.json).
func variantContext(v variant) map[string]any {
	subnet := func(id, cidr, az string) map[string]any {
		return map[string]any{"subnetId": id, "cidr": cidr, "availabilityZone": az, "routeTableId": "rtb-" + id[7:]}
	}
	lookup := func(vpcID, cidr string, groups ...any) map[string]any {
		key := "vpc-provider:account=" + byoAccount + ":filter.vpc-id=" + vpcID + ":region=" + byoRegion + ":returnAsymmetricSubnets=true"
		return map[string]any{key: map[string]any{
			"vpcId": vpcID, "vpcCidrBlock": cidr, "availabilityZones": []any{}, "subnetGroups": groups,
		}}
	}
	switch v {
	case byo:
		// Private subnets: the lookup found a NAT route in their tables.
		return lookup(byoVpcID, byoVpcCidr,
			map[string]any{"name": "public", "type": "Public", "subnets": []any{
				subnet("subnet-0pub0000000000001", "10.10.0.0/24", "eu-west-1a"), subnet("subnet-0pub0000000000002", "10.10.1.0/24", "eu-west-1b")}},
			map[string]any{"name": "app", "type": "Private", "subnets": []any{
				subnet(byoSubnets[0], "10.10.10.0/24", "eu-west-1a"), subnet(byoSubnets[1], "10.10.11.0/24", "eu-west-1b")}})
	case byoIsolated:
		return lookup(isolatedVpcID, isolatedVpcCidr,
			map[string]any{"name": "data", "type": "Isolated", "subnets": []any{
				subnet("subnet-0iso0000000000001", "10.20.1.0/24", "eu-west-1a"), subnet("subnet-0iso0000000000002", "10.20.2.0/24", "eu-west-1b")}})
	}
	return nil
}

// byoSubnets are the private subnets of the byo variant's VPC.
var byoSubnets = []string{"subnet-0app0000000000001", "subnet-0app0000000000002"}

func variantProps(v variant) *StackProps {
	p := &StackProps{AssetRoot: assetRoot}
	switch v {
	case full:
		p.AuthorizerMemory = 1024
		p.AuthorizerReservedConcurrency = 200
		p.AdminReservedConcurrency = 5
	case serverless:
		p.ServerlessRedis = true
		p.Limits, p.LimitsName = exampleLimits, "examples/limits.yaml"
		p.UpstreamAuthorizerArn = "arn:aws:lambda:eu-west-1:123456789012:function:team-authorizer"
	case byo:
		p.Env = &awscdk.Environment{Account: jsii.String(byoAccount), Region: jsii.String(byoRegion)}
		p.VpcID = byoVpcID
		p.SecurityGroupIDs = []string{"sg-0123456789abcdef0"}
		p.RedisURL = "rediss://" + byoRedisHost + ":6379"
		p.RedisAuthSecretArn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:redis-auth-AbCdEf"
		p.DatabaseSecretArn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice/db" // partial: no suffix
		p.DatabaseHost = "proxy.example.internal"
		p.RateLimitHeaders = "draft11,legacy"
	case byoIsolated:
		p.Env = &awscdk.Environment{Account: jsii.String(byoAccount), Region: jsii.String(byoRegion)}
		p.VpcID = isolatedVpcID
		p.VpcEndpoints = "create"
		p.RedisURL = "rediss://" + byoRedisHost + ":6379"
		p.DatabaseSecretArn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice/db-AbCdEf"
		p.UpstreamAuthorizerArn = "arn:aws:lambda:eu-west-1:123456789012:function:team-authorizer"
		p.SubjectSources = "principal"
	case jwt:
		p.SubjectSources = "jwt:sub"
		p.JWTIssuer = cognitoIssuer
		p.JWTAudience = "4s3f0hm5c8b1example"
		p.JWTTokenUse = "id"
		p.NatGateways = 1
		p.AlarmEmail = "oncall@example.com"
	case lean:
		p.NoDemoAPI = true
		p.NoAPIGatewayAccount = true
		p.AlarmTopicArn = "arn:aws:sns:eu-west-1:123456789012:platform-alarms"
		p.ProtectedAPINames = []string{"shop-prod", "billing-prod"}
		p.DatabaseDeletionProtection = true
		p.DatabaseBackupRetentionDays = 14
		p.RedisNodeType = "cache.r7g.large"
	case small:
		p.Profile = "small"
		p.AlarmEmail = "oncall@example.com"
	case edged:
		p.Edge, p.NatGateways = EdgeCloudFront, 1
	case localstack:
		p.NoVpc = true
		p.RedisURL = "redis://host.docker.internal:6379"
		p.DatabaseURL = "postgres://sluice:sluice@host.docker.internal:5432/sluice"
	}
	return p
}

type synthed struct {
	once     sync.Once
	template assertions.Template
	json     map[string]any
	nag      []nagFinding // AwsSolutions errors and warnings not suppressed
	err      error
}

// nagFinding is one cdk-nag message: "AwsSolutions-IAM4[...]: text" on a
// construct path.
type nagFinding struct {
	Level, Path, Message string
}

var (
	synthMu sync.Mutex
	synths  = map[variant]*synthed{}
)

// synth returns the variant's template, synthesized once per test binary.
func synth(t *testing.T, v variant) (assertions.Template, map[string]any) {
	t.Helper()
	if testing.Short() {
		t.Skip("synthesizes the stack through jsii (node), minutes on 2 cores: skipped with -short (make check)")
	}
	synthMu.Lock()
	s, ok := synths[v]
	if !ok {
		s = &synthed{}
		synths[v] = s
	}
	synthMu.Unlock()
	s.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				s.err = fmt.Errorf("synth panicked: %v", r)
			}
		}()
		app := newApp(variantContext(v))
		st, err := NewStack(app, "Sluice", variantProps(v))
		if err != nil {
			s.err = err
			return
		}
		// cdk-nag's AwsSolutions pack runs as an aspect during synthesis
		// and reports each finding not suppressed in the stack as an error
		// or warning annotation (TestNag). No CSV reports.
		awscdk.Aspects_Of(st.Stack).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Reports: jsii.Bool(false)}), nil)
		s.template = assertions.Template_FromStack(st.Stack, nil)
		ann := assertions.Annotations_FromStack(st.Stack)
		rule := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
		//lint:ignore SA1019 the Go assertions API returns this type; its replacement has no Go binding yet
		for level, msgs := range map[string]*[]*cxapi.SynthesisMessage{
			"error":   ann.FindError(jsii.String("*"), rule),
			"warning": ann.FindWarning(jsii.String("*"), rule),
		} {
			for _, m := range *msgs {
				//lint:ignore SA1019 as above: the only way to read a finding from Go
				s.nag = append(s.nag, nagFinding{Level: level, Path: *m.Id, Message: fmt.Sprint(m.Entry.Data)})
			}
		}
		sort.Slice(s.nag, func(i, j int) bool { return s.nag[i].Path+s.nag[i].Message < s.nag[j].Path+s.nag[j].Message })
		// Through encoding/json so the tests walk plain maps and slices.
		b, err := json.Marshal(s.template.ToJSON())
		if err == nil {
			err = json.Unmarshal(b, &s.json)
		}
		s.err = err
	})
	if s.err != nil {
		t.Fatalf("synth %s: %v", v, s.err)
	}
	return s.template, s.json
}

// nagFindings returns the variant's unsuppressed cdk-nag findings.
func nagFindings(t *testing.T, v variant) []nagFinding {
	t.Helper()
	synth(t, v)
	synthMu.Lock()
	defer synthMu.Unlock()
	return synths[v].nag
}

// hasProps checks that tmpl has a resource of typ with props, as
// assertions' HasResourceProperties does, and reports a mismatch as a test
// error naming what.
func hasProps(t *testing.T, tmpl assertions.Template, what, typ string, props any) {
	t.Helper()
	check(t, what, func() { tmpl.HasResourceProperties(jsii.String(typ), props) })
}

// countIs checks that tmpl has n resources of typ, and reports a mismatch
// as a test error naming what.
func countIs(t *testing.T, tmpl assertions.Template, what, typ string, n float64) {
	t.Helper()
	check(t, what, func() { tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
}

// check runs an assertions call, which panics on a mismatch, as a test error.
func check(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

type resource struct {
	ID    string
	Type  string
	Props map[string]any
}

// resources returns the template's resources of the given type (all when
// typ is ""), sorted by logical id.
func resources(tmpl map[string]any, typ string) []resource {
	var out []resource
	rs, _ := tmpl["Resources"].(map[string]any)
	for id, r := range rs {
		m, _ := r.(map[string]any)
		rt, _ := m["Type"].(string)
		if typ != "" && rt != typ && !(strings.HasSuffix(typ, "*") && strings.HasPrefix(rt, strings.TrimSuffix(typ, "*"))) {
			continue
		}
		props, _ := m["Properties"].(map[string]any)
		out = append(out, resource{ID: id, Type: rt, Props: props})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// sluiceFunctions are the template's Lambdas built from `make build` (the
// provider framework's Node.js function is not one).
func sluiceFunctions(tmpl map[string]any) []resource {
	var out []resource
	for _, r := range resources(tmpl, "AWS::Lambda::Function") {
		if r.Props["Handler"] == "bootstrap" {
			out = append(out, r)
		}
	}
	return out
}

func envOf(r resource) map[string]any {
	env, _ := r.Props["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	return vars
}

func allVariants() []variant {
	return []variant{full, serverless, byo, byoIsolated, jwt, lean, localstack, small}
}

func TestAuthorizerResultCacheIsOff(t *testing.T) {
	for _, v := range allVariants() {
		tmpl, js := synth(t, v)
		want := 1
		if v == lean {
			want = 0 // no demo API: APIs elsewhere make their own from AuthorizerArn
		}
		countIs(t, tmpl, string(v), "AWS::ApiGateway::Authorizer", float64(want))
		for _, r := range resources(js, "AWS::ApiGateway::Authorizer") {
			if got := r.Props["AuthorizerResultTtlInSeconds"]; got != 0.0 {
				t.Errorf("%s: %s AuthorizerResultTtlInSeconds = %v, want 0", v, r.ID, got)
			}
			// No SubjectSources given, so none is derived: the authorizer
			// itself looks for its default source and answers 401.
			if got, ok := r.Props["IdentitySource"]; ok {
				t.Errorf("%s: %s IdentitySource = %q, want none", v, r.ID, got)
			}
			if got := r.Props["Type"]; got != "REQUEST" {
				t.Errorf("%s: %s Type = %v, want REQUEST", v, r.ID, got)
			}
		}
	}
}

// TestRateLimitHeadersProp: the byo variant chooses draft11 and legacy, so
// its 429 maps both dialects' fields, and the authorizer and the check
// function get RATELIMIT_HEADERS (the others keep the default, unset).
func TestRateLimitHeadersProp(t *testing.T) {
	tmpl, js := synth(t, byo)
	hasProps(t, tmpl, "ACCESS_DENIED", "AWS::ApiGateway::GatewayResponse", &map[string]any{
		"ResponseType": "ACCESS_DENIED",
		"ResponseParameters": assertions.Match_ObjectEquals(&map[string]any{
			"gatewayresponse.header.Content-Type":          "'application/json'",
			"gatewayresponse.header.Retry-After":           "context.authorizer.retryAfter",
			"gatewayresponse.header.RateLimit-Policy":      "context.authorizer.rateLimitPolicy",
			"gatewayresponse.header.RateLimit":             "context.authorizer.rateLimit",
			"gatewayresponse.header.X-RateLimit-Limit":     "context.authorizer.limit",
			"gatewayresponse.header.X-RateLimit-Remaining": "context.authorizer.remaining",
			"gatewayresponse.header.X-RateLimit-Reset":     "context.authorizer.resetAt",
		}),
	})
	n := 0
	for _, r := range resources(js, "AWS::Lambda::Function") {
		env, _ := r.Props["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		if v, ok := vars["RATELIMIT_HEADERS"]; ok {
			n++
			if v != "draft11,legacy" {
				t.Errorf("%s RATELIMIT_HEADERS = %v, want draft11,legacy", r.ID, v)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d functions have RATELIMIT_HEADERS, want 2 (the authorizer and check)", n)
	}
	if err := (&StackProps{RateLimitHeaders: "draft11,x"}).validate(); err == nil || !strings.Contains(err.Error(), "RateLimitHeaders") {
		t.Errorf("validate(RateLimitHeaders: draft11,x) = %v, want an error naming RateLimitHeaders", err)
	}
}

func TestAccessDeniedBecomes429(t *testing.T) {
	tmpl, js := synth(t, full)
	hasProps(t, tmpl, "ACCESS_DENIED", "AWS::ApiGateway::GatewayResponse", &map[string]any{
		"ResponseType": "ACCESS_DENIED",
		"StatusCode":   "429",
		"ResponseParameters": assertions.Match_ObjectLike(&map[string]any{
			"gatewayresponse.header.Retry-After":      "context.authorizer.retryAfter",
			"gatewayresponse.header.RateLimit-Policy": "context.authorizer.rateLimitPolicy",
			"gatewayresponse.header.RateLimit":        "context.authorizer.rateLimit",
		}),
	})
	hasProps(t, tmpl, "UNAUTHORIZED", "AWS::ApiGateway::GatewayResponse", &map[string]any{
		"ResponseType": "UNAUTHORIZED",
		"StatusCode":   "401",
	})
	for _, r := range resources(js, "AWS::ApiGateway::GatewayResponse") {
		if r.Props["ResponseType"] != "ACCESS_DENIED" {
			continue
		}
		body, _ := r.Props["ResponseTemplates"].(map[string]any)["application/json"].(string)
		for _, key := range []string{"retryAfter", "limit", "remaining", "reset", "rule"} {
			if !strings.Contains(body, "$context.authorizer."+key) {
				t.Errorf("429 body = %s, want $context.authorizer.%s in it", body, key)
			}
		}
		// With the values of a Deny's context substituted, as API Gateway
		// does, the body is JSON whose numbers are numbers.
		filled := strings.NewReplacer(
			"$context.authorizer.rateLimitPolicy", `"r1";q=10;w=60`,
			"$context.authorizer.rateLimit", `"r1";r=0;t=6`,
			"$context.authorizer.retryAfter", "6", "$context.authorizer.limit", "10",
			"$context.authorizer.remaining", "0", "$context.authorizer.reset", "6",
			"$context.authorizer.", "", "$context.", "").Replace(body)
		var got map[string]any
		if err := json.Unmarshal([]byte(filled), &got); err != nil {
			t.Errorf("429 body %s is not valid JSON once substituted: %v", body, err)
		} else if got["limit"] != 10.0 || got["retryAfter"] != 6.0 || got["rule"] != "rule" {
			t.Errorf("429 body %s substituted = %v, want limit 10 and retryAfter 6 as numbers", body, got)
		}
	}
	// Only the demo API gets them: the admin API's IAM denials stay 403.
	adminID := logicalID(t, js, "AWS::ApiGateway::RestApi", "AdminApi")
	for _, r := range resources(js, "AWS::ApiGateway::GatewayResponse") {
		if refersTo(r.Props["RestApiId"], adminID) {
			t.Errorf("gateway response %s is on the admin API; want none there", r.ID)
		}
	}
}

// logicalID finds the one resource of typ whose logical id starts with prefix.
func logicalID(t *testing.T, js map[string]any, typ, prefix string) string {
	t.Helper()
	var ids []string
	for _, r := range resources(js, typ) {
		if strings.HasPrefix(r.ID, prefix) {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%s resources named %s* = %v, want exactly one", typ, prefix, ids)
	}
	return ids[0]
}

func refersTo(v any, id string) bool {
	m, _ := v.(map[string]any)
	return m["Ref"] == id
}

func TestAdminMethodsUseIAM(t *testing.T) {
	_, js := synth(t, full)
	adminID := logicalID(t, js, "AWS::ApiGateway::RestApi", "AdminApi")
	demoID := logicalID(t, js, "AWS::ApiGateway::RestApi", "DemoApi")
	var admin, demo int
	for _, r := range resources(js, "AWS::ApiGateway::Method") {
		switch {
		case refersTo(r.Props["RestApiId"], adminID):
			admin++
			if got := r.Props["AuthorizationType"]; got != "AWS_IAM" {
				t.Errorf("admin method %s %s AuthorizationType = %v, want AWS_IAM", r.ID, r.Props["HttpMethod"], got)
			}
		case refersTo(r.Props["RestApiId"], demoID):
			demo++
			if got := r.Props["AuthorizationType"]; got != "CUSTOM" {
				t.Errorf("demo method %s AuthorizationType = %v, want CUSTOM", r.ID, got)
			}
		}
	}
	if admin != len(adminRoutes) {
		t.Errorf("admin methods = %d, want %d (one per route)", admin, len(adminRoutes))
	}
	if demo == 0 {
		t.Error("demo methods = 0, want some")
	}
}

func TestLambdas(t *testing.T) {
	for _, v := range allVariants() {
		_, js := synth(t, v)
		fns := sluiceFunctions(js)
		want := len(sluice.Functions)
		if variantProps(v).Edge == "" {
			want-- // the edge publisher
		}
		if len(fns) != want {
			t.Errorf("%s: Sluice functions = %d, want %d", v, len(fns), want)
		}
		for _, r := range fns {
			if diff := cmp.Diff([]any{"arm64"}, r.Props["Architectures"]); diff != "" {
				t.Errorf("%s: %s Architectures (-want +got):\n%s", v, r.ID, diff)
			}
			if got := r.Props["Runtime"]; got != "provided.al2023" {
				t.Errorf("%s: %s Runtime = %v, want provided.al2023", v, r.ID, got)
			}
			if functionAccess[strings.TrimPrefix(fmt.Sprint(r.Props["Description"]), "Sluice ")].stats {
				// Outside the VPC, no Redis, no database: only
				// CloudWatch (TestContributorInsights).
				continue
			}
			_, inVpc := r.Props["VpcConfig"]
			if want := v != localstack; inVpc != want {
				t.Errorf("%s: %s has VpcConfig = %v, want %v", v, r.ID, inVpc, want)
			}
			env := envOf(r)
			if env["LOG_LEVEL"] == nil {
				t.Errorf("%s: %s has no LOG_LEVEL", v, r.ID)
			}
			// Redis only where the function's access says (TestLeastPrivilege).
			wantRedis := functionAccess[strings.TrimPrefix(fmt.Sprint(r.Props["Description"]), "Sluice ")].redis
			if _, ok := env["REDIS_URL"]; ok != wantRedis {
				t.Errorf("%s: %s has REDIS_URL = %v, want %v", v, r.ID, ok, wantRedis)
			}
			_, url := env["DATABASE_URL"]
			_, secret := env["DB_SECRET_ARN"]
			if url == secret {
				t.Errorf("%s: %s DATABASE_URL set %v, DB_SECRET_ARN set %v; want exactly one", v, r.ID, url, secret)
			}
		}
	}
}

func TestTuning(t *testing.T) {
	_, js := synth(t, full)
	authID := logicalID(t, js, "AWS::Lambda::Function", "AuthorizerFunction")
	for _, r := range sluiceFunctions(js) {
		memory, reserved := r.Props["MemorySize"], r.Props["ReservedConcurrentExecutions"]
		switch {
		case r.ID == authID:
			if memory != 1024.0 || reserved != 200.0 {
				t.Errorf("authorizer MemorySize, ReservedConcurrentExecutions = %v, %v; want 1024, 200", memory, reserved)
			}
		case strings.HasPrefix(r.ID, "Admin"):
			if memory != 256.0 || reserved != 5.0 {
				t.Errorf("%s MemorySize, ReservedConcurrentExecutions = %v, %v; want 256, 5", r.ID, memory, reserved)
			}
		default:
			if reserved != nil {
				t.Errorf("%s ReservedConcurrentExecutions = %v, want unset", r.ID, reserved)
			}
		}
	}
}

func TestFullStackEnvironment(t *testing.T) {
	_, js := synth(t, full)
	authID := logicalID(t, js, "AWS::Lambda::Function", "AuthorizerFunction")
	var env map[string]any
	for _, r := range sluiceFunctions(js) {
		if r.ID == authID {
			env = envOf(r)
		}
	}
	b, _ := json.Marshal(env)
	s := string(b)
	for _, want := range []string{`"rediss://"`, `PrimaryEndPoint.Address`, `"REDIS_AUTH_SECRET_ARN":{"Ref":"RedisAuthToken`, `"DB_HOST":{"Fn::GetAtt":["DbProxy`, `"DB_SECRET_ARN":{"Ref":"DbReaderSecretAttachment`} {
		if !strings.Contains(s, want) {
			t.Errorf("authorizer environment = %s, want %s in it", s, want)
		}
	}
	if env["REDIS_MODE"] != "single" {
		t.Errorf("REDIS_MODE = %v, want single", env["REDIS_MODE"])
	}
}

// TestSubjectKeySecret: the stack creates the subject hash key in Secrets
// Manager (generated there, never in the template), and every function
// that hashes subjects gets its ARN and a read grant; migrate neither.
func TestSubjectKeySecret(t *testing.T) {
	_, js := synth(t, full)
	secrets := resources(js, "AWS::SecretsManager::Secret")
	var keyID string
	for _, r := range secrets {
		if strings.HasPrefix(r.ID, "SubjectHmacKey") {
			keyID = r.ID
			if _, ok := r.Props["GenerateSecretString"]; !ok {
				t.Errorf("secret %s has no GenerateSecretString: the key would be in the template", r.ID)
			}
		}
	}
	if keyID == "" {
		t.Fatalf("no SubjectHmacKey secret among %d secrets", len(secrets))
	}
	for _, r := range sluiceFunctions(js) {
		b, _ := json.Marshal(envOf(r)["SUBJECT_HMAC_KEY_SECRET_ARN"])
		has := strings.Contains(string(b), keyID)
		// The migrations and the rule and plan reads hash no subject: no
		// key. admin-stats hashes one for POST /subjects/find, without
		// Redis (GET /stats reads hashes the log lines already carry).
		a := functionAccess[strings.TrimPrefix(fmt.Sprint(r.Props["Description"]), "Sluice ")]
		none := !a.redis && !a.key
		if has == none {
			t.Errorf("%s SUBJECT_HMAC_KEY_SECRET_ARN = %s (needs none: %v)", r.ID, b, none)
		}
	}
	granted := 0
	for _, r := range resources(js, "AWS::IAM::Policy") {
		b, _ := json.Marshal(r.Props["PolicyDocument"])
		if strings.Contains(string(b), `"Ref":"`+keyID+`"`) && strings.Contains(string(b), "secretsmanager:GetSecretValue") {
			granted++
		}
	}
	if granted == 0 {
		t.Errorf("no policy grants GetSecretValue on %s", keyID)
	}
}

func TestReplicationGroup(t *testing.T) {
	tmpl, _ := synth(t, full)
	hasProps(t, tmpl, "replication group", "AWS::ElastiCache::ReplicationGroup", &map[string]any{
		"Engine":                   "valkey",
		"EngineVersion":            "7.2", // pinned: never ElastiCache's default of the day
		"AutomaticFailoverEnabled": true,
		"MultiAZEnabled":           true,
		"TransitEncryptionEnabled": true,
		"AtRestEncryptionEnabled":  true,
		"NumCacheClusters":         2,
		"AuthToken":                assertions.Match_AnyValue(),
	})
	hasProps(t, tmpl, "AUTH token secret", "AWS::SecretsManager::Secret", &map[string]any{
		"GenerateSecretString": assertions.Match_ObjectLike(&map[string]any{"ExcludePunctuation": true, "PasswordLength": 64}),
	})
	countIs(t, tmpl, "no serverless cache", "AWS::ElastiCache::ServerlessCache", 0)
}

func TestRedisEngineVersion(t *testing.T) {
	tests := []struct{ engine, version, want string }{
		{"valkey", "", "7.2"},
		{"redis", "", "7.1"},
		{"valkey", "8.0", "8.0"}, // an existing group already on 8.0 keeps it
	}
	for _, tt := range tests {
		if got := redisEngineVersion(tt.engine, tt.version); got != tt.want {
			t.Errorf("redisEngineVersion(%q, %q) = %q, want %q", tt.engine, tt.version, got, tt.want)
		}
	}
}

// TestRedisIngress checks the ports the Lambdas may reach Redis on: 6379
// for a replication group; 6379 and 6380 (replica reads, advertised in the
// cluster topology) for ElastiCache Serverless.
func TestRedisIngress(t *testing.T) {
	for _, tt := range []struct {
		v     variant
		ports []float64
	}{
		{full, []float64{6379}},
		{serverless, []float64{6379, 6380}},
	} {
		_, js := synth(t, tt.v)
		redisSG := logicalID(t, js, "AWS::EC2::SecurityGroup", "RedisSg")
		fnSG := logicalID(t, js, "AWS::EC2::SecurityGroup", "FunctionsSg")
		var ports []float64
		for _, r := range resources(js, "AWS::EC2::SecurityGroupIngress") {
			if !getsAtt(r.Props["GroupId"], redisSG) {
				continue
			}
			if !getsAtt(r.Props["SourceSecurityGroupId"], fnSG) || r.Props["IpProtocol"] != "tcp" || r.Props["FromPort"] != r.Props["ToPort"] {
				t.Errorf("%s: Redis ingress %s = %v, want tcp on one port from the functions' group", tt.v, r.ID, r.Props)
				continue
			}
			ports = append(ports, r.Props["FromPort"].(float64))
		}
		sort.Float64s(ports)
		if diff := cmp.Diff(tt.ports, ports); diff != "" {
			t.Errorf("%s: Redis ingress ports (-want +got):\n%s", tt.v, diff)
		}
	}
}

// getsAtt reports whether v is {"Fn::GetAtt": [id, ...]}.
func getsAtt(v any, id string) bool {
	m, _ := v.(map[string]any)
	a, _ := m["Fn::GetAtt"].([]any)
	return len(a) > 0 && a[0] == id
}

func TestServerlessCache(t *testing.T) {
	tmpl, js := synth(t, serverless)
	countIs(t, tmpl, "serverless cache", "AWS::ElastiCache::ServerlessCache", 1)
	countIs(t, tmpl, "no replication group", "AWS::ElastiCache::ReplicationGroup", 0)
	for _, r := range sluiceFunctions(js) {
		if env := envOf(r); env["REDIS_URL"] != nil && env["REDIS_MODE"] != "cluster" {
			t.Errorf("%s REDIS_MODE = %v, want cluster", r.ID, env["REDIS_MODE"])
		}
	}
}

// TestServerlessCacheAuth: a serverless cache (the small profile's, and
// serverlessRedis) admits only an authenticated client: its user group's
// one user is "default" (a group must hold one, AWS::ElastiCache::UserGroup)
// with a password from a generated secret, {"username":"default",
// "password":...}, which every function that connects to Redis, and only
// those, is given as REDIS_AUTH_SECRET_ARN.
func TestServerlessCacheAuth(t *testing.T) {
	for _, v := range []variant{serverless, small} {
		_, js := synth(t, v)
		caches := resources(js, "AWS::ElastiCache::ServerlessCache")
		groups := resources(js, "AWS::ElastiCache::UserGroup")
		users := resources(js, "AWS::ElastiCache::User")
		if len(caches) != 1 || len(groups) != 1 || len(users) != 1 || refID(caches[0].Props["UserGroupId"]) != groups[0].ID {
			t.Errorf("%s: %d caches, %d user groups, %d users; want one of each, the cache's UserGroupId the group", v, len(caches), len(groups), len(users))
			continue
		}
		g, u := groups[0], users[0]
		if ids, _ := g.Props["UserIds"].([]any); len(ids) != 1 || refID(ids[0]) != u.ID || g.Props["Engine"] != caches[0].Props["Engine"] {
			t.Errorf("%s: user group %v, want the one user, engine %v", v, g.Props, caches[0].Props["Engine"])
		}
		mode, _ := u.Props["AuthenticationMode"].(map[string]any)
		pw, _ := mode["Passwords"].([]any)
		b, _ := json.Marshal(pw)
		secret := refs(pw)
		if u.Props["UserName"] != "default" || u.Props["Engine"] != g.Props["Engine"] || u.Props["NoPasswordRequired"] == true ||
			mode["Type"] != "password" || len(pw) != 1 || !strings.Contains(string(b), "{{resolve:secretsmanager:") ||
			!strings.Contains(string(b), ":SecretString:password:") || len(secret) != 1 {
			t.Errorf("%s: user %v, want default, engine %v, one password from a secret", v, u.Props, g.Props["Engine"])
			continue
		}
		var gen map[string]any
		for _, r := range resources(js, "AWS::SecretsManager::Secret") {
			if r.ID == secret[0] {
				gen, _ = r.Props["GenerateSecretString"].(map[string]any)
			}
		}
		if gen["SecretStringTemplate"] != `{"username":"default"}` || gen["GenerateStringKey"] != "password" || gen["PasswordLength"] != 64.0 {
			t.Errorf("%s: %s generates %v, want {\"username\":\"default\"} and a 64-character password", v, secret[0], gen)
		}
		n := 0
		for _, fn := range sluiceFunctions(js) {
			env := envOf(fn)
			if got := refID(env["REDIS_AUTH_SECRET_ARN"]); (env["REDIS_URL"] != nil) != (got == secret[0]) {
				t.Errorf("%s: %s REDIS_URL %v, REDIS_AUTH_SECRET_ARN %v; want the login exactly where Redis is", v, fn.ID, env["REDIS_URL"] != nil, got)
			}
			if env["REDIS_URL"] != nil {
				n++
			}
		}
		if n == 0 {
			t.Errorf("%s: no function connects to Redis; the check is empty", v)
		}
	}
}

func TestAuroraServerlessV2(t *testing.T) {
	tmpl, _ := synth(t, full)
	hasProps(t, tmpl, "cluster", "AWS::RDS::DBCluster", &map[string]any{
		"Engine":                           "aurora-postgresql",
		"StorageEncrypted":                 true,
		"ServerlessV2ScalingConfiguration": map[string]any{"MinCapacity": 0.5, "MaxCapacity": 4},
		"MasterUsername":                   assertions.Match_AnyValue(),
		"MasterUserPassword":               assertions.Match_AnyValue(),
	})
	hasProps(t, tmpl, "writer", "AWS::RDS::DBInstance", &map[string]any{"DBInstanceClass": "db.serverless"})
	hasProps(t, tmpl, "generated secret", "AWS::SecretsManager::Secret", &map[string]any{
		"GenerateSecretString": assertions.Match_ObjectLike(&map[string]any{
			"GenerateStringKey":    "password",
			"SecretStringTemplate": `{"username":"sluice"}`,
		}),
	})
	hasProps(t, tmpl, "proxy", "AWS::RDS::DBProxy", &map[string]any{"EngineFamily": "POSTGRESQL", "RequireTLS": true})
}

func TestVpcHasNoNat(t *testing.T) {
	tmpl, js := synth(t, full)
	countIs(t, tmpl, "vpc: NAT gateways", "AWS::EC2::NatGateway", 0)
	countIs(t, tmpl, "vpc: internet gateways", "AWS::EC2::InternetGateway", 0)
	countIs(t, tmpl, "vpc: subnets", "AWS::EC2::Subnet", 2)
	// Secrets Manager is the one AWS API the Lambdas call.
	eps := resources(js, "AWS::EC2::VPCEndpoint")
	if b, _ := json.Marshal(eps); len(eps) != 1 || !strings.Contains(string(b), ".secretsmanager") {
		t.Errorf("VPC endpoints = %s, want one, for Secrets Manager", b)
	}
}

// TestNoWildcardActions walks every policy statement, standalone or inline in
// a role, for an action with a "*" in it.
func TestNoWildcardActions(t *testing.T) {
	for _, v := range allVariants() {
		_, js := synth(t, v)
		var n int
		for _, r := range resources(js, "") {
			var docs []any
			switch r.Type {
			case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
				docs = append(docs, r.Props["PolicyDocument"])
			case "AWS::IAM::Role":
				pols, _ := r.Props["Policies"].([]any)
				for _, p := range pols {
					docs = append(docs, p.(map[string]any)["PolicyDocument"])
				}
			}
			for _, d := range docs {
				stmts, _ := d.(map[string]any)["Statement"].([]any)
				for _, s := range stmts {
					n++
					var actions []any
					switch a := s.(map[string]any)["Action"].(type) {
					case string:
						actions = []any{a}
					case []any:
						actions = a
					}
					for _, a := range actions {
						if str, _ := a.(string); strings.Contains(str, "*") {
							t.Errorf("%s: %s allows action %q, want no wildcard", v, r.ID, str)
						}
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no policy statements found; the walk is broken", v)
		}
	}
}

func TestAlarmsAndDashboard(t *testing.T) {
	tmpl, js := synth(t, full)
	// Fail-open: a sum over the authorizer's and the check function's
	// FailOpen metrics (namespace Sluice, dimension Function).
	var failOpen int
	for _, r := range resources(js, "AWS::CloudWatch::Alarm") {
		b, _ := json.Marshal(r.Props["Metrics"])
		if !strings.Contains(string(b), `"MetricName":"FailOpen","Namespace":"Sluice"`) {
			continue
		}
		failOpen++
		for _, fn := range []string{"AuthorizerFunction", "Check"} {
			if !strings.Contains(string(b), `"Dimensions":[{"Name":"Function","Value":{"Ref":"`+fn) {
				t.Errorf("fail-open alarm metrics = %s, want the Function dimension of %s", b, fn)
			}
		}
		if r.Props["Threshold"] != 0.0 || r.Props["ComparisonOperator"] != "GreaterThanThreshold" {
			t.Errorf("fail-open alarm Threshold, ComparisonOperator = %v, %v; want 0, GreaterThanThreshold", r.Props["Threshold"], r.Props["ComparisonOperator"])
		}
	}
	if failOpen != 1 {
		t.Errorf("fail-open alarms = %d, want 1", failOpen)
	}
	// Authorizer failures: the demo API's 5XXError, not the function's
	// Errors, which count every 401.
	hasProps(t, tmpl, "authorizer failures alarm", "AWS::CloudWatch::Alarm", &map[string]any{
		"Namespace": "AWS/ApiGateway", "MetricName": "5XXError", "Statistic": "Sum", "Period": 60,
		"Dimensions":         []any{map[string]any{"Name": "ApiName", "Value": "Sluice-demo"}},
		"Threshold":          0,
		"ComparisonOperator": "GreaterThanThreshold",
	})
	authID := logicalID(t, js, "AWS::Lambda::Function", "AuthorizerFunction")
	hasProps(t, tmpl, "authorizer throttles alarm", "AWS::CloudWatch::Alarm", &map[string]any{
		"Namespace": "AWS/Lambda", "MetricName": "Throttles", "Statistic": "Sum", "Period": 60,
		"Dimensions":         []any{map[string]any{"Name": "FunctionName", "Value": map[string]any{"Ref": authID}}},
		"Threshold":          0,
		"ComparisonOperator": "GreaterThanThreshold",
	})
	for _, r := range resources(js, "AWS::CloudWatch::Alarm") {
		b, _ := json.Marshal(r.Props)
		if r.Props["MetricName"] == "Errors" || strings.Contains(string(b), `"MetricName":"Errors"`) {
			t.Errorf("alarm %s watches Lambda Errors, which count every 401: %s", r.ID, b)
		}
	}
	hasProps(t, tmpl, "p99 alarm", "AWS::CloudWatch::Alarm", &map[string]any{
		"Namespace": "AWS/Lambda", "MetricName": "Duration", "ExtendedStatistic": "p99",
	})
	// The operations dashboard, and the Contributor Insights one
	// (TestContributorInsights).
	countIs(t, tmpl, "dashboards", "AWS::CloudWatch::Dashboard", 2)
	b, _ := json.Marshal(resources(js, "AWS::CloudWatch::Alarm"))
	for _, metric := range []string{"EngineCPUUtilization", "DatabaseMemoryUsagePercentage"} {
		if !strings.Contains(string(b), metric) {
			t.Errorf("no alarm on Redis %s", metric)
		}
	}
	_, sjs := synth(t, serverless)
	b, _ = json.Marshal(resources(sjs, "AWS::CloudWatch::Alarm"))
	for _, metric := range []string{"ElastiCacheProcessingUnits", "BytesUsedForCache"} {
		if !strings.Contains(string(b), metric) {
			t.Errorf("serverless: no alarm on Redis %s", metric)
		}
	}
}

// TestOutputs: what a function of another app needs to share the
// deployment (sluice.ReadOutputs) is an output of every variant that has
// it: the VPC and its subnets and groups wherever there is a VPC, the
// Redis AUTH secret wherever there is one, the database host with a proxy.
func TestOutputs(t *testing.T) {
	for _, v := range allVariants() {
		_, js := synth(t, v)
		outputs, _ := js["Outputs"].(map[string]any)
		want := []string{"AdminApiUrl", "AuthorizerArn", sluice.OutputRedisURL, sluice.OutputRedisMode,
			sluice.OutputSubjectKeySecretArn, rulesPublicKey}
		if v != lean {
			want = append(want, "DemoApiUrl", "AlarmTopicArn")
		}
		if v != localstack {
			want = append(want, sluice.OutputVpcID, sluice.OutputAvailabilityZones, sluice.OutputSubnetIDs,
				sluice.OutputSecurityGroupIDs, sluice.OutputDatabaseSecretArn)
		}
		if v == full || v == lean || v == jwt || v == serverless {
			want = append(want, sluice.OutputDatabaseHost)
		}
		if v == full || v == lean || v == jwt || v == byo {
			want = append(want, sluice.OutputRedisAuthSecretArn)
		}
		for _, o := range want {
			if _, ok := outputs[o]; !ok {
				t.Errorf("%s: no output %s", v, o)
			}
		}
		if _, ok := outputs["LedgerTable"]; ok {
			t.Errorf("%s: output LedgerTable in a regional stack: sluice verify would require a ledger", v)
		}
	}
}

// TestMigration: the custom resource names the migrations the function
// carries by their digest, so CloudFormation updates it (and the function
// migrates) only when they change, and a rollback sends the old digest,
// which the function skips (internal/app TestHandleSkipsWithoutDatabase);
// it names the rules signing key too, so a new key republishes the
// snapshot (TestHandleGivesRulesPublicKey).
func TestMigration(t *testing.T) {
	tmpl, js := synth(t, full)
	hasProps(t, tmpl, "migration", "Custom::SluiceMigrate", assertions.Match_ObjectEquals(&map[string]any{
		"ServiceToken":    assertions.Match_AnyValue(),
		"Migrations":      migrations.Digest(),
		"RulesSigningKey": map[string]any{"Ref": logicalID(t, js, "AWS::SecretsManager::Secret", "RulesSigningKey")},
	}))
	// The migration depends on the Secrets Manager endpoint, so deleting
	// the stack removes the endpoint only after the migrate function has
	// answered the Delete event (a cold start reads the database secret).
	// It also waits for the database on Create.
	endpoint := logicalID(t, js, "AWS::EC2::VPCEndpoint", "VpcSecretsManagerEndpoint")
	cluster := logicalID(t, js, "AWS::RDS::DBCluster", "Db")
	ms := resources(js, "Custom::SluiceMigrate")
	if len(ms) != 1 {
		t.Fatalf("Custom::SluiceMigrate resources = %d, want 1", len(ms))
	}
	deps, _ := js["Resources"].(map[string]any)[ms[0].ID].(map[string]any)["DependsOn"].([]any)
	for _, want := range []string{endpoint, cluster} {
		if !slices.Contains(deps, any(want)) {
			t.Errorf("migration DependsOn = %v, want %s in it", deps, want)
		}
	}
}

// TestSynthIsStable: two synths of an unchanged app give the same
// template, so `cdk diff` shows no change and a deploy updates nothing
// (the migration's property was the synth time, changed every time).
func TestSynthIsStable(t *testing.T) {
	_, want := synth(t, full)
	app := newApp(nil)
	st, err := NewStack(app, "Sluice", variantProps(full))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(app.Synth(nil).GetStackByName(st.StackName()).Template())
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a second synth differs (-first +second):\n%s", diff)
	}
}

func TestBringYourOwnCreatesNoDataStores(t *testing.T) {
	for _, v := range []variant{byo, localstack} {
		_, js := synth(t, v)
		for _, prefix := range []string{"AWS::ElastiCache::*", "AWS::RDS::*"} {
			for _, r := range resources(js, prefix) {
				t.Errorf("%s: %s %s created, want no %s", v, r.Type, r.ID, prefix)
			}
		}
	}
	_, js := synth(t, localstack)
	for _, typ := range []string{"AWS::EC2::VPC", "AWS::EC2::VPCEndpoint"} {
		if rs := resources(js, typ); len(rs) > 0 {
			t.Errorf("localstack: %d %s, want none", len(rs), typ)
		}
	}
	// The secrets are the subject hash key and the rules signing key,
	// which every variant creates.
	for _, r := range resources(js, "AWS::SecretsManager::Secret") {
		if !strings.HasPrefix(r.ID, "SubjectHmacKey") && !strings.HasPrefix(r.ID, "RulesSigningKey") {
			t.Errorf("localstack: secret %s created, want only the subject hash key and the rules signing key", r.ID)
		}
	}
	for _, r := range sluiceFunctions(js) {
		if functionAccess[strings.TrimPrefix(fmt.Sprint(r.Props["Description"]), "Sluice ")].stats {
			continue // no database (TestContributorInsights)
		}
		env := envOf(r)
		if env["DATABASE_URL"] != variantProps(localstack).DatabaseURL {
			t.Errorf("localstack: %s DATABASE_URL = %v, want %s", r.ID, env["DATABASE_URL"], variantProps(localstack).DatabaseURL)
		}
	}
	// The BYO VPC and security group are used, none created.
	_, js = synth(t, byo)
	for _, typ := range []string{"AWS::EC2::VPC", "AWS::EC2::SecurityGroup"} {
		if rs := resources(js, typ); len(rs) > 0 {
			t.Errorf("byo: %d %s, want none", len(rs), typ)
		}
	}
	for _, r := range sluiceFunctions(js) {
		if functionAccess[strings.TrimPrefix(fmt.Sprint(r.Props["Description"]), "Sluice ")].stats {
			continue // outside the VPC (TestContributorInsights)
		}
		b, _ := json.Marshal(r.Props["VpcConfig"])
		if !strings.Contains(string(b), `"SecurityGroupIds":["sg-0123456789abcdef0"]`) {
			t.Errorf("byo: %s VpcConfig = %s, want the given security group", r.ID, b)
		}
	}
	// The BYO secrets are granted by ARN, read-only: the complete ARN as it
	// is, the partial one with the wildcard for Secrets Manager's suffix.
	grants := map[string]int{}
	for _, r := range resources(js, "AWS::IAM::Policy") {
		stmts, _ := r.Props["PolicyDocument"].(map[string]any)["Statement"].([]any)
		for _, st := range stmts {
			// One resource, or several (minimizePolicies merges statements).
			switch res := st.(map[string]any)["Resource"].(type) {
			case string:
				grants[res]++
			case []any:
				for _, r := range res {
					if s, ok := r.(string); ok {
						grants[s]++
					}
				}
			}
		}
	}
	redisARN, dbARN := variantProps(byo).RedisAuthSecretArn, variantProps(byo).DatabaseSecretArn
	for _, want := range []string{redisARN, dbARN + "-??????"} {
		if grants[want] == 0 {
			t.Errorf("byo: no policy grants %s; grants %v", want, grants)
		}
	}
	for _, bad := range []string{redisARN + "-??????", dbARN} {
		if grants[bad] > 0 {
			t.Errorf("byo: a policy grants %s, which matches no secret; grants %v", bad, grants)
		}
	}
}

// validateCase is props and what validate says of them.
type validateCase struct {
	name string
	p    StackProps
	want []string // substrings of the error; none = valid
}

// checkValidate runs validate on the props of each case.
func checkValidate(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate() = nil, want an error mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("validate() = %v, want %q in it", err, w)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	checkValidate(t, []validateCase{
		{"zero", StackProps{}, nil},
		{"localstack", *variantProps(localstack), nil},
		{"no vpc needs byo", StackProps{NoVpc: true}, []string{"RedisURL", "DatabaseURL or DatabaseSecretArn"}},
		{"two databases", StackProps{DatabaseURL: "postgres://x", DatabaseSecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db"}, []string{"exclusive"}},
		{"bad redis url", StackProps{RedisURL: "http://x"}, []string{"redis:// or rediss://"}},
		{"bad mode", StackProps{RedisMode: "replica"}, []string{"single, cluster or sentinel"}},
		{"partial secret arns", StackProps{
			VpcID:              "vpc-1",
			DatabaseSecretArn:  "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice/db",
			RedisURL:           "rediss://r:6379",
			RedisAuthSecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:redis-auth-AbCdEf",
		}, nil},
		{"secret names, not arns", StackProps{DatabaseSecretArn: "sluice/db", RedisAuthSecretArn: "arn:aws:s3:::bucket"},
			[]string{`DatabaseSecretArn "sluice/db": want a Secrets Manager secret ARN`, `RedisAuthSecretArn "arn:aws:s3:::bucket"`}},
	})
}

// TestNag runs cdk-nag's AwsSolutions pack over every variant and fails on
// any error it reports that the stack does not suppress with a reason
// (infra/nag.go). Warnings are logged.
func TestNag(t *testing.T) {
	for _, v := range allVariants() {
		for _, f := range nagFindings(t, v) {
			if f.Level == "error" {
				t.Errorf("%s: %s: %s", v, f.Path, f.Message)
			} else {
				t.Logf("%s: warning: %s: %s", v, f.Path, f.Message)
			}
		}
	}
}

// TestAPILogging: both APIs write access logs (one JSON line per request)
// and execution logs of errors, never request data (API keys), and their
// stages wait for the account's logging role, which outlives the stack.
func TestAPILogging(t *testing.T) {
	tmpl, js := synth(t, full)
	stages := resources(js, "AWS::ApiGateway::Stage")
	if len(stages) != 2 {
		t.Fatalf("stages = %d, want 2 (admin and demo)", len(stages))
	}
	account := logicalID(t, js, "AWS::ApiGateway::Account", "ApiGatewayAccount")
	logGroups := map[string]bool{}
	for _, r := range resources(js, "AWS::Logs::LogGroup") {
		logGroups[r.ID] = true
	}
	all, _ := js["Resources"].(map[string]any)
	for _, st := range stages {
		als, _ := st.Props["AccessLogSetting"].(map[string]any)
		if als["Format"] != accessLogFormat {
			t.Errorf("%s access log format = %v, want accessLogFormat", st.ID, als["Format"])
		}
		if dest := refs(als["DestinationArn"]); len(dest) != 1 || !logGroups[dest[0]] {
			t.Errorf("%s access log destination = %v, want a log group of the stack", st.ID, als["DestinationArn"])
		}
		want := []any{map[string]any{"HttpMethod": "*", "ResourcePath": "/*", "LoggingLevel": "ERROR", "DataTraceEnabled": false}}
		if strings.HasPrefix(st.ID, "DemoApi") {
			// A public URL that invokes the authorizer on every request.
			want[0].(map[string]any)["ThrottlingRateLimit"] = float64(demoRateLimit)
			want[0].(map[string]any)["ThrottlingBurstLimit"] = float64(demoBurstLimit)
		}
		if diff := cmp.Diff(want, st.Props["MethodSettings"]); diff != "" {
			t.Errorf("%s MethodSettings (-want +got):\n%s", st.ID, diff)
		}
		deps, _ := all[st.ID].(map[string]any)["DependsOn"].([]any)
		if !slices.Contains(deps, any(account)) {
			t.Errorf("%s DependsOn = %v, want %s in it", st.ID, deps, account)
		}
	}
	for _, id := range []string{account, logicalID(t, js, "AWS::IAM::Role", "ApiGatewayLogsRole")} {
		if got := all[id].(map[string]any)["DeletionPolicy"]; got != "Retain" {
			t.Errorf("%s DeletionPolicy = %v, want Retain (the setting serves every API of the account)", id, got)
		}
	}
	hasProps(t, tmpl, "log group retention", "AWS::Logs::LogGroup", &map[string]any{"RetentionInDays": 30})

	// Every value is quoted, so a line is JSON whatever API Gateway puts in.
	var line string
	for _, filler := range []string{"-", "", "arn:aws:iam::123456789012:user/alice"} {
		line = regexp.MustCompile(`\$context\.[A-Za-z.]+`).ReplaceAllString(accessLogFormat, filler)
		var m map[string]string
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("access log line %s is not a JSON object of strings: %v", line, err)
		}
	}
	for _, v := range []string{"$context.requestId", "$context.identity.userArn", "$context.status", "$context.error.responseType"} {
		if !strings.Contains(accessLogFormat, v) {
			t.Errorf("access log format lacks %s", v)
		}
	}
}

// TestFlowLog: the VPC created here logs rejected connections; a VPC you
// bring is yours to log.
func TestFlowLog(t *testing.T) {
	for _, tt := range []struct {
		v    variant
		want int
	}{{full, 1}, {byo, 0}, {localstack, 0}} {
		_, js := synth(t, tt.v)
		logs := resources(js, "AWS::EC2::FlowLog")
		if len(logs) != tt.want {
			t.Errorf("%s: flow logs = %d, want %d", tt.v, len(logs), tt.want)
			continue
		}
		for _, r := range logs {
			if r.Props["TrafficType"] != "REJECT" || r.Props["ResourceType"] != "VPC" || r.Props["LogDestinationType"] != "cloud-watch-logs" {
				t.Errorf("%s: flow log %s = %v, want REJECT traffic of the VPC to CloudWatch Logs", tt.v, r.ID, r.Props)
			}
		}
	}
}

// TestUpstreamAuthorizer: the serverless variant chains a team authorizer:
// UPSTREAM_AUTHORIZER is its ARN, and the authorizer's role may invoke it.
func TestUpstreamAuthorizer(t *testing.T) {
	_, js := synth(t, serverless)
	arn := variantProps(serverless).UpstreamAuthorizerArn
	authID := logicalID(t, js, "AWS::Lambda::Function", "AuthorizerFunction")
	for _, r := range sluiceFunctions(js) {
		if r.ID == authID && envOf(r)["UPSTREAM_AUTHORIZER"] != arn {
			t.Errorf("authorizer UPSTREAM_AUTHORIZER = %v, want %s", envOf(r)["UPSTREAM_AUTHORIZER"], arn)
		}
	}
	granted := false
	for _, r := range resources(js, "AWS::IAM::Policy") {
		b, _ := json.Marshal(r.Props["PolicyDocument"])
		granted = granted || strings.Contains(string(b), `"Action":"lambda:InvokeFunction"`) && strings.Contains(string(b), arn)
	}
	if !granted {
		t.Errorf("no policy grants lambda:InvokeFunction on %s", arn)
	}
}

// exampleLimits is examples/limits.yaml, the serverless variant's limits
// file.
var exampleLimits = func() string {
	b, err := os.ReadFile("../examples/limits.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// TestLimitsFile: a stack given a limits file carries it, byte for byte,
// as the migration's Limits property (what internal/app's
// TestHandleAppliesLimitsFile applies), so a change to the file is a
// change of the template that `cdk diff` shows and `cdk deploy` lands; a
// stack without one carries no such property (TestMigration). The file
// is read from -c limitsFile at synth, and one that does not validate is
// refused there, by the validator of `sluice lint`.
func TestLimitsFile(t *testing.T) {
	_, js := synth(t, serverless)
	ms := resources(js, "Custom::SluiceMigrate")
	if len(ms) != 1 || ms[0].Props["Limits"] != exampleLimits {
		t.Errorf("serverless: migration properties %v, want Limits = examples/limits.yaml", ms)
	}

	dir := t.TempDir()
	good, bad := filepath.Join(dir, "limits.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(exampleLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("version: 1\nset: platform\nrules:\n  - api: x\n    limit: lots\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, _, err := propsFromContext(newApp(map[string]any{"limitsFile": good}))
	if err != nil || p.Limits != exampleLimits || p.validate() != nil {
		t.Errorf("-c limitsFile=%s: props.Limits %d bytes, %v, validate %v; want the file, valid", good, len(p.Limits), err, p.validate())
	}
	if _, _, err := propsFromContext(newApp(map[string]any{"limitsFile": filepath.Join(dir, "missing.yaml")})); err == nil || !strings.Contains(err.Error(), "limitsFile") {
		t.Errorf("-c limitsFile=<missing> = %v, want an error naming limitsFile", err)
	}
	p, _, err = propsFromContext(newApp(map[string]any{"limitsFile": bad}))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.validate(); err == nil || !strings.Contains(err.Error(), "Limits") || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("validate(a bad limits file) = %v, want an error naming Limits and the file", err)
	}
}
