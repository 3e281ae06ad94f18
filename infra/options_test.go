package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// TestFeatureFlags: cdk.json sets every feature flag the aws-cdk-lib of
// go.mod recommends, to the recommended value, so the stack is
// synthesized as a new CDK app is (an unset flag keeps a behaviour kept
// only for old apps: @aws-cdk/aws-rds:databaseProxyUniqueResourceName
// unset names every stack's proxy "Proxy"). Upgrading aws-cdk-go brings
// new flags: this test names them.
func TestFeatureFlags(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/aws/aws-cdk-go/awscdk/v2").Output()
	if err != nil {
		t.Fatalf("go list -m aws-cdk-go: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go list -m aws-cdk-go: %s (%v)", out, err)
	}
	tgzs, _ := filepath.Glob(filepath.Join(mod.Dir, "jsii", "aws-cdk-lib-*.tgz"))
	if len(tgzs) != 1 {
		t.Fatalf("aws-cdk-lib tarballs in %s: %v, want one", mod.Dir, tgzs)
	}
	recommended := readTarJSON(t, tgzs[0], "package/recommended-feature-flags.json")
	if len(recommended) < 50 {
		t.Fatalf("recommended-feature-flags.json has %d flags; the tarball's layout changed?", len(recommended))
	}
	for flag, want := range recommended {
		got, ok := cdkContext[flag]
		switch {
		case !ok:
			t.Errorf("cdk.json does not set %s (recommended: %v)", flag, want)
		case !cmp.Equal(got, want):
			t.Errorf("cdk.json sets %s = %v, recommended %v", flag, got, want)
		}
	}
}

func readTarJSON(t *testing.T, tgz, name string) map[string]any {
	t.Helper()
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no %s", tgz, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			var m map[string]any
			if err := json.NewDecoder(tr).Decode(&m); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return m
		}
	}
}

// TestProxyName: the RDS Proxy is named after the stack, so a second stack
// in the account and region (staging beside prod) can be created; it was
// "Proxy" for every stack.
func TestProxyName(t *testing.T) {
	_, js := synth(t, full)
	proxies := resources(js, "AWS::RDS::DBProxy")
	if len(proxies) != 1 || proxies[0].Props["DBProxyName"] != "sluice-db-proxy" {
		t.Errorf("DBProxy = %v, want one named sluice-db-proxy (from the stack name)", proxies)
	}
	app := awscdk.NewApp(nil)
	names := map[string]string{}
	for _, stack := range []string{"Sluice-Staging", "Sluice-Prod", "Edge--X-"} {
		names[stack] = proxyName(awscdk.NewStack(app, jsii.String(stack), nil))
	}
	if names["Sluice-Staging"] == names["Sluice-Prod"] {
		t.Errorf("two stacks share the proxy name %q", names["Sluice-Prod"])
	}
	for stack, n := range names {
		if len(n) > 60 || n[0] < 'a' || n[0] > 'z' || strings.Contains(n, "--") || strings.HasSuffix(n, "-") {
			t.Errorf("proxyName(%s) = %q: want at most 60 letters, digits and single hyphens, starting with a letter", stack, n)
		}
	}
}

