package main

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

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
	if p.Global != nil {
		if err := recordRegionSet(stack, p.Global); err != nil {
			return nil, fmt.Errorf("sluice stack %s: %w", id, err)
		}
	}

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
	rulesKey := newRulesSigningKey(stack)
	edgeSec := newEdgeSecrets(stack, p) // nil without the edge
	fnProps := func(name string, memory, reserved float64, env ...map[string]string) *sluice.FunctionProps {
		merged := maps.Clone(common)
		for _, m := range env {
			maps.Copy(merged, m)
		}
		// An optional setting left unset ("") stays out.
		maps.DeleteFunc(merged, func(_, v string) bool { return v == "" })
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
	// token and the subject hash key with redis, the database's owner
	// login with write, else its read-only login, the rules signing key
	// with sign.
	grant := func(fn awslambda.Function, a access) {
		if a.redis && rd.authSecret != nil {
			rd.authSecret.GrantRead(fn, nil)
		}
		if a.redis && !a.publish {
			subjectKey.GrantRead(fn, nil)
		}
		if a.sign {
			rulesKey.GrantRead(fn, nil)
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

	authEnv := map[string]string{"DEFAULT_LIMIT": p.DefaultLimit}
	decideEnv := map[string]string{}
	if p.small() {
		decideEnv["RULES_REFRESH"] = smallRulesRefresh
	}
	// The check API sends the same fields (NewAuthorizer sets the
	// authorizer's).
	checkEnv := map[string]string{"RATELIMIT_HEADERS": p.RateLimitHeaders}
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
		IdentitySources:  edgeSec.authorizerSources(p.SubjectSources),
		// Without the demo API, no API of this stack uses the REQUEST
		// authorizer (APIs elsewhere make their own from AuthorizerArn),
		// and one attached to no API cannot be synthesized.
		NoRequestAuthorizer: p.NoDemoAPI,
	})
	s.Functions["authorizer"] = s.Authorizer.Function
	grant(s.Authorizer.Function, functionAccess["authorizer"])
	edgeSec.grantDecider(s.Authorizer.Function, true)

	for _, name := range sluice.Functions {
		if name == "authorizer" || name == edgePublisher {
			continue // made above; with the edge, below
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
			fp = fnProps(name, p.FunctionMemory, 0, env, redisEnv)
			fp.Timeout = awscdk.Duration_Minutes(jsii.Number(5))
		case name == "check":
			fp = fnProps(name, p.FunctionMemory, 0, redisEnv, db.readerEnv, authEnv, checkEnv, decideEnv, ledgerFor(name))
		case a.stats:
			// GET /stats and POST /subjects/find read Contributor Insights
			// and nothing else (the latter hashes with the subject key):
			// no Redis, no database, so no VPC (which has no route to the
			// CloudWatch API).
			env := map[string]string{"INSIGHTS_RULE_PREFIX": insightsPrefix(stack)}
			if a.key {
				env["SUBJECT_HMAC_KEY_SECRET_ARN"] = *subjectKey.SecretArn()
			}
			fp = fnProps(name, p.FunctionMemory, p.AdminReservedConcurrency, env)
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
				fp = fnProps(name, p.FunctionMemory, p.AdminReservedConcurrency, redisEnv, dbEnv, authEnv, ledgerFor(name))
			} else {
				// Rules and plans read: the database's read-only login
				// alone, in the security group Redis does not admit.
				fp = fnProps(name, p.FunctionMemory, p.AdminReservedConcurrency, dbEnv)
				if vpc != nil {
					fp.SecurityGroups = net.dbOnly
				}
			}
			fp.Timeout = awscdk.Duration_Seconds(jsii.Number(adminTimeout))
		}
		if a.sign {
			fp.Environment["RULES_SIGNING_KEY_SECRET_ARN"] = *rulesKey.SecretArn()
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
		if a.redis && name != "migrate" {
			edgeSec.grantDecider(fn, false)
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

	migration := newMigration(stack, s.Functions["migrate"], db, p.Limits, rulesKey, net.needs...)
	// The deciders verify the rules snapshot with the key's public half,
	// which the migration computes: they are created (or switched to it)
	// after it has published a snapshot signed with that key.
	rulesPub := migration.GetAttString(jsii.String(rulesPublicKey))
	for _, fn := range []awslambda.Function{s.Authorizer.Function, s.Functions["check"]} {
		fn.AddEnvironment(jsii.String("RULES_PUBLIC_KEY"), rulesPub, nil)
	}
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
	if edgeSec != nil {
		env := maps.Clone(redisEnv)
		delete(env, "SUBJECT_HMAC_KEY_SECRET_ARN") // it moves hashed entries
		pub := newEdge(stack, p, edgeSec, s.DemoAPI, fnProps(edgePublisher, p.FunctionMemory, 0, env))
		grant(pub, functionAccess[edgePublisher])
		s.Functions[edgePublisher] = pub
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
	newOutputs(stack, s, net, rd, db, subjectKey, rulesPub, p.Global)
	return s, nil
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
