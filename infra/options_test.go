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
	"github.com/google/go-cmp/cmp/cmpopts"

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
	checkValidate(t, []validateCase{
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
	})
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
	for _, v := range append(allVariants(), edged) {
		_, js := synth(t, v)
		for _, fn := range sluiceFunctions(js) {
			env := map[string]string{}
			for k, val := range envOf(fn) {
				s, literal := val.(string)
				switch {
				case literal:
				case k == "EDGE_STORE_ARN":
					s = "arn:aws:cloudfront::123456789012:key-value-store/0123abcd-0123-abcd-0123-0123456789ab"
				case strings.HasSuffix(k, "_ARN") || k == "UPSTREAM_AUTHORIZER":
					s = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x-AbCdEf"
				case k == "REDIS_URL":
					s = "rediss://redis.example:6379"
				case k == "INSIGHTS_RULE_PREFIX":
					s = "Sluice-sluice"
				case k == "RULES_PUBLIC_KEY":
					s = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=" // the migration's RulesPublicKey
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
		"executionLogGroups": "false", "edge": "cloudfront",
	}
	p, name, err := propsFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &ctx}))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %s %v %s %s %s %s %s %v %d %s %s %s %s %s %v %v %v %v %s %s %s %v %v %v %v %d %v %s",
		name, p.VpcID, p.SecurityGroupIDs, p.VpcEndpoints, p.RedisURL, p.RedisMode, p.RedisNodeType, p.RedisEngine,
		p.DatabaseDeletionProtection, p.DatabaseBackupRetentionDays, p.SubjectSources, p.JWTIssuer, p.JWTAudience, p.JWTTokenUse,
		p.JWTJWKSURL, p.AuthorizerMemory, p.AuthorizerReservedConcurrency, p.FunctionMemory, p.AdminReservedConcurrency,
		p.LogLevel, p.AlarmEmail, p.AlarmTopicArn, p.AuthorizerP99Millis, p.ProtectedAPINames, p.NoDemoAPI, p.NoAPIGatewayAccount, p.NatGateways,
		p.NoExecutionLogGroups, p.Edge)
	want := "Edge vpc-1 [sg-1 sg-2] existing rediss://r:6379 cluster cache.r7g.large redis true 14 jwt:sub " + cognitoIssuer +
		" a,b access " + cognitoIssuer + "/keys 1024 100 512 2 debug a@example.com arn:aws:sns:eu-west-1:123456789012:t 80 [shop billing] true true 1 true cloudfront"
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

// TestAlarmsNotify: every alarm of every variant notifies the topic, in
// ALARM and back to OK: an alarm without an action pages nobody. The
// fail-closed and breaker alarms exist, and the 5XX alarms cover the APIs
// the authorizer protects: the demo API and those named.
func TestAlarmsNotify(t *testing.T) {
	for _, v := range allVariants() {
		_, js := synth(t, v)
		topic := map[string]any{"Ref": logicalIDOr(js, "AWS::SNS::Topic", "AlarmTopic")}
		if v == lean {
			topic = nil
		}
		metrics := map[string]int{}
		var apiNames []string
		for _, r := range resources(js, "AWS::CloudWatch::Alarm") {
			for _, key := range []string{"AlarmActions", "OKActions"} {
				acts := list(r.Props[key])
				want := any(topic)
				if v == lean {
					want = variantProps(lean).AlarmTopicArn
				}
				if len(acts) != 1 || !cmp.Equal(acts[0], want) {
					t.Errorf("%s: alarm %s %s = %v, want [%v]", v, r.ID, key, acts, want)
				}
			}
			b, _ := json.Marshal(r.Props)
			for _, m := range []string{"FailOpen", "FailClosed", "BreakerOpen", "5XXError", "Throttles", "Duration"} {
				if strings.Contains(string(b), `"MetricName":"`+m+`"`) {
					metrics[m]++
				}
			}
			if r.Props["MetricName"] == "5XXError" {
				for _, d := range list(r.Props["Dimensions"]) {
					apiNames = append(apiNames, fmt.Sprint(d.(map[string]any)["Value"]))
				}
			}
		}
		want5xx := 1
		if v == lean {
			want5xx = len(variantProps(lean).ProtectedAPINames)
			if diff := cmp.Diff(variantProps(lean).ProtectedAPINames, apiNames, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("lean: 5XX alarms' APIs (-want +got):\n%s", diff)
			}
		}
		for m, n := range map[string]int{"FailOpen": 1, "FailClosed": 1, "BreakerOpen": 1, "5XXError": want5xx, "Throttles": 1, "Duration": 1} {
			if metrics[m] != n {
				t.Errorf("%s: alarms on %s = %d, want %d", v, m, metrics[m], n)
			}
		}
	}
	_, js := synth(t, jwt)
	subs := resources(js, "AWS::SNS::Subscription")
	if len(subs) != 1 || subs[0].Props["Protocol"] != "email" || subs[0].Props["Endpoint"] != variantProps(jwt).AlarmEmail {
		t.Errorf("jwt: subscriptions = %v, want the alarm e-mail", subs)
	}
	_, js = synth(t, full)
	for _, r := range resources(js, "AWS::SNS::Topic") {
		b, _ := json.Marshal(resources(js, "AWS::SNS::TopicPolicy"))
		if !strings.Contains(string(b), `"aws:SecureTransport":"false"`) {
			t.Errorf("topic %s: no policy denies requests without TLS", r.ID)
		}
	}
}