// TestOptionsRefused: the options that would deploy and not work are
// refused at synth, with what to add.
func TestOptionsRefused(t *testing.T) {
	const secret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice/db"
	tests := []struct {
		name string
		p    StackProps
		want []string
	}{
		// The new VPC is isolated: an existing Redis is unreachable from
		// it, every decision fails open, silently.
		{"redisUrl without vpcId", StackProps{RedisURL: "rediss://r.example:6379"}, []string{"RedisURL (redisUrl) needs VpcID", "-c vpcId="}},
		// ... and the migration times out on an existing database.
		{"databaseSecretArn without vpcId", StackProps{DatabaseSecretArn: secret}, []string{"needs VpcID", "migration would time out"}},
		{"databaseUrl without vpcId", StackProps{DatabaseURL: "postgres://db.example/sluice"}, []string{"needs VpcID"}},
		// jwt:sub without an issuer: the authorizer exits at init.
		{"jwt source without issuer", StackProps{SubjectSources: "jwt:sub"}, []string{"JWTIssuer and JWTAudience", "-c jwtIssuer="}},
		{"jwt source without audience", StackProps{SubjectSources: "header:x,jwt:sub", JWTIssuer: cognitoIssuer, NatGateways: 1}, []string{"JWTAudience"}},
		// An issuer, but the isolated VPC has no route to the JWKS.
		{"jwt without a route", StackProps{SubjectSources: "jwt:sub", JWTIssuer: cognitoIssuer, JWTAudience: "app"},
			[]string{"natGateways=1", cognitoIssuer + "/.well-known/jwks.json", "33 USD a month"}},
		{"issuer not https", StackProps{JWTIssuer: "http://idp.example", JWTAudience: "a", NatGateways: 1}, []string{`JWTIssuer "http://idp.example": want an https:// URL`}},
		{"nat with a vpc of one's own", StackProps{VpcID: "vpc-1", NatGateways: 1}, []string{"NatGateways (natGateways) applies to the VPC the stack creates"}},
		{"three nat gateways", StackProps{NatGateways: 3}, []string{"NatGateways 3"}},
		{"vpcEndpoints without a vpc", StackProps{VpcEndpoints: "create"}, []string{"applies to Vpc or VpcID only"}},
		{"vpcEndpoints unknown", StackProps{VpcID: "vpc-1", VpcEndpoints: "some"}, []string{`VpcEndpoints "some"`}},
		{"alarm topic not an arn", StackProps{AlarmTopicArn: "alarms"}, []string{`AlarmTopicArn "alarms"`}},
		{"backup retention", StackProps{DatabaseBackupRetentionDays: 40}, []string{"DatabaseBackupRetentionDays 40"}},
		{"memory", StackProps{AuthorizerMemory: 64}, []string{"AuthorizerMemory 64"}},
	}
	for _, tt := range tests {
		err := tt.p.validate()
		if err == nil {
			t.Errorf("%s: validate() = nil, want an error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: validate() = %v, want %q in it", tt.name, err, w)
			}
		}
	}
	for _, ok := range []StackProps{
		*variantProps(jwt), *variantProps(byo), *variantProps(byoIsolated), *variantProps(lean), *variantProps(localstack),
	} {
		if err := ok.validate(); err != nil {
			t.Errorf("validate(%+v) = %v, want nil", ok, err)
		}
	}
}

// TestIsolatedVpcNeedsEndpoints: a VPC brought along whose subnets have no
// NAT route is refused unless vpcEndpoints says how the Lambdas reach
// Secrets Manager and Lambda; and with a JWT issuer, refused outright.
func TestIsolatedVpcNeedsEndpoints(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*StackProps)
		want string
	}{
		{"no vpcEndpoints", func(p *StackProps) { p.VpcEndpoints = "" }, "pass -c vpcEndpoints=create"},
		{"jwt", func(p *StackProps) {
			p.SubjectSources, p.JWTIssuer, p.JWTAudience = "jwt:sub", cognitoIssuer, "app"
		}, "give a VPC whose private subnets have a NAT route"},
	} {
		p := variantProps(byoIsolated)
		tt.edit(p)
		_, err := NewStack(newApp(variantContext(byoIsolated)), "Sluice", p)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewStack error = %v, want %q in it", tt.name, err, tt.want)
		}
	}
}

// TestFunctionsStart: every function's environment, as synthesized, is
// one its configuration accepts (config.FromEnv, what each main calls
// first): a missing JWT_ISSUER or a malformed value would fail every cold
// start with a 500. Values CloudFormation fills in are given plausible
// stand-ins.
func TestFunctionsStart(t *testing.T) {
	for _, v := range allVariants() {
		_, js := synth(t, v)
		for _, fn := range sluiceFunctions(js) {
			env := map[string]string{}
			for k, val := range envOf(fn) {
				s, literal := val.(string)
				switch {
				case literal:
				case strings.HasSuffix(k, "_ARN") || k == "UPSTREAM_AUTHORIZER":
					s = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x-AbCdEf"
				case k == "REDIS_URL":
					s = "rediss://redis.example:6379"
				case k == "INSIGHTS_RULE_PREFIX":
					s = "Sluice-sluice"
				default:
					s = "host.example"
				}
				env[k] = s
			}
			if _, err := config.FromEnv(func(k string) string { return env[k] }); err != nil {
				t.Errorf("%s: %s would not start: %v", v, fn.ID, err)
			}
		}
	}
}

