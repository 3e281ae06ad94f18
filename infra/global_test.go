package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
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
)

// globalRegions is the family the global tests synthesize.
var globalRegions = []string{"us-east-1", "us-east-2", "us-west-2"}

// globalSynth is the app `npx cdk synth -c globalRegions=…` builds, as the
// CLI's first pass runs it: cdk.json's context and the flags, no lookup
// answered, no account (the stacks' Regions are the flag's).
var globalSynth struct {
	once   sync.Once
	stacks []*Stack
	json   []map[string]any
	nag    []nagFinding
	err    error
}

func synthGlobal(t *testing.T) ([]*Stack, []map[string]any) {
	t.Helper()
	if testing.Short() {
		t.Skip("synthesizes three stacks through jsii (node): skipped with -short")
	}
	g := &globalSynth
	g.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				g.err = fmt.Errorf("synth panicked: %v", r)
			}
		}()
		ctx := maps.Clone(cdkContext)
		ctx["assetRoot"] = assetRoot
		ctx["globalRegions"] = strings.Join(globalRegions, ",")
		ctx["alarmEmail"] = "oncall@example.com"
		ctx["protectedApiNames"] = "shop"
		app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx})
		stacks, err := run(app)
		if err != nil {
			g.err = err
			return
		}
		g.stacks = stacks
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Reports: jsii.Bool(false)}), nil)
		rule := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
		for _, st := range stacks {
			tmpl := assertions.Template_FromStack(st.Stack, nil)
			var js map[string]any
			b, err := json.Marshal(tmpl.ToJSON())
			if err == nil {
				err = json.Unmarshal(b, &js)
			}
			if err != nil {
				g.err = err
				return
			}
			g.json = append(g.json, js)
			ann := assertions.Annotations_FromStack(st.Stack)
			//lint:ignore SA1019 the Go assertions API returns this type (as in synth)
			for level, msgs := range map[string]*[]*cxapi.SynthesisMessage{
				"error":   ann.FindError(jsii.String("*"), rule),
				"warning": ann.FindWarning(jsii.String("*"), rule),
			} {
				for _, m := range *msgs {
					//lint:ignore SA1019 as above
					g.nag = append(g.nag, nagFinding{Level: level, Path: *m.Id, Message: fmt.Sprint(m.Entry.Data)})
				}
			}
		}
	})
	if g.err != nil {
		t.Fatalf("synth -c globalRegions: %v", g.err)
	}
	return g.stacks, g.json
}

// TestGlobalStacks: one whole stack per Region, named for it, in its
// Region; the first creates the ledger, the others depend on it and
// reference nothing of it (no export, no import: CloudFormation has no
// cross-Region references), so `cdk deploy --all` deploys it first.
func TestGlobalStacks(t *testing.T) {
	stacks, tmpls := synthGlobal(t)
	var names []string
	for i, s := range stacks {
		names = append(names, *s.StackName())
		if got := *s.Region(); got != globalRegions[i] {
			t.Errorf("%s Region = %s, want %s", *s.StackName(), got, globalRegions[i])
		}
		var deps []string
		for _, d := range *s.Dependencies() {
			deps = append(deps, *d.StackName())
		}
		want := []string{"Sluice-us-east-1"}
		if i == 0 {
			want = nil
		}
		if !slices.Equal(deps, want) {
			t.Errorf("%s depends on %v, want %v", *s.StackName(), deps, want)
		}
		b, _ := json.Marshal(tmpls[i])
		if strings.Contains(string(b), "Fn::ImportValue") || strings.Contains(string(b), `"Export"`) {
			t.Errorf("%s imports or exports a value: a stack of another Region cannot use it", *s.StackName())
		}
		// Each Region is a whole deployment: its own VPC, Redis,
		// database, and a migration that applies the limits file there.
		for _, typ := range []string{"AWS::EC2::VPC", "AWS::ElastiCache::ReplicationGroup", "AWS::RDS::DBCluster", "Custom::SluiceMigrate"} {
			if n := len(resources(tmpls[i], typ)); n != 1 {
				t.Errorf("%s has %d %s, want 1", *s.StackName(), n, typ)
			}
		}
		// sluice verify reads it to require a global rule to move the ledger.
		// And these to check this Region's replica of the subject key.
		for k, want := range map[string]string{
			"LedgerTable": "Sluice-ledger", "SubjectKeyName": "Sluice-subject-key", "GlobalRegions": "us-east-1,us-east-2,us-west-2",
		} {
			if out, _ := tmpls[i]["Outputs"].(map[string]any)[k].(map[string]any); out["Value"] != want {
				t.Errorf("%s output %s = %v, want %s", *s.StackName(), k, out, want)
			}
		}
		tables := resources(tmpls[i], "AWS::DynamoDB::*")
		if (i == 0) != (len(tables) == 1) || len(tables) > 1 {
			t.Errorf("%s has %d DynamoDB tables, want 1 in the first Region's stack, 0 in the others", *s.StackName(), len(tables))
		}
	}
	if want := []string{"Sluice-us-east-1", "Sluice-us-east-2", "Sluice-us-west-2"}; !slices.Equal(names, want) {
		t.Errorf("stacks %v, want %v", names, want)
	}
}

