// Package sluice is the CDK construct library for Sluice: import it into your
// own CDK Go app to put the Sluice rate limiter in front of any API Gateway
// REST API.
//
// It provides the authorizer Lambda with an API Gateway REQUEST authorizer
// ([NewAuthorizer]), the gateway responses that turn its Deny into a 429 with
// Retry-After and RateLimit headers ([AddGatewayResponses]), and the Lambda
// defaults every Sluice function shares ([NewFunction]). Each function is
// compiled during the synth from the sluice version the app's go.mod
// requires ([Build]: the Go toolchain, no Docker, no Sluice checkout), unless
// FunctionProps.AssetDir names a prebuilt one. The reference stack in infra/
// wires these to ElastiCache, Aurora and the admin API.
package sluice

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/denial"
	"github.com/sluicehq/sluice/internal/envvar"
	"github.com/sluicehq/sluice/internal/headers"
)

// DefaultAssetRoot is where `make build` writes the linux/arm64 Lambda
// binaries, one directory per function holding a `bootstrap` file.
const DefaultAssetRoot = "build/arm64"

// FunctionProps configures one Sluice Lambda function.
type FunctionProps struct {
	// Name is the function's directory under functions/, e.g. "authorizer".
	// Required.
	Name string
	// AssetDir is a directory holding a prebuilt linux/arm64 `bootstrap`
	// of the function, such as `make build` output
	// (AssetDir(DefaultAssetRoot, Name)). Default: empty, the function is
	// compiled from the sluice module version the CDK app's go.mod requires
	// (see [Build]).
	AssetDir string
	// Environment is the function's environment (see the env contract:
	// REDIS_URL, DB_SECRET_ARN, ...). Default: none.
	Environment map[string]string
	// MemorySize in MiB. Default: 256.
	MemorySize float64
	// ReservedConcurrency reserves (and caps) concurrent executions.
	// Default 0: unreserved.
	ReservedConcurrency float64
	// Timeout of one invocation. Default: 10 seconds.
	Timeout awscdk.Duration
	// Vpc places the function in these subnets. Default: not in a VPC.
	Vpc awsec2.IVpc
	// VpcSubnets selects the subnets. Default: CDK's choice, the VPC's
	// private subnets with egress, else its isolated ones.
	VpcSubnets *awsec2.SubnetSelection
	// SecurityGroups of the function in the VPC. Default: one created by CDK.
	SecurityGroups []awsec2.ISecurityGroup
	// LogRetention of the function's log group. Default: one month.
	LogRetention awslogs.RetentionDays
	// SystemLogLevel, when set ("WARN"), turns on Lambda's advanced
	// logging controls: JSON log format, Lambda's own lines at this level
	// and above ("WARN" drops the START, END and REPORT lines of every
	// invocation, about 300 bytes of log ingestion each), and every line
	// the function writes kept (application level TRACE: LOG_LEVEL
	// decides). The function's lines are JSON already and pass as written,
	// so its Embedded Metric Format lines still become metrics. Default:
	// empty, Text format with every platform line.
	SystemLogLevel string
}