// logicalIDOr returns the id of the one resource of typ whose id starts
// with prefix, or "".
func logicalIDOr(js map[string]any, typ, prefix string) string {
	for _, r := range resources(js, typ) {
		if strings.HasPrefix(r.ID, prefix) {
			return r.ID
		}
	}
	return ""
}

// TestPlatformDefaults: what a platform team expects of the stack by
// default, and its switches.
func TestPlatformDefaults(t *testing.T) {
	_, js := synth(t, full)
	// Security Hub EC2.2: the VPC's default group has no rules.
	if len(resources(js, "Custom::VpcRestrictDefaultSG")) != 1 {
		t.Error("full: the VPC's default security group is not restricted")
	}
	if rgs := resources(js, "AWS::ElastiCache::ReplicationGroup"); len(rgs) != 1 || rgs[0].Props["CacheNodeType"] != defaultRedisNodeType ||
		strings.Contains(defaultRedisNodeType, ".t") {
		t.Errorf("full: replication group %v, want %s (not burstable)", rgs, defaultRedisNodeType)
	}
	clusters := resources(js, "AWS::RDS::DBCluster")
	if len(clusters) != 1 || clusters[0].Props["BackupRetentionPeriod"] != 7.0 || clusters[0].Props["DeletionProtection"] != false {
		t.Errorf("full: cluster backup retention, deletion protection = %v, %v; want 7, false",
			clusters[0].Props["BackupRetentionPeriod"], clusters[0].Props["DeletionProtection"])
	}
	if len(resources(js, "AWS::ApiGateway::Account")) != 1 {
		t.Error("full: no API Gateway account logging role")
	}

	_, js = synth(t, lean)
	for typ, want := range map[string]int{"AWS::ApiGateway::Account": 0, "AWS::ApiGateway::RestApi": 1, "AWS::SNS::Topic": 0} {
		if n := len(resources(js, typ)); n != want {
			t.Errorf("lean: %d %s, want %d", n, typ, want)
		}
	}
	clusters = resources(js, "AWS::RDS::DBCluster")
	if len(clusters) != 1 || clusters[0].Props["BackupRetentionPeriod"] != 14.0 || clusters[0].Props["DeletionProtection"] != true {
		t.Errorf("lean: cluster = %v, want backup retention 14 and deletion protection", clusters)
	}
	if rgs := resources(js, "AWS::ElastiCache::ReplicationGroup"); len(rgs) != 1 || rgs[0].Props["CacheNodeType"] != "cache.r7g.large" {
		t.Errorf("lean: replication group %v, want cache.r7g.large", rgs)
	}
}