// TestContextFlags: every flag reaches its StackProps field.
func TestContextFlags(t *testing.T) {
	ctx := map[string]any{
		"stackName": "Edge", "vpcId": "vpc-1", "securityGroupIds": "sg-1, sg-2", "vpcEndpoints": "existing",
		"redisUrl": "rediss://r:6379", "redisMode": "cluster", "redisNodeType": "cache.r7g.large", "redisEngine": "redis",
		"databaseSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db", "databaseDeletionProtection": "true",
		"databaseBackupRetentionDays": "14", "subjectSources": "jwt:sub", "jwtIssuer": cognitoIssuer, "jwtAudience": "a,b",
		"jwtTokenUse": "access", "jwtJwksUrl": cognitoIssuer + "/keys", "authorizerMemory": "1024",
		"authorizerReservedConcurrency": "100", "functionMemory": "512", "adminReservedConcurrency": "2", "logLevel": "debug",
		"alarmEmail": "a@example.com", "alarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:t", "authorizerP99Millis": "80",
		"protectedApiNames": "shop,billing", "demoApi": "false", "apiGatewayAccount": "false", "natGateways": "1",
	}
	p, name, err := propsFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &ctx}))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %s %v %s %s %s %s %s %v %d %s %s %s %s %s %v %v %v %v %s %s %s %v %v %v %v %d",
		name, p.VpcID, p.SecurityGroupIDs, p.VpcEndpoints, p.RedisURL, p.RedisMode, p.RedisNodeType, p.RedisEngine,
		p.DatabaseDeletionProtection, p.DatabaseBackupRetentionDays, p.SubjectSources, p.JWTIssuer, p.JWTAudience, p.JWTTokenUse,
		p.JWTJWKSURL, p.AuthorizerMemory, p.AuthorizerReservedConcurrency, p.FunctionMemory, p.AdminReservedConcurrency,
		p.LogLevel, p.AlarmEmail, p.AlarmTopicArn, p.AuthorizerP99Millis, p.ProtectedAPINames, p.NoDemoAPI, p.NoAPIGatewayAccount, p.NatGateways)
	want := "Edge vpc-1 [sg-1 sg-2] existing rediss://r:6379 cluster cache.r7g.large redis true 14 jwt:sub " + cognitoIssuer +
		" a,b access " + cognitoIssuer + "/keys 1024 100 512 2 debug a@example.com arn:aws:sns:eu-west-1:123456789012:t 80 [shop billing] true true 1"
	if got != want {
		t.Errorf("props from context:\n got %s\nwant %s", got, want)
	}
	bad := map[string]any{"authorizerMemory": "lots", "demoApi": "no"}
	if _, _, err := propsFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &bad})); err == nil ||
		!strings.Contains(err.Error(), "-c authorizerMemory=lots: want a number") || !strings.Contains(err.Error(), "-c demoApi=no: want true or false") {
		t.Errorf("propsFromContext(bad) error = %v, want both flags named", err)
	}
}

// TestDeployDocFlags: docs/deploy.md's flag table has a row for every
// context flag the app reads, and none it does not.
func TestDeployDocFlags(t *testing.T) {
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		for _, f := range strings.Split(cell, ",") {
			f = strings.Trim(strings.TrimSpace(f), "`")
			f, _, _ = strings.Cut(f, "=")
			if f != "" && !strings.ContainsAny(f, " ./") {
				documented = append(documented, f)
			}
		}
	}
	for _, f := range contextFlags {
		if !slices.Contains(documented, f) {
			t.Errorf("docs/deploy.md has no row for -c %s", f)
		}
	}
	for _, f := range documented {
		if !slices.Contains(contextFlags, f) && f[0] >= 'a' && f[0] <= 'z' && !strings.ContainsAny(f, "()") {
			t.Errorf("docs/deploy.md documents -c %s, which the app does not read", f)
		}
	}
}