// NewFunction creates a Sluice Lambda: the `bootstrap` binary of
// FunctionProps.AssetDir, or else the one [Build] compiles, on
// provided.al2023, arm64 (Graviton: cheaper per ms and what `make build`
// targets), with its own log group so the retention is set without the
// log-retention custom resource and its broad IAM policy. Like CDK's own
// constructs it panics on a configuration it cannot synthesize, here a
// failed build: call Build first to handle that error yourself.
func NewFunction(scope constructs.Construct, id string, p *FunctionProps) awslambda.Function {
	if p == nil || p.Name == "" {
		panic("sluice.NewFunction: FunctionProps.Name is required")
	}
	dir := p.AssetDir
	if dir == "" {
		var err error
		if dir, err = Build(p.Name); err != nil {
			panic(err)
		}
	}
	logs := awslogs.NewLogGroup(scope, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     cmp.Or(p.LogRetention, awslogs.RetentionDays_ONE_MONTH),
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	env := make(map[string]*string, len(p.Environment))
	for k, v := range p.Environment {
		env[k] = jsii.String(v)
	}
	props := &awslambda.FunctionProps{
		Description:  jsii.String("Sluice " + p.Name),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(dir), nil),
		MemorySize:   jsii.Number(cmp.Or(p.MemorySize, 256)),
		Timeout:      cmp.Or(p.Timeout, awscdk.Duration_Seconds(jsii.Number(10))),
		Environment:  &env,
		// The log format stays Text unless SystemLogLevel is set: the
		// functions already write JSON lines (slog) and Embedded Metric
		// Format lines, which reach the log stream as written either way.
		LogGroup: logs,
	}
	if p.ReservedConcurrency > 0 {
		props.ReservedConcurrentExecutions = jsii.Number(p.ReservedConcurrency)
	}
	if p.SystemLogLevel != "" {
		props.LoggingFormat = awslambda.LoggingFormat_JSON
		props.SystemLogLevelV2 = awslambda.SystemLogLevel(strings.ToUpper(p.SystemLogLevel))
		props.ApplicationLogLevelV2 = awslambda.ApplicationLogLevel_TRACE
	}
	if p.Vpc != nil {
		props.Vpc = p.Vpc
		props.VpcSubnets = p.VpcSubnets
		if len(p.SecurityGroups) > 0 {
			sgs := append([]awsec2.ISecurityGroup(nil), p.SecurityGroups...)
			props.SecurityGroups = &sgs
		}
	}
	return awslambda.NewFunction(scope, jsii.String(id), props)
}

// NewSubjectKey creates the Secrets Manager secret of the subject hash key
// (SUBJECT_HMAC_KEY_SECRET_ARN): 64 random letters and digits, generated
// by Secrets Manager, never in the template. Give its ARN and a read grant
// to every function that hashes subjects (authorizer, check, admin).
func NewSubjectKey(scope constructs.Construct, id string) awssecretsmanager.Secret {
	return awssecretsmanager.NewSecret(scope, jsii.String(id), randomKey(subjectKeyDescription))
}

const subjectKeyDescription = "Sluice subject hash key (HMAC-SHA256): keeps subjects unrecoverable from logs and principalIds"

// randomKey are the props of a key's secret: 64 random letters and
// digits, generated by Secrets Manager, never in the template.
func randomKey(description string) *awssecretsmanager.SecretProps {
	return &awssecretsmanager.SecretProps{
		Description: jsii.String(description),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength:     jsii.Number(64),
			ExcludePunctuation: jsii.Bool(true),
		},
	}
}