// TestGlobalLedger: the ledger is an MRSC global table, on demand, keyed
// by pk (S) as internal/ledger writes it, a replica in each Region, no TTL
// (MRSC has none), retained and deletion-protected.
func TestGlobalLedger(t *testing.T) {
	_, tmpls := synthGlobal(t)
	rs, _ := tmpls[0]["Resources"].(map[string]any)
	var table map[string]any
	for _, r := range rs {
		if m := r.(map[string]any); m["Type"] == "AWS::DynamoDB::GlobalTable" {
			table = m
		}
	}
	if table == nil {
		t.Fatal("no AWS::DynamoDB::GlobalTable in the first Region's stack")
	}
	var replicas []any
	for _, r := range globalRegions {
		replicas = append(replicas, map[string]any{"Region": r, "DeletionProtectionEnabled": true})
	}
	want := map[string]any{
		"TableName":              "Sluice-ledger",
		"BillingMode":            "PAY_PER_REQUEST",
		"MultiRegionConsistency": "STRONG",
		"AttributeDefinitions":   []any{map[string]any{"AttributeName": "pk", "AttributeType": "S"}},
		"KeySchema":              []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
		"Replicas":               replicas,
	}
	if diff := cmp.Diff(want, table["Properties"]); diff != "" {
		t.Errorf("ledger properties (-want +got):\n%s", diff)
	}
	if table["DeletionPolicy"] != "Retain" || table["UpdateReplacePolicy"] != "Retain" {
		t.Errorf("ledger DeletionPolicy %v, UpdateReplacePolicy %v, want Retain", table["DeletionPolicy"], table["UpdateReplacePolicy"])
	}
}

// TestGlobalLedgerWitness: two replicas and a witness; -c ledgerDestroy
// deletes the table with the stack.
func TestGlobalLedgerWitness(t *testing.T) {
	if testing.Short() {
		t.Skip("jsii")
	}
	stack := awscdk.NewStack(newApp(nil), jsii.String("W"), &awscdk.StackProps{Env: &awscdk.Environment{Region: jsii.String("eu-west-1")}})
	sluice.NewLedger(stack, "Ledger", &sluice.LedgerProps{TableName: "W-ledger", Regions: []string{"eu-west-1", "eu-west-2"}, Witness: "eu-central-1", Destroy: true})
	tmpl := assertions.Template_FromStack(stack, nil)
	check(t, "witness", func() {
		tmpl.HasResource(jsii.String("AWS::DynamoDB::GlobalTable"), &map[string]any{
			"DeletionPolicy": assertions.Match_Absent(), // CloudFormation's default: Delete
			"Properties": map[string]any{
				"GlobalTableWitnesses": []any{map[string]any{"Region": "eu-central-1"}},
				"Replicas": []any{
					map[string]any{"Region": "eu-west-1", "DeletionProtectionEnabled": false},
					map[string]any{"Region": "eu-west-2", "DeletionProtectionEnabled": false},
				},
			},
		})
	})
}