// TestExecutionLogs: API Gateway's execution log group of each stage
// (API-Gateway-Execution-Logs_<api id>/<stage>) is the stack's through a
// Custom::LogRetention, kept a month and deleted with it, before the stage;
// LogRetention's function logs to a group of the stack with a retention,
// created before it, as does the provider framework's.
func TestExecutionLogs(t *testing.T) {
	for _, v := range []variant{full, lean} {
		_, js := synth(t, v)
		all, _ := js["Resources"].(map[string]any)
		stages := resources(js, "AWS::ApiGateway::Stage")
		groups := map[string]string{} // rest api id → log group id
		for _, lg := range resources(js, "Custom::LogRetention") {
			b, _ := json.Marshal(lg.Props["LogGroupName"])
			if !strings.Contains(string(b), "API-Gateway-Execution-Logs_") {
				continue
			}
			if !strings.Contains(string(b), `"/","`+stageName+`"`) && !strings.Contains(string(b), `"/`+stageName) {
				t.Errorf("%s: %s LogGroupName = %s, want the %s stage's", v, lg.ID, b, stageName)
			}
			if lg.Props["RetentionInDays"] != 30.0 || lg.Props["RemovalPolicy"] != "destroy" {
				t.Errorf("%s: %s retention, removal = %v, %v; want 30 days, destroy", v, lg.ID, lg.Props["RetentionInDays"], lg.Props["RemovalPolicy"])
			}
			for _, id := range refs(lg.Props["LogGroupName"]) {
				groups[id] = lg.ID
			}
		}
		for _, st := range stages {
			api := refID(st.Props["RestApiId"])
			lg, ok := groups[api]
			deps, _ := all[st.ID].(map[string]any)["DependsOn"].([]any)
			if !ok || !slices.Contains(deps, any(lg)) {
				t.Errorf("%s: stage %s of %s: execution log group %q, DependsOn %v; want the group, before the stage", v, st.ID, api, lg, deps)
			}
		}
		if len(groups) != len(stages) {
			t.Errorf("%s: %d execution log groups for %d stages", v, len(groups), len(stages))
		}
		var provider, retention bool
		for _, fn := range resources(js, "AWS::Lambda::Function") {
			if envOf(fn)["USER_ON_EVENT_FUNCTION_ARN"] != nil {
				lc, _ := fn.Props["LoggingConfig"].(map[string]any)
				id := refs(lc["LogGroup"])
				provider = len(id) == 1 && all[id[0]].(map[string]any)["Properties"].(map[string]any)["RetentionInDays"] == 30.0
			}
			if name, _ := fn.Props["FunctionName"].(string); strings.HasPrefix(fn.ID, logRetentionFunctionID) {
				deps, _ := all[fn.ID].(map[string]any)["DependsOn"].([]any)
				for _, lg := range resources(js, "AWS::Logs::LogGroup") {
					if lg.Props["LogGroupName"] == "/aws/lambda/"+name && lg.Props["RetentionInDays"] == 1.0 &&
						all[lg.ID].(map[string]any)["DeletionPolicy"] == "Delete" && slices.Contains(deps, any(lg.ID)) {
						retention = true
					}
				}
			}
		}
		if !provider {
			t.Errorf("%s: the provider framework's function logs to no log group of the stack with a retention", v)
		}
		if !retention {
			t.Errorf("%s: LogRetention's function logs to no log group of the stack, kept a day, created before it", v)
		}
	}
}

// TestTemplateLint: cdk.json's @aws-cdk/core:validateAgainstDefaultRules
// checks each synthesized template against the CloudFormation resource
// schemas that ship with aws-cdk-lib, and fails the synth on a finding:
// every variant above passed it. Here a property the schema does not have
// must fail, or the lint is off.
func TestTemplateLint(t *testing.T) {
	if cdkContext["@aws-cdk/core:validateAgainstDefaultRules"] != true {
		t.Fatal("cdk.json does not set @aws-cdk/core:validateAgainstDefaultRules: templates are not checked")
	}
	app := newApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Lint"), nil)
	awscdk.NewCfnResource(stack, jsii.String("Topic"), &awscdk.CfnResourceProps{
		Type:       jsii.String("AWS::SNS::Topic"),
		Properties: &map[string]any{"DisplayName": "x", "Colour": "blue"},
	})
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		app.Synth(nil)
		return nil
	}()
	if err == nil || !strings.Contains(err.Error(), "ValidationFailed") {
		t.Fatalf("synth of an AWS::SNS::Topic with a Colour = %v, want the lint's ValidationFailed", err)
	}
	// The report names the finding.
	_, path, _ := strings.Cut(err.Error(), "can be found in: ")
	report, rerr := os.ReadFile(strings.TrimSpace(path))
	if rerr != nil || !strings.Contains(string(report), "'Colour' was unexpected") {
		t.Errorf("validation report %s: %v; want the Colour property named in:\n%s", path, rerr, report)
	}
}