// AuthorizerProps configures the Sluice authorizer.
type AuthorizerProps struct {
	FunctionProps
	// SubjectSources is the authorizer's SUBJECT_SOURCES: where it reads the
	// subject, in order, e.g. "header:x-api-key,query:api_key,apikey,ip".
	// Default: empty, the authorizer's own default.
	SubjectSources string
	// Upstream is the API's existing Lambda authorizer, which Sluice invokes
	// first with the same event (UPSTREAM_AUTHORIZER): its Deny and
	// Unauthorized are a 401 (the UNAUTHORIZED gateway response, never the
	// 429 of ACCESS_DENIED), its Allow names the caller (SUBJECT_SOURCES
	// principal or context:<key>). The construct sets the variable to the
	// function's ARN and grants the invoke. Its answers are cached only
	// with UPSTREAM_IDENTITY_SOURCES in FunctionProps.Environment. Default:
	// none.
	Upstream awslambda.IFunction
	// SubjectKey is the subject hash key's secret (NewSubjectKey): its ARN
	// becomes SUBJECT_HMAC_KEY_SECRET_ARN and the function may read it.
	// Default: none (unkeyed hashes, warned at start).
	SubjectKey awssecretsmanager.ISecret
	// IdentitySources are API Gateway identity sources, e.g.
	// awsapigateway.IdentitySource_Header("x-api-key"). API Gateway answers 401
	// without calling the authorizer when one of them is missing from the
	// request. Default: derived from SubjectSources — the single header or
	// query source when that is the only source; none otherwise (so that the
	// "apikey" and "ip" fallbacks still reach the authorizer).
	IdentitySources []*string
	// JWT configures the verification of bearer tokens, which the jwt:<claim>
	// subject sources require (JWT_ISSUER, JWT_AUDIENCE, JWT_TOKEN_USE,
	// JWT_JWKS_URL). The function must reach the JWKS URL over HTTPS: in a
	// VPC, through a NAT gateway. Default: none; with a jwt: source and no
	// JWT_ISSUER or JWT_AUDIENCE in Environment, NewAuthorizer panics, as
	// the authorizer would fail at every cold start.
	JWT *JWT
	// Deployment is a Sluice deployment to share (ImportDeployment): the
	// function runs in its VPC, subnets and security groups (unless
	// FunctionProps.Vpc is set), gets its Redis, database and subject hash
	// key settings (Environment's own values win), and may read its
	// secrets. Default: none.
	Deployment *Deployment
	// NoRequestAuthorizer creates the function alone, for APIs of other
	// apps that make their REQUEST authorizer from its ARN: a REQUEST
	// authorizer attached to no API of this app cannot be synthesized.
	// [Authorizer.ForAPI] still makes one. Default: false, Authorizer is
	// created.
	NoRequestAuthorizer bool
	// RateLimitHeaders chooses the rate-limit fields of the 429, a
	// comma-separated list of dialects: "draft11" (RateLimit-Policy and
	// RateLimit, the current IETF draft's syntax), "draft6"
	// (RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset) and "legacy"
	// (X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset as a
	// Unix time). It is the authorizer's RATELIMIT_HEADERS, and
	// [Authorizer.AddGatewayResponses] maps the same fields. Retry-After
	// is always sent. Default: empty, "draft11". An unknown dialect panics
	// (naming it) when the authorizer is created.
	RateLimitHeaders string
}

// JWT configures the verification of bearer tokens (see the authorizer's
// JWT_* settings).
type JWT struct {
	// Issuer is JWT_ISSUER, the tokens' "iss", such as
	// https://cognito-idp.<region>.amazonaws.com/<user pool id>. Required.
	Issuer string
	// Audience is JWT_AUDIENCE: a token's "aud" (or a Cognito access
	// token's "client_id") must be one of them. Required.
	Audience []string
	// TokenUse is JWT_TOKEN_USE: the "token_use" a token must carry
	// (Cognito: id or access). Default: any.
	TokenUse string
	// JWKSURL is JWT_JWKS_URL. Default: <Issuer>/.well-known/jwks.json.
	JWKSURL string
}

// environment returns the JWT_* variables of j.
func (j *JWT) environment() map[string]string {
	env := map[string]string{"JWT_ISSUER": j.Issuer, "JWT_AUDIENCE": strings.Join(j.Audience, ",")}
	if j.TokenUse != "" {
		env["JWT_TOKEN_USE"] = j.TokenUse
	}
	if j.JWKSURL != "" {
		env["JWT_JWKS_URL"] = j.JWKSURL
	}
	return env
}

// HasJWTSource reports whether a SUBJECT_SOURCES value names a jwt:<claim>
// source, which needs JWT_ISSUER and JWT_AUDIENCE.
func HasJWTSource(subjectSources string) bool {
	for _, s := range strings.Split(subjectSources, ",") {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(s)), "jwt:") {
			return true
		}
	}
	return false
}