// flat renders a template value as a string: Refs as ${Name}, Fn::Join
// joined, so an ARN built from pseudo parameters reads as one.
func flat(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if r, ok := v["Ref"]; ok {
			return "${" + fmt.Sprint(r) + "}"
		}
		if j, ok := v["Fn::Join"].([]any); ok {
			var parts []string
			for _, p := range list(j[1]) {
				parts = append(parts, flat(p))
			}
			return strings.Join(parts, fmt.Sprint(j[0]))
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// functionNames maps each Sluice function's logical id to its name
// (sluice.Functions), by its description.
func functionName(r resource) string {
	for _, name := range sluice.Functions {
		if r.ID == sluice.LogicalName(name) || strings.HasPrefix(r.ID, sluice.LogicalName(name)) {
			return name
		}
	}
	if strings.HasPrefix(r.ID, "Authorizer") {
		return "authorizer"
	}
	return r.ID
}

// TestGlobalAccess: exactly the functions that lease or read the ledger
// may, each on its own Region's replica and only with what its code calls
// (internal/ledger: Take and Give are UpdateItem, with a GetItem when a
// failed condition returns no item; Used is GetItem; Sweep, which a
// decision process runs once a Region an hour, is Scan and DeleteItem):
// the authorizer and check all four, the subject view (admin-subjects)
// GetItem. The same functions, and no other, get LEDGER_TABLE and
// GLOBAL_REGIONS.
func TestGlobalAccess(t *testing.T) {
	_, tmpls := synthGlobal(t)
	want := map[string][]string{
		"authorizer":     {"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Scan", "dynamodb:UpdateItem"},
		"check":          {"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Scan", "dynamodb:UpdateItem"},
		"admin-subjects": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
	}
	for i, js := range tmpls {
		region := globalRegions[i]
		// The stacks' Regions are known, so CDK writes their partition.
		arn := "arn:aws:dynamodb:" + region + ":${AWS::AccountId}:table/Sluice-ledger"
		roleOf := map[string]string{} // role logical id → function name
		for _, fn := range sluiceFunctions(js) {
			name := functionName(fn)
			if ga, ok := fn.Props["Role"].(map[string]any)["Fn::GetAtt"].([]any); ok {
				roleOf[fmt.Sprint(ga[0])] = name
			}
			env := envOf(fn)
			_, hasWant := want[name]
			wantEnv := map[string]any{}
			if hasWant {
				wantEnv = map[string]any{"LEDGER_TABLE": "Sluice-ledger", "GLOBAL_REGIONS": strings.Join(globalRegions, ",")}
			}
			gotEnv := map[string]any{}
			for _, k := range []string{"LEDGER_TABLE", "GLOBAL_REGIONS"} {
				if v, ok := env[k]; ok {
					gotEnv[k] = v
				}
			}
			if diff := cmp.Diff(wantEnv, gotEnv); diff != "" {
				t.Errorf("%s %s ledger environment (-want +got):\n%s", region, name, diff)
			}
		}
		got := map[string][]string{}
		for _, p := range resources(js, "AWS::IAM::Policy") {
			doc, _ := p.Props["PolicyDocument"].(map[string]any)
			for _, st := range list(doc["Statement"]) {
				s := st.(map[string]any)
				var actions []string
				for _, a := range append(list(s["Action"]), s["Action"]) {
					if a, ok := a.(string); ok && strings.HasPrefix(a, "dynamodb:") {
						actions = append(actions, a)
					}
				}
				if len(actions) == 0 {
					continue
				}
				if res := flat(s["Resource"]); res != arn {
					t.Errorf("%s %s: %v on %s, want on %s alone", region, p.ID, actions, res, arn)
				}
				for _, role := range list(p.Props["Roles"]) {
					name := roleOf[refID(role)]
					if name == "" {
						name = "role " + refID(role)
					}
					got[name] = append(got[name], actions...)
				}
			}
		}
		for k := range got {
			sort.Strings(got[k])
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s DynamoDB grants by function (-want +got):\n%s", region, diff)
		}
	}
}

// TestGlobalEndpoint: each Region's VPC has a DynamoDB gateway endpoint
// routed from the route tables of every subnet the functions run in, and
// the ledger needs no NAT (the stacks have none).
func TestGlobalEndpoint(t *testing.T) {
	_, tmpls := synthGlobal(t)
	for i, js := range tmpls {
		region := globalRegions[i]
		var gateways []resource
		for _, ep := range resources(js, "AWS::EC2::VPCEndpoint") {
			if ep.Props["VpcEndpointType"] == "Gateway" {
				gateways = append(gateways, ep)
			}
		}
		if len(gateways) != 1 || !strings.Contains(flat(gateways[0].Props["ServiceName"]), "dynamodb") {
			t.Errorf("%s gateway endpoints %v, want one, for DynamoDB", region, gateways)
			continue
		}
		if n := len(resources(js, "AWS::EC2::NatGateway")); n != 0 {
			t.Errorf("%s has %d NAT gateways, want none", region, n)
		}
		var routed []string
		for _, rt := range list(gateways[0].Props["RouteTableIds"]) {
			routed = append(routed, refID(rt))
		}
		tableOf := map[string]string{}
		for _, a := range resources(js, "AWS::EC2::SubnetRouteTableAssociation") {
			tableOf[refID(a.Props["SubnetId"])] = refID(a.Props["RouteTableId"])
		}
		need := map[string]bool{}
		for _, fn := range sluiceFunctions(js) {
			vc, _ := fn.Props["VpcConfig"].(map[string]any)
			for _, s := range list(vc["SubnetIds"]) {
				need[tableOf[refID(s)]] = true
			}
		}
		if len(need) == 0 {
			t.Errorf("%s: no function in a subnet", region)
		}
		for rt := range need {
			if !slices.Contains(routed, rt) {
				t.Errorf("%s: the gateway endpoint has no route in %s, a route table of the functions' subnets (routed: %v)", region, rt, routed)
			}
		}
	}
}

// TestGlobalSubjectKey: the subject hash key is one secret, made in the
// first Region and replicated by Secrets Manager to the others, whose
// functions read their Region's replica by name.
func TestGlobalSubjectKey(t *testing.T) {
	_, tmpls := synthGlobal(t)
	var keys []resource
	for _, s := range resources(tmpls[0], "AWS::SecretsManager::Secret") {
		if s.Props["Name"] == "Sluice-subject-key" {
			keys = append(keys, s)
		}
	}
	if len(keys) != 1 {
		t.Fatalf("first Region: %d secrets named Sluice-subject-key, want 1", len(keys))
	}
	wantReplicas := []any{map[string]any{"Region": "us-east-2"}, map[string]any{"Region": "us-west-2"}}
	if diff := cmp.Diff(wantReplicas, keys[0].Props["ReplicaRegions"]); diff != "" {
		t.Errorf("subject key ReplicaRegions (-want +got):\n%s", diff)
	}
	for i, js := range tmpls[1:] {
		region := globalRegions[i+1]
		for _, s := range resources(js, "AWS::SecretsManager::Secret") {
			if strings.Contains(s.ID, "SubjectHmacKey") {
				t.Errorf("%s creates its own subject key %s: its hashes would differ", region, s.ID)
			}
		}
		arn := "arn:aws:secretsmanager:" + region + ":${AWS::AccountId}:secret:Sluice-subject-key"
		for _, fn := range sluiceFunctions(js) {
			if v, ok := envOf(fn)["SUBJECT_HMAC_KEY_SECRET_ARN"]; ok && flat(v) != arn {
				t.Errorf("%s %s SUBJECT_HMAC_KEY_SECRET_ARN = %s, want %s", region, fn.ID, flat(v), arn)
			}
		}
		b, _ := json.Marshal(js)
		if !strings.Contains(string(b), `:secret:Sluice-subject-key-??????"`) {
			t.Errorf("%s: no read grant on the replica's complete ARN (%s-??????)", region, arn)
		}
	}
}

// TestGlobalLifetime: the ledger and the subject key live and die
// together (its hashes name the ledger's items): both retained by `cdk
// destroy --all`, with static names, so the next deploy adopts both
// (`cdk deploy --import-existing-resources` takes a resource with a
// static name and a Retain policy). Without the flag it fails on the
// key's name before creating ElastiCache or Aurora, which wait for it.
func TestGlobalLifetime(t *testing.T) {
	_, tmpls := synthGlobal(t)
	res, _ := tmpls[0]["Resources"].(map[string]any)
	var key string
	for _, want := range []struct{ typ, nameProp, name string }{
		{"AWS::DynamoDB::GlobalTable", "TableName", "Sluice-ledger"},
		{"AWS::SecretsManager::Secret", "Name", "Sluice-subject-key"},
	} {
		found := false
		for _, r := range resources(tmpls[0], want.typ) {
			if r.Props[want.nameProp] != want.name {
				continue
			}
			found = true
			m, _ := res[r.ID].(map[string]any)
			if m["DeletionPolicy"] != "Retain" {
				t.Errorf("%s %s DeletionPolicy = %v, want Retain: the two keep one lifetime", want.typ, want.name, m["DeletionPolicy"])
			}
			if want.typ == "AWS::SecretsManager::Secret" {
				key = r.ID
			}
		}
		if !found {
			t.Errorf("first Region: no %s with %s %q (a static name, for the import)", want.typ, want.nameProp, want.name)
		}
	}
	slow := 0
	for _, typ := range []string{"AWS::ElastiCache::*", "AWS::RDS::DBCluster"} {
		for _, r := range resources(tmpls[0], typ) {
			if r.Type == "AWS::ElastiCache::SubnetGroup" || r.Type == "AWS::ElastiCache::User" || r.Type == "AWS::ElastiCache::UserGroup" {
				continue
			}
			slow++
			if !slices.Contains(dependsOn(res[r.ID].(map[string]any)), key) {
				t.Errorf("%s (%s) does not wait for the subject key %s: a redeploy after destroy fails only after it", r.ID, r.Type, key)
			}
		}
	}
	if slow != 2 {
		t.Errorf("%d slow data stores in the first Region, want 2 (Redis, Aurora)", slow)
	}
}

// TestGlobalNag: every Region's stack is cdk-nag clean.
func TestGlobalNag(t *testing.T) {
	synthGlobal(t)
	for _, f := range globalSynth.nag {
		t.Errorf("%s %s: %s", f.Level, f.Path, f.Message)
	}
}

// TestGlobalRefused: -c globalRegions that cannot make an MRSC table, and
// flags that name one Region's resource, fail the synth, each saying why.
func TestGlobalRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("jsii")
	}
	for _, c := range []struct {
		ctx  map[string]any
		want string
	}{
		{map[string]any{"globalRegions": "us-east-1,us-east-2"}, "2 Regions, want 3"},
		{map[string]any{"globalRegions": "us-east-1,us-east-2,us-west-2,us-west-1"}, "4 Regions, want 3"},
		{map[string]any{"globalRegions": "us-east-1,us-east-2,us-west-2", "globalWitness": "us-west-1"}, "3 replicas, want 2"},
		{map[string]any{"globalRegions": "us-east-1,us-east-1,us-west-2"}, "us-east-1 twice"},
		{map[string]any{"globalRegions": "us-east-1,us-east-2", "globalWitness": "us-east-2"}, "us-east-2 twice"},
		{map[string]any{"globalRegions": "us-east-1,US-EAST-2,us-west-2"}, `"US-EAST-2" is not a Region name`},
		{map[string]any{"globalRegions": "us-east-1,us-east-2,eu-west-1"}, "mixes MRSC Region sets"},
		{map[string]any{"globalRegions": "us-east-1,us-east-2", "globalWitness": "ap-northeast-1"}, "mixes MRSC Region sets"},
		{map[string]any{"globalRegions": "us-east-1,us-east-2,sa-east-1"}, "sa-east-1 offers no multi-Region strong consistency"},
		{map[string]any{"globalRegions": "us-east-1,us-east-2,us-west-2", "vpcId": "vpc-0123456789abcdef0"}, "-c vpcId with -c globalRegions"},
		{map[string]any{"globalRegions": "us-east-1,us-east-2,us-west-2", "redisUrl": "rediss://r:6379"}, "-c redisUrl with -c globalRegions"},
		{map[string]any{"ledgerDestroy": "true"}, "ledgerDestroy applies with -c globalRegions only"},
		{map[string]any{"globalRegionSet": "sa-east-1,us-east-1,us-east-2"}, "globalRegionSet applies with -c globalRegions only"},
	} {
		_, _, err := propsFromContext(newApp(c.ctx))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("propsFromContext(%v) = %v, want an error with %q", c.ctx, err, c.want)
		}
	}
	// A Region set AWS adds later, named by the flag, is taken.
	ctx := map[string]any{"globalRegions": "us-east-1,us-east-2,sa-east-1", "globalRegionSet": "us-east-1,us-east-2,sa-east-1"}
	if _, _, err := propsFromContext(newApp(ctx)); err != nil {
		t.Errorf("propsFromContext(%v) = %v, want the declared set taken", ctx, err)
	}
}