// TestSharedDeployment is the quickstart's case: a function of another app
// shares the reference deployment through its outputs (sluice.ReadOutputs,
// sluice.ImportDeployment). It must run in the deployment's subnets and
// groups, reach its Redis, proxy and Secrets Manager, and hash subjects
// with its key, so that its buckets are the ones the admin API shows. The
// quickstart's function was outside any VPC with an ElastiCache URL: the
// walk finds that unreachable.
func TestSharedDeployment(t *testing.T) {
	_, js := synth(t, full)
	outputs, _ := js["Outputs"].(map[string]any)
	// What `cdk deploy --outputs-file` would write, with made-up values
	// for what CloudFormation fills in.
	values := map[string]string{
		sluice.OutputVpcID: "vpc-0abc0000000000001", sluice.OutputAvailabilityZones: "eu-west-1a,eu-west-1b",
		sluice.OutputSubnetIDs: "subnet-0abc00000000001,subnet-0abc00000000002", sluice.OutputSecurityGroupIDs: "sg-0abc000000000001",
		sluice.OutputRedisURL: "rediss://master.sluice-redis.abc123.euw1.cache.amazonaws.com:6379", sluice.OutputRedisMode: "single",
		sluice.OutputRedisAuthSecretArn:  "arn:aws:secretsmanager:eu-west-1:123456789012:secret:RedisAuthToken-AbCdEf",
		sluice.OutputSubjectKeySecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:SubjectHmacKey-AbCdEf",
		sluice.OutputDatabaseSecretArn:   "arn:aws:secretsmanager:eu-west-1:123456789012:secret:DbSecret-AbCdEf",
		sluice.OutputDatabaseHost:        "sluice-db-proxy.proxy-abc123.eu-west-1.rds.amazonaws.com",
	}
	file := map[string]map[string]string{"Sluice": {}}
	for k, v := range values {
		if _, ok := outputs[k]; !ok {
			t.Errorf("the reference stack has no output %s", k)
		}
		file["Sluice"][k] = v
	}
	path := filepath.Join(t.TempDir(), "sluice.json")
	b, _ := json.Marshal(file)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	attrs, err := sluice.ReadOutputs(path, "Sluice")
	if err != nil {
		t.Fatal(err)
	}

	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Shop"), nil)
	api := awsapigateway.NewRestApi(stack, jsii.String("ShopApi"), nil)
	shared := sluice.ImportDeployment(stack, "Sluice", attrs)
	limiter := sluice.NewAuthorizer(stack, "RateLimit", &sluice.AuthorizerProps{
		FunctionProps:  sluice.FunctionProps{AssetDir: filepath.Join(assetRoot, "authorizer")},
		SubjectSources: "header:x-api-key",
		Deployment:     shared,
	})
	// The quickstart as it was: no VPC, the ElastiCache URL.
	outsider := sluice.NewAuthorizer(stack, "Outside", &sluice.AuthorizerProps{
		FunctionProps: sluice.FunctionProps{AssetDir: filepath.Join(assetRoot, "authorizer"), Environment: map[string]string{
			"REDIS_URL": values[sluice.OutputRedisURL], "DB_SECRET_ARN": values[sluice.OutputDatabaseSecretArn]}},
	})
	limiter.AddGatewayResponses(stack, "RateLimit", api)
	api.Root().AddMethod(jsii.String("GET"), awsapigateway.NewMockIntegration(nil), limiter.MethodOptions())
	api.Root().AddResource(jsii.String("outside"), nil).AddMethod(jsii.String("GET"), awsapigateway.NewMockIntegration(nil), outsider.MethodOptions())
	b, _ = json.Marshal(app.Synth(nil).GetStackByName(jsii.String("Shop")).Template())
	var shop map[string]any
	if err := json.Unmarshal(b, &shop); err != nil {
		t.Fatal(err)
	}
	facts := netFacts{
		// The reference VPC: isolated subnets with a Secrets Manager
		// endpoint; Redis and the proxy admit the functions' group.
		endpoints: map[string]bool{"secretsmanager": true},
		groups:    map[string]bool{"sg-0abc000000000001": true},
		vpcHosts: map[string]bool{"master.sluice-redis.abc123.euw1.cache.amazonaws.com": true,
			"sluice-db-proxy.proxy-abc123.eu-west-1.rds.amazonaws.com": true},
	}
	var inside, outside []string
	for _, p := range unreachable(shop, facts) {
		if strings.HasPrefix(p, "Outside") {
			outside = append(outside, p)
		} else {
			inside = append(inside, p)
		}
	}
	for _, p := range inside {
		t.Errorf("shared deployment: %s", p)
	}
	if len(outside) == 0 {
		t.Error("the walk finds the authorizer outside any VPC able to reach ElastiCache; want it unreachable")
	}
	var env map[string]any
	for _, fn := range resources(shop, "AWS::Lambda::Function") {
		if strings.HasPrefix(fn.ID, "RateLimit") {
			env = envOf(fn)
			b, _ := json.Marshal(fn.Props["VpcConfig"])
			if !strings.Contains(string(b), "subnet-0abc00000000001") || !strings.Contains(string(b), "sg-0abc000000000001") {
				t.Errorf("VpcConfig = %s, want the deployment's subnets and group", b)
			}
		}
	}
	for k, out := range map[string]string{
		"SUBJECT_HMAC_KEY_SECRET_ARN": sluice.OutputSubjectKeySecretArn, "REDIS_URL": sluice.OutputRedisURL,
		"REDIS_AUTH_SECRET_ARN": sluice.OutputRedisAuthSecretArn, "DB_HOST": sluice.OutputDatabaseHost,
		"DB_SECRET_ARN": sluice.OutputDatabaseSecretArn,
	} {
		if env[k] != values[out] {
			t.Errorf("authorizer %s = %v, want %s (output %s)", k, env[k], values[out], out)
		}
	}
	granted := map[string]bool{}
	for _, r := range resources(shop, "AWS::IAM::Policy") {
		b, _ := json.Marshal(r.Props["PolicyDocument"])
		for _, k := range []string{sluice.OutputSubjectKeySecretArn, sluice.OutputRedisAuthSecretArn, sluice.OutputDatabaseSecretArn} {
			if strings.Contains(string(b), values[k]) {
				granted[k] = true
			}
		}
	}
	if len(granted) != 3 {
		t.Errorf("the authorizer may read %v, want the three secrets", granted)
	}
}