// Authorizer is the Sluice authorizer function with its API Gateway REQUEST
// authorizer.
type Authorizer struct {
	// Function is the authorizer Lambda.
	Function awslambda.Function
	// Authorizer is the REQUEST authorizer to set on methods
	// (AuthorizationType CUSTOM). API Gateway binds an authorizer to one
	// RestApi: for another API use [Authorizer.ForAPI]. Nil with
	// AuthorizerProps.NoRequestAuthorizer.
	Authorizer awsapigateway.RequestAuthorizer

	scope           constructs.Construct
	identitySources []*string
	headers         headers.Dialects
	apis            []awsapigateway.IRestApi // given to AddGatewayResponses: what NewAlarms watches
	jsonLogs        bool                     // Lambda writes the function's log in JSON (SystemLogLevel set)
}

// NewAuthorizer creates the authorizer Lambda and its REQUEST authorizer.
// FunctionProps.Name defaults to "authorizer".
func NewAuthorizer(scope constructs.Construct, id string, p *AuthorizerProps) *Authorizer {
	if p == nil {
		p = &AuthorizerProps{}
	}
	fp := p.FunctionProps
	fp.Name = cmp.Or(fp.Name, "authorizer")
	if p.Deployment != nil {
		p.Deployment.Apply(&fp)
	}
	dialects, err := headers.Parse(p.RateLimitHeaders)
	if err != nil {
		panic(fmt.Sprintf("sluice.NewAuthorizer %s: RateLimitHeaders: %v", id, err))
	}
	env := map[string]string{}
	maps.Copy(env, fp.Environment)
	if p.SubjectSources != "" {
		env["SUBJECT_SOURCES"] = p.SubjectSources
	}
	if p.RateLimitHeaders != "" {
		env["RATELIMIT_HEADERS"] = dialects.String()
	}
	if p.Upstream != nil {
		env["UPSTREAM_AUTHORIZER"] = *p.Upstream.FunctionArn()
	}
	if p.SubjectKey != nil {
		env["SUBJECT_HMAC_KEY_SECRET_ARN"] = *p.SubjectKey.SecretArn()
	}
	if p.JWT != nil {
		if p.JWT.Issuer == "" || len(p.JWT.Audience) == 0 {
			panic(fmt.Sprintf("sluice.NewAuthorizer %s: JWT needs Issuer and Audience (the authorizer refuses tokens it cannot check both of)", id))
		}
		maps.Copy(env, p.JWT.environment())
	}
	if HasJWTSource(p.SubjectSources) && (env["JWT_ISSUER"] == "" || env["JWT_AUDIENCE"] == "") {
		panic(fmt.Sprintf("sluice.NewAuthorizer %s: SubjectSources %q reads a verified token: set JWT (Issuer and Audience), "+
			"or the authorizer fails at every cold start with JWT_ISSUER or JWT_AUDIENCE required", id, p.SubjectSources))
	}
	fp.Environment = env
	construct := constructs.NewConstruct(scope, jsii.String(id))
	a := &Authorizer{
		Function:        NewFunction(construct, "Function", &fp),
		scope:           construct,
		identitySources: p.IdentitySources,
		headers:         dialects,
		jsonLogs:        fp.SystemLogLevel != "",
	}
	if p.Upstream != nil {
		// On the authorizer's role, not the upstream's resource policy: an
		// imported function (another stack, the usual case) cannot take a
		// resource policy from this stack. Exactly the ARN invoked (an
		// alias ARN names the alias), no wildcard.
		a.Function.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("lambda:InvokeFunction"),
			Resources: jsii.Strings(*p.Upstream.FunctionArn()),
		}))
	}
	if p.SubjectKey != nil {
		p.SubjectKey.GrantRead(a.Function, nil)
	}
	if p.Deployment != nil {
		p.Deployment.GrantRead(a.Function)
	}
	if a.identitySources == nil {
		a.identitySources = IdentitySources(p.SubjectSources)
	}
	if !p.NoRequestAuthorizer {
		a.Authorizer = a.newRequestAuthorizer(construct, "Authorizer")
	}
	return a
}

// ForAPI returns a further REQUEST authorizer backed by the same function,
// for one more RestApi (an authorizer belongs to exactly one RestApi). id must
// be unique among the calls.
func (a *Authorizer) ForAPI(id string) awsapigateway.RequestAuthorizer {
	return a.newRequestAuthorizer(a.scope, id)
}