// TestGlobalFirstPass runs the built app as the CDK CLI does (context in
// CDK_CONTEXT_JSON, the CLI's account and Region in the environment, no
// lookup answered): it exits 0, its assembly lists the three stacks in
// their Regions with the first as the others' dependency (the order
// `cdk deploy --all` follows), and the schema check finds nothing but
// the placeholders of lookups the CLI then does.
func TestGlobalFirstPass(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the app (~30 s)")
	}
	bin := filepath.Join(t.TempDir(), "infra")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./infra: %v\n%s", err, out)
	}
	ctx := maps.Clone(cdkContext)
	ctx["assetRoot"] = assetRoot
	ctx["globalRegions"] = strings.Join(globalRegions, ",")
	js, _ := json.Marshal(ctx)
	out := t.TempDir()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CDK_CONTEXT_JSON="+string(js), "CDK_OUTDIR="+out,
		"CDK_DEFAULT_ACCOUNT="+byoAccount, "CDK_DEFAULT_REGION="+byoRegion)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("app exited %v, want 0:\n%.3000s", err, b)
	}
	var m struct {
		Artifacts map[string]struct {
			Type         string
			Environment  string
			Dependencies []string
		}
		Missing []struct{ Key, Provider string }
	}
	b, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range globalRegions {
		a, ok := m.Artifacts["Sluice-"+r]
		if !ok || a.Type != "aws:cloudformation:stack" {
			t.Errorf("assembly has no stack Sluice-%s", r)
			continue
		}
		if want := "aws://" + byoAccount + "/" + r; a.Environment != want {
			t.Errorf("Sluice-%s environment %s, want %s", r, a.Environment, want)
		}
		if i > 0 && !slices.Contains(a.Dependencies, "Sluice-us-east-1") {
			t.Errorf("Sluice-%s dependencies %v, want Sluice-us-east-1 among them", r, a.Dependencies)
		}
		if i == 0 && slices.ContainsFunc(a.Dependencies, func(d string) bool { return strings.HasPrefix(d, "Sluice-") && !strings.HasSuffix(d, ".assets") }) {
			t.Errorf("Sluice-%s dependencies %v, want no other Region's stack", r, a.Dependencies)
		}
	}
	for _, mi := range m.Missing {
		if mi.Provider != "availability-zones" && mi.Provider != "ssm" {
			t.Errorf("first pass: missing context %s (%s), want only the availability zones and recorded Region sets the CLI looks up", mi.Key, mi.Provider)
		}
	}
	var r struct {
		PluginReports []struct{ Violations []violation }
	}
	if rb, err := os.ReadFile(filepath.Join(out, "validation-report.json")); err == nil {
		if err := json.Unmarshal(rb, &r); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range r.PluginReports {
		for _, v := range p.Violations {
			if !strings.HasPrefix(v.RuleName, "Annotation::") {
				t.Errorf("first pass: finding %s (%s) %q", v.RuleName, v.Severity, v.Description)
			}
		}
	}
}