// MethodOptions returns the options that put the authorizer on a method:
// api.Root().AddMethod("GET", integration, a.MethodOptions()).
func (a *Authorizer) MethodOptions() *awsapigateway.MethodOptions {
	return &awsapigateway.MethodOptions{
		AuthorizationType: awsapigateway.AuthorizationType_CUSTOM,
		Authorizer:        a.Authorizer,
	}
}

func (a *Authorizer) newRequestAuthorizer(scope constructs.Construct, id string) awsapigateway.RequestAuthorizer {
	ids := append([]*string{}, a.identitySources...)
	auth := awsapigateway.NewRequestAuthorizer(scope, jsii.String(id), &awsapigateway.RequestAuthorizerProps{
		Handler: a.Function,
		// The result cache must stay off: a cached Allow would let the same
		// caller through for the whole TTL without ever reaching the limiter,
		// so no token would be spent and no limit enforced.
		ResultsCacheTtl: awscdk.Duration_Seconds(jsii.Number(0)),
		IdentitySources: &ids,
	})
	if len(ids) == 0 {
		// CDK writes IdentitySource: "" for none; leave the property out
		// instead, the documented form of "no identity source" (optional when
		// caching is off).
		auth.Node().DefaultChild().(awscdk.CfnResource).AddPropertyDeletionOverride(jsii.String("IdentitySource"))
	}
	return auth
}

// IdentitySources derives API Gateway identity sources from a SUBJECT_SOURCES
// value: only when the subject comes from exactly one header or query
// parameter is that source required of every request; otherwise none, since
// API Gateway would reject a request lacking any listed source before the
// authorizer could fall back to the next one.
func IdentitySources(subjectSources string) []*string {
	parts := envvar.List(subjectSources)
	if len(parts) != 1 {
		return []*string{}
	}
	kind, name, ok := strings.Cut(parts[0], ":")
	if !ok || name == "" {
		return []*string{}
	}
	switch strings.ToLower(kind) {
	case "header":
		return []*string{awsapigateway.IdentitySource_Header(jsii.String(name))}
	case "query":
		return []*string{awsapigateway.IdentitySource_QueryString(jsii.String(name))}
	}
	return []*string{}
}

// ResponseHeaders maps the 429 response headers of the dialects named in
// rateLimitHeaders (AuthorizerProps.RateLimitHeaders syntax; "" is draft11)
// to the authorizer context keys they are read from, Retry-After included.
func ResponseHeaders(rateLimitHeaders string) (map[string]string, error) {
	d, err := headers.Parse(rateLimitHeaders)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for h, p := range denial.TooManyRequests(d).Parameters() {
		if key, ok := strings.CutPrefix(p, "context.authorizer."); ok {
			m[h] = key
		}
	}
	return m, nil
}

// AllowedResponseParameters put the rate-limit fields of the authorizer's
// RateLimitHeaders on an allowed request's response, for a method with a
// non-proxy integration (MOCK, AWS, HTTP): integration goes in the
// IntegrationResponse's ResponseParameters (method.response.header.<field>
// from context.authorizer.<key>, a documented mapping source: "Parameter
// mapping source reference for REST APIs", API Gateway Developer Guide),
// method in the MethodResponse's, which must declare every mapped header.
// API Gateway adds none to a 200 by itself, and cannot map a proxy
// integration's response: there the backend writes them from the context
// it receives. A field whose key the authorizer left out (no rule
// applied) is not sent.
func (a *Authorizer) AllowedResponseParameters() (integration map[string]*string, method map[string]*bool) {
	integration, method = map[string]*string{}, map[string]*bool{}
	for _, f := range a.headers.Fields() {
		integration["method.response.header."+f.Name] = jsii.String("context.authorizer." + f.Key)
		method["method.response.header."+f.Name] = jsii.Bool(false)
	}
	return integration, method
}

// AddGatewayResponses installs Sluice's gateway responses on api (one created
// in this app or imported with RestApi_FromRestApiAttributes), with the
// fields of the authorizer's RateLimitHeaders. See the package function for
// what they do.
func (a *Authorizer) AddGatewayResponses(scope constructs.Construct, id string, api awsapigateway.IRestApi) {
	a.apis = append(a.apis, api)
	addGatewayResponses(scope, id, api, a.headers)
}

// AddGatewayResponses installs Sluice's gateway responses on api (one created
// in this app or imported with RestApi_FromRestApiAttributes), for an
// authorizer with the default RateLimitHeaders (draft11; for another, use
// [Authorizer.AddGatewayResponses]):
//
//   - ACCESS_DENIED, what API Gateway sends when the authorizer returns Deny,
//     becomes 429 Too Many Requests with Retry-After, RateLimit-Policy and
//     RateLimit headers and a JSON body carrying the same values;
//   - UNAUTHORIZED (no subject found, or an upstream authorizer that did
//     not allow) stays a 401 with a JSON body and no Retry-After: a client
//     never reads an authorization failure as a rate limit.
//
// Install them only on APIs whose ACCESS_DENIED comes from Sluice: an IAM or
// resource-policy denial on the same API would also become a 429. The ids
// are derived from id, which must be unique in scope.
func AddGatewayResponses(scope constructs.Construct, id string, api awsapigateway.IRestApi) {
	addGatewayResponses(scope, id, api, headers.Default)
}

func addGatewayResponses(scope constructs.Construct, id string, api awsapigateway.IRestApi, d headers.Dialects) {
	// Response headers from the authorizer context. Using
	// $context.authorizer.<key> in a gateway response BODY template is
	// documented ("Gateway response" / "Variables for data transformations",
	// https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-gatewayResponse-definition.html
	// and https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-mapping-template-reference.html).
	// Mapping a HEADER from context.authorizer.<key> is not: the documented
	// sources for gatewayresponse.header.* are method.request.*,
	// stageVariables.* and static '...' values
	// (https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-swagger-extensions-gateway-responses.gatewayResponse.html).
	// API Gateway accepts and applies context.authorizer.* there in practice;
	// the body keeps the values available should that ever change.
	for _, r := range []struct {
		id   string
		typ  awsapigateway.ResponseType
		resp denial.Response
	}{
		{"TooManyRequests", awsapigateway.ResponseType_ACCESS_DENIED(), denial.TooManyRequests(d)},
		{"Unauthorized", awsapigateway.ResponseType_UNAUTHORIZED(), denial.Unauthorized()},
	} {
		params := map[string]*string{}
		for h, v := range r.resp.Parameters() {
			params[h] = jsii.String(v)
		}
		awsapigateway.NewGatewayResponse(scope, jsii.String(id+r.id), &awsapigateway.GatewayResponseProps{
			RestApi:         api,
			Type:            r.typ,
			StatusCode:      jsii.String(strconv.Itoa(r.resp.Status)),
			ResponseHeaders: &params,
			Templates:       &map[string]*string{"application/json": jsii.String(r.resp.Template())},
		})
	}
}

// AssetDir returns the asset directory of function name under root
// (DefaultAssetRoot when root is empty).
func AssetDir(root, name string) string {
	return filepath.Join(cmp.Or(root, DefaultAssetRoot), name)
}

// Functions lists every Sluice Lambda, as `make build` names them (its
// directory under functions/): the authorizer, check, migrate, and then the
// admin functions (one per privilege class), each once, in the order
// admin.Routes first names them, and the CDN edge's publisher (a stack
// deploys it only with the edge: docs/edge.md).
var Functions = func() []string {
	names := []string{"authorizer", "check", "migrate"}
	for _, r := range admin.Routes() {
		if !slices.Contains(names, r.Function) {
			names = append(names, r.Function)
		}
	}
	return append(names, "edge-publisher")
}()

// LogicalName turns a function name into a CDK id: "admin-read" →
// "AdminRead".
func LogicalName(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "-") {
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}
