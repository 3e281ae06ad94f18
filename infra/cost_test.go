package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// The cost model: prices.json holds the prices (each with its unit, source
// and date); this file reads it, prices every variant's synthesized
// template from the resources it finds, and checks the small profile
// against its targets.
// The model table of docs/cost.md (<!-- model:begin --> ... end) is what
// it computes: go test ./infra -run TestCostModel -update-cost rewrites it.

var updateCost = flag.Bool("update-cost", false, "rewrite docs/cost.md's model table from the synthesized templates")

const costDoc = "../docs/cost.md"

// The small profile's targets (issue 26).
const (
	smallIdleTarget    = 20.0 // USD a month with no traffic
	smallPerMillTarget = 0.25 // USD per million decisions
)

// hoursPerMonth is AWS's billing month: 730 hours.
const hoursPerMonth = 730

// priceFile is the price list: one entry per key, in USD per unit, each
// with its source and the date it was recalled, measured or assumed.
const priceFile = "prices.json"

// prices are the entries of priceFile, by key.
type prices map[string]float64

// readPrices reads priceFile.
func readPrices(t *testing.T) prices {
	t.Helper()
	raw, err := os.ReadFile(priceFile)
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Key, Unit, Source, Date string
		USD                     *float64
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatalf("%s: %v", priceFile, err)
	}
	p := prices{}
	for _, r := range rows {
		if r.USD == nil || r.Unit == "" || r.Source == "" || r.Date == "" {
			t.Errorf("%s price %q has no usd, unit, source or date", priceFile, r.Key)
		}
		if _, dup := p[r.Key]; dup {
			t.Errorf("%s price %s twice", priceFile, r.Key)
		}
		if r.USD != nil {
			p[r.Key] = *r.USD
		}
	}
	if len(p) == 0 {
		t.Fatalf("%s has no prices", priceFile)
	}
	return p
}

// between returns the text between <!-- name:begin --> and <!-- name:end -->.
func between(t *testing.T, doc []byte, name string) string {
	t.Helper()
	begin, end := []byte("<!-- "+name+":begin -->"), []byte("<!-- "+name+":end -->")
	i, j := bytes.Index(doc, begin), bytes.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/cost.md has no %s … %s", begin, end)
	}
	return string(doc[i+len(begin) : j])
}

// price returns the price of key, recording a missing one.
func (p prices) price(key string, missing map[string]bool) float64 {
	v, ok := p[key]
	if !ok {
		missing[key] = true
	}
	return v
}

// costLine is one priced resource.
type costLine struct {
	what string
	usd  float64 // a month at idle
}

// estimate is a variant's cost from its template.
type estimate struct {
	idle    []costLine
	perMill []costLine // USD per million decisions (authorizer invocations)
	// busy is what a month adds while traffic flows every hour, whatever
	// its volume: the decision functions' EMF custom metrics.
	busy []costLine
	// ecpu is ElastiCache Serverless's USD per million decisions (0 with
	// nodes): what a decision costs Redis wherever it is made.
	ecpu    float64
	missing map[string]bool
}

func (e *estimate) idleTotal() float64    { return sum(e.idle) }
func (e *estimate) perMillTotal() float64 { return sum(e.perMill) }
func (e *estimate) busyTotal() float64    { return sum(e.busy) }

// ecpuPerDecision maps the Redis CPU of a decision to ElastiCache
// Serverless ECPUs. AWS's definition (aws.amazon.com/elasticache/pricing):
// a simple read or write of up to 1 KB is 1 ECPU, and commands that need
// more vCPU time consume proportionally more. tools/rediscost measures the
// decision's script (usec_per_call, INFO commandstats) and a SET beside
// it on the same redis-server: their ratio, rounded up, is the ECPUs; the
// request and reply are under 1 KB.
func ecpuPerDecision(p prices, missing map[string]bool) float64 {
	return math.Ceil(p.price("assume:script-usec", missing) / p.price("assume:simple-write-usec", missing))
}

// billedMs is the mean billed duration of a decision at memMB:
// BenchmarkInvoke's p50 and p99 (the whole Lambda path of one event, on
// about one core here) scaled to the CPU share Lambda gives memMB (one
// vCPU at 1,769 MB, "Configure Lambda function memory"), plus the Redis
// round trip in the AZ and the runtime's /next and /response calls, each
// invocation rounded up to Lambda's 1 ms; 99 % at the p50, 1 % at the p99.
func billedMs(p prices, memMB float64, missing map[string]bool) float64 {
	scale := p.price("assume:lambda-vcpu-mb", missing) / memMB
	fixed := p.price("assume:redis-rtt-ms", missing) + p.price("assume:runtime-overhead-ms", missing)
	at := func(us float64) float64 { return math.Ceil(us/1000*scale + fixed) }
	return 0.99*at(p.price("assume:invoke-p50-us", missing)) + 0.01*at(p.price("assume:invoke-p99-us", missing))
}

func sum(ls []costLine) float64 {
	var s float64
	for _, l := range ls {
		s += l.usd
	}
	return s
}

// costOf prices a template. Every resource type must have a row, priced
// or free ("AWS::IAM::Role", 0): a resource of a new type cannot slip in
// unpriced.
func costOf(js map[string]any, p prices) *estimate {
	r := newReach(js, netFacts{})
	e := &estimate{missing: map[string]bool{}}
	add := func(what string, usd float64) {
		if usd != 0 {
			e.idle = append(e.idle, costLine{what, usd})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(r.res)) {
		typ, ps := r.typ(id), r.props(id)
		switch typ {
		case "AWS::ElastiCache::ReplicationGroup":
			nodes, _ := toInt(ps["NumCacheClusters"])
			if nodes == 0 {
				groups, _ := toInt(ps["NumNodeGroups"])
				replicas, _ := toInt(ps["ReplicasPerNodeGroup"])
				nodes = max(groups, 1) * (replicas + 1)
			}
			node := fmt.Sprintf("%s:%v/%v", typ, ps["CacheNodeType"], ps["Engine"])
			add(fmt.Sprintf("%d × %v %v", nodes, ps["CacheNodeType"], ps["Engine"]), float64(nodes)*p.price(node, e.missing)*hoursPerMonth)
		case "AWS::ElastiCache::ServerlessCache":
			engine := fmt.Sprint(ps["Engine"])
			gb := p.price(typ+":"+engine+"/min-gb", e.missing)
			add("ElastiCache Serverless "+engine+" (minimum storage)", gb*p.price(typ+":"+engine+"/gb-hour", e.missing)*hoursPerMonth)
			e.ecpu = ecpuPerDecision(p, e.missing) * p.price(typ+":"+engine+"/million-ecpu", e.missing)
			e.perMill = append(e.perMill, costLine{fmt.Sprintf("ElastiCache Serverless ECPUs (%.0f a decision)", ecpuPerDecision(p, e.missing)), e.ecpu})
		case "AWS::RDS::DBInstance":
			if ps["DBInstanceClass"] != "db.serverless" {
				e.missing[typ+":"+fmt.Sprint(ps["DBInstanceClass"])] = true
				continue
			}
			cluster := r.props(refID(ps["DBClusterIdentifier"]))
			sc, _ := cluster["ServerlessV2ScalingConfiguration"].(map[string]any)
			acu, _ := sc["MinCapacity"].(float64)
			// Listed at 0 too: a cluster that pauses is a line of the model.
			e.idle = append(e.idle, costLine{fmt.Sprintf("Aurora Serverless v2 writer, %v ACU minimum", acu),
				acu * p.price(typ+":db.serverless/acu-hour", e.missing) * hoursPerMonth})
		case "AWS::RDS::DBCluster":
			add("Aurora storage", p.price("assume:db-storage-gb", e.missing)*p.price(typ+":storage/gb-month", e.missing))
		case "AWS::RDS::DBProxy":
			add("RDS Proxy (minimum ACU for an Aurora Serverless v2 target)",
				p.price(typ+":min-acu", e.missing)*p.price(typ+":acu-hour", e.missing)*hoursPerMonth)
		case "AWS::EC2::VPCEndpoint":
			if ps["VpcEndpointType"] == "Interface" {
				azs := len(list(ps["SubnetIds"]))
				add(fmt.Sprintf("interface endpoint %s × %d AZ", id, azs), float64(azs)*p.price(typ+":interface/az-hour", e.missing)*hoursPerMonth)
			} else {
				add(id, p.price(typ+":gateway", e.missing))
			}
		case "AWS::DynamoDB::GlobalTable":
			// On demand: nothing at idle; each ledger write is billed in
			// every replica's Region, and so is each delete of an ended
			// window's item: at most one a write that made it.
			replicas := float64(len(list(ps["Replicas"])))
			w, wru := p.price("assume:ledger-writes-per-decision", e.missing), p.price(typ+":million-wru", e.missing)
			e.perMill = append(e.perMill,
				costLine{fmt.Sprintf("ledger writes (%v a decision × %v replicas)", w, replicas), w * replicas * wru},
				costLine{fmt.Sprintf("ledger deletes of ended windows (at most %v a decision × %v replicas)", w, replicas), w * replicas * wru})
			// Each Region's sweep scans the whole table every hour
			// (eventually consistent: half a read unit per 4 KB, half a
			// unit at least), and each replica stores every item.
			items, size := p.price("assume:ledger-items", e.missing), p.price("assume:ledger-item-bytes", e.missing)
			scan := math.Max(1, math.Ceil(items*size/4096)) / 2
			e.busy = append(e.busy,
				costLine{fmt.Sprintf("ledger sweep (an hourly scan of %.0f items in each of %v Regions)", items, replicas),
					replicas * hoursPerMonth * scan / 1e6 * p.price(typ+":million-rru", e.missing)},
				costLine{fmt.Sprintf("ledger storage (%.0f items of %.0f bytes × %v replicas)", items, size, replicas),
					replicas * items * size / 1e9 * p.price(typ+":gb-month", e.missing)})
		case "AWS::EC2::NatGateway", "AWS::EC2::EIP":
			add(id, p.price(typ+":hour", e.missing)*hoursPerMonth)
		case "AWS::SecretsManager::Secret":
			add("secret "+id, p.price(typ+":month", e.missing))
			if n := len(list(ps["ReplicaRegions"])); n > 0 {
				add(fmt.Sprintf("secret %s: %d replicas", id, n), float64(n)*p.price(typ+":replica-month", e.missing))
			}
		case "AWS::CloudWatch::Alarm":
			metrics := 1
			if ms := list(ps["Metrics"]); ms != nil {
				metrics = 0
				for _, m := range ms {
					if mm, _ := m.(map[string]any); mm["MetricStat"] != nil {
						metrics++
					}
				}
			}
			add("alarm "+id, float64(metrics)*p.price(typ+":metric-month", e.missing))
		case "AWS::CloudWatch::Dashboard":
			add("dashboard "+id, p.price(typ+":month", e.missing))
		case "AWS::CloudWatch::InsightRule":
			add("Contributor Insights rule "+id, p.price(typ+":month", e.missing))
		case "AWS::Lambda::Function":
			desc := fmt.Sprint(ps["Description"])
			if ps["Handler"] == "bootstrap" && (strings.HasPrefix(desc, "Sluice authorizer") || strings.HasPrefix(desc, "Sluice check")) {
				// Each writes its EMF metrics while it is invoked.
				e.busy = append(e.busy, costLine{"custom metrics of " + desc,
					p.price("assume:emf-metrics-per-function", e.missing) * p.price("AWS::CloudWatch:custom-metric-month", e.missing)})
			}
			if ps["Handler"] != "bootstrap" || !strings.HasPrefix(desc, "Sluice authorizer") {
				p.price(typ+":idle", e.missing)
				continue
			}
			// A decision is one authorizer invocation.
			mem := ps["MemorySize"].(float64)
			ms := billedMs(p, mem, e.missing)
			e.perMill = append(e.perMill,
				costLine{"Lambda requests", p.price(typ+":million-requests", e.missing)},
				costLine{fmt.Sprintf("Lambda duration (%v MiB arm64, %.2f ms billed)", mem, ms),
					mem / 1024 * ms / 1000 * 1e6 * p.price(typ+":arm-gb-second", e.missing)})
			lc, _ := ps["LoggingConfig"].(map[string]any)
			if lc["SystemLogLevel"] != "WARN" && lc["SystemLogLevel"] != "ERROR" && lc["SystemLogLevel"] != "FATAL" {
				e.perMill = append(e.perMill, costLine{"START, END and REPORT log lines",
					p.price("assume:platform-log-bytes", e.missing) * 1e6 / 1e9 * p.price("AWS::Logs::LogGroup:ingest-gb", e.missing)})
			}
		default:
			// A type with no idle cost of its own: its row says so (0).
			p.price(typ, e.missing)
		}
	}
	return e
}

// waf is an AWS WAF web ACL with one rate-based rule: a month and per
// million requests.
func waf(p prices, missing map[string]bool) (float64, float64) {
	return p.price("waf:web-acl-month", missing) + p.price("waf:rule-month", missing), p.price("waf:million-requests", missing)
}

// breakEven is the monthly volume, in millions of decisions, above which
// the variant costs less than the WAF rule; +Inf when never.
func breakEven(e *estimate, wafMonth, wafPerMill float64) float64 {
	if e.perMillTotal() >= wafPerMill {
		return math.Inf(1)
	}
	return math.Max(0, (e.idleTotal()-wafMonth)/(wafPerMill-e.perMillTotal()))
}

// TestCostModel prices every variant from its template: every resource
// type has a price row, the small profile is within its targets, and
// docs/cost.md's model table is what the templates say.
func TestCostModel(t *testing.T) {
	p := readPrices(t)
	missing := map[string]bool{}
	wafMonth, wafPerMill := waf(p, missing)
	var model strings.Builder
	model.WriteString("\n| variant | idle USD/month | + while busy USD/month | USD per million decisions | cheaper than a WAF rate rule above |\n| --- | ---: | ---: | ---: | ---: |\n")
	var compare strings.Builder
	for _, v := range allVariants() {
		_, js := synth(t, v)
		e := costOf(js, p)
		for k := range e.missing {
			missing[k] = true
		}
		be := "never"
		if b := breakEven(e, wafMonth, wafPerMill); !math.IsInf(b, 1) {
			be = fmt.Sprintf("%.0f million a month", b)
		}
		fmt.Fprintf(&model, "| %s | %.2f | %.2f | %.3f | %s |\n", v, e.idleTotal(), e.busyTotal(), e.perMillTotal(), be)
		if v == small || v == full {
			compareTable(&compare, v, e, p, missing)
		}
		if testing.Verbose() {
			for _, l := range e.idle {
				t.Logf("%s idle: %-70s %8.2f", v, l.what, l.usd)
			}
			for _, l := range e.perMill {
				t.Logf("%s per million: %-63s %8.3f", v, l.what, l.usd)
			}
		}
		if v == small {
			if got := e.idleTotal(); got > smallIdleTarget {
				t.Errorf("small profile: %.2f USD a month at idle, want at most %.2f", got, smallIdleTarget)
			}
			if got := e.perMillTotal(); got > smallPerMillTarget {
				t.Errorf("small profile: %.3f USD per million decisions, want at most %.2f", got, smallPerMillTarget)
			}
		}
	}
	// -c globalRegions: a whole stack per Region; the first's holds the
	// ledger, whose writes every decision of a global rule may cause.
	_, globals := synthGlobal(t)
	for i, js := range globals {
		e := costOf(js, p)
		for k := range e.missing {
			missing[k] = true
		}
		if i == 0 {
			fmt.Fprintf(&model, "| global, first of %d Regions | %.2f | %.2f | %.3f | — |\n", len(globals), e.idleTotal(), e.busyTotal(), e.perMillTotal())
		}
	}
	fmt.Fprintf(&model, "| WAF rate-based rule | %.2f | 0.00 | %.3f | — |\n", wafMonth, wafPerMill)
	model.WriteString("| API Gateway usage plans | 0.00 | 0.00 | 0.000 | — |\n\n")
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range missing {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Errorf("%s has no price %q: a resource of the template would go unpriced", priceFile, k)
	}
	doc, err := os.ReadFile(costDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []struct{ name, want string }{{"model", model.String()}, {"compare", "\n" + compare.String()}} {
		got := between(t, doc, sec.name)
		if got == sec.want {
			continue
		}
		if *updateCost {
			at := bytes.Index(doc, []byte("<!-- "+sec.name+":begin -->")) + len("<!-- "+sec.name+":begin -->")
			doc = append(append(doc[:at:at], sec.want...), doc[at+len(got):]...)
			if err := os.WriteFile(costDoc, doc, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("docs/cost.md's %s table differs from the templates; run go test ./infra -run TestCostModel -update-cost\ngot:%s\nwant:%s", sec.name, got, sec.want)
	}
}

// compareTable writes the whole bill of each way to limit a REST or HTTP
// API with variant v's stack, API Gateway's own request price included in
// every row: a month's fixed part (idle, plus the custom metrics while
// busy) and USD per million requests, then the total at 10 and 100
// million requests a month. Sluice on an HTTP API runs in the API's own
// Lambda integration (ratelimit.LimitHTTPAPI): no authorizer invocation,
// so no request charge or log lines of its own, only the Redis round trip
// added to the integration's duration and the ECPUs.
func compareTable(w *strings.Builder, v variant, e *estimate, p prices, missing map[string]bool) {
	rest := p.price("apigw:rest-million", missing)
	httpAPI := p.price("apigw:http-million", missing)
	wafMonth, wafPerMill := waf(p, missing)
	fixed := e.idleTotal() + e.busyTotal()
	// The integration's extra duration at the authorizer's memory: the
	// Redis round trip and the limiter's share of the p50, rounded up.
	extraMs := math.Ceil(p.price("assume:redis-rtt-ms", missing) + p.price("assume:invoke-p50-us", missing)/1000*p.price("assume:lambda-vcpu-mb", missing)/256)
	inline := httpAPI + e.ecpu + 256.0/1024*extraMs/1000*1e6*p.price("AWS::Lambda::Function:arm-gb-second", missing)
	rows := []struct {
		way          string
		month, perMn float64
	}{
		{"Sluice on REST (authorizer)", fixed, rest + e.perMillTotal()},
		{"Sluice on HTTP API (LimitHTTPAPI)", fixed, inline},
		{"WAF rate-based rule on REST", wafMonth, rest + wafPerMill},
		{"usage plans on REST", 0, rest},
	}
	fmt.Fprintf(w, "`%s`:\n\n| way to limit | USD a month | USD per million requests | at 10 million | at 100 million |\n| --- | ---: | ---: | ---: | ---: |\n", v)
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.2f | %.3f | %.2f | %.2f |\n", r.way, r.month, r.perMn, r.month+10*r.perMn, r.month+100*r.perMn)
	}
	w.WriteString("\n")
}

// TestCostModelCounts checks the model's reading of the templates: the
// production stack pays for the proxy, two nodes and the endpoint in two
// AZs, and the platform log lines; the small one for none of them.
func TestCostModelCounts(t *testing.T) {
	p := readPrices(t)
	has := func(e *estimate, prefix string) bool {
		return slices.ContainsFunc(append(slices.Clone(e.idle), e.perMill...), func(l costLine) bool { return strings.HasPrefix(l.what, prefix) })
	}
	_, fullJS := synth(t, full)
	_, smallJS := synth(t, small)
	prod, sm := costOf(fullJS, p), costOf(smallJS, p)
	for _, want := range []string{"RDS Proxy", "2 × cache.", "START, END and REPORT", "dashboard "} {
		if !has(prod, want) {
			t.Errorf("full: no cost line %q", want)
		}
		if has(sm, want) {
			t.Errorf("small: a cost line %q", want)
		}
	}
	for _, want := range []string{"ElastiCache Serverless valkey", "Aurora Serverless v2 writer, 0 ACU", "Lambda requests"} {
		if !has(sm, want) {
			t.Errorf("small: no cost line %q (has %v)", want, sm.idle)
		}
	}
	if sm.idleTotal() >= prod.idleTotal()/5 {
		t.Errorf("small idle %.2f is not a fifth of production's %.2f", sm.idleTotal(), prod.idleTotal())
	}
}

// TestSmallProfile: -c profile=small changes what docs/deploy.md's
// profile table says it changes, and keeps what it says it keeps: the
// same alarms, each notifying the topic, and AWS_IAM on every admin
// method.
func TestSmallProfile(t *testing.T) {
	_, fullJS := synth(t, full)
	_, js := synth(t, small)
	count := func(js map[string]any, typ string) int { return len(resources(js, typ)) }
	for _, typ := range []string{"AWS::RDS::DBProxy", "AWS::ElastiCache::ReplicationGroup", "AWS::CloudWatch::Dashboard"} {
		if n := count(js, typ); n != 0 {
			t.Errorf("small: %d %s, want none", n, typ)
		}
	}
	caches := resources(js, "AWS::ElastiCache::ServerlessCache")
	if len(caches) != 1 || caches[0].Props["Engine"] != "valkey" {
		t.Errorf("small: ServerlessCache %v, want one, valkey", caches)
	}
	for _, c := range resources(js, "AWS::RDS::DBCluster") {
		sc, _ := c.Props["ServerlessV2ScalingConfiguration"].(map[string]any)
		if sc["MinCapacity"] != 0.0 || sc["SecondsUntilAutoPause"] != 300.0 {
			t.Errorf("small: cluster scaling %v, want MinCapacity 0, SecondsUntilAutoPause 300", sc)
		}
	}
	for _, ep := range resources(js, "AWS::EC2::VPCEndpoint") {
		if n := len(list(ep.Props["SubnetIds"])); n != 1 {
			t.Errorf("small: endpoint %s in %d subnets, want 1", ep.ID, n)
		}
	}
	for _, fn := range sluiceFunctions(js) {
		name := strings.TrimPrefix(fmt.Sprint(fn.Props["Description"]), "Sluice ")
		lc, _ := fn.Props["LoggingConfig"].(map[string]any)
		if lc["LogFormat"] != "JSON" || lc["SystemLogLevel"] != "WARN" || lc["ApplicationLogLevel"] != "TRACE" {
			t.Errorf("small: %s LoggingConfig %v, want JSON, system WARN, application TRACE", name, lc)
		}
		if reserved, ok := fn.Props["ReservedConcurrentExecutions"]; ok {
			t.Errorf("small: %s ReservedConcurrentExecutions %v, want none (TestReservedConcurrencyFitsNewAccount)", name, reserved)
		}
		env := envOf(fn)
		if _, hasHost := env["DB_HOST"]; hasHost {
			t.Errorf("small: %s has DB_HOST: no proxy, the secret's host", name)
		}
		if name == "authorizer" || name == "check" {
			if env["RULES_REFRESH"] != smallRulesRefresh {
				t.Errorf("small: %s RULES_REFRESH = %v, want %s", name, env["RULES_REFRESH"], smallRulesRefresh)
			}
		}
		if name == "authorizer" && fn.Props["MemorySize"] != 256.0 {
			t.Errorf("small: authorizer MemorySize %v, want 256", fn.Props["MemorySize"])
		}
	}
	// Kept: every alarm, each with the topic as its action, and IAM.
	if a, b := count(js, "AWS::CloudWatch::Alarm"), count(fullJS, "AWS::CloudWatch::Alarm"); a != b || a == 0 {
		t.Errorf("small: %d alarms, full %d: want the same", a, b)
	}
	for _, al := range resources(js, "AWS::CloudWatch::Alarm") {
		if len(list(al.Props["AlarmActions"])) == 0 {
			t.Errorf("small: alarm %s notifies nobody", al.ID)
		}
	}
	methods := 0
	for _, m := range resources(js, "AWS::ApiGateway::Method") {
		if m.Props["AuthorizationType"] == "AWS_IAM" {
			methods++
		}
	}
	if want := len(adminRoutes); methods != want {
		t.Errorf("small: %d AWS_IAM methods, want %d (every admin route and POST /check)", methods, want)
	}
}

// What a new AWS account can reserve. "Lambda quotas"
// (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html):
// new accounts have reduced concurrency quotas, which AWS raises with use;
// one may have a concurrent executions quota of 10 rather than the default
// 1,000. "Configuring reserved concurrency"
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html):
// reservations must leave the account's unreserved concurrency at its
// minimum (100 at the default quota); at a quota of 10 that minimum is all
// 10, so any reservation fails the deploy.
const (
	newAccountConcurrency   = 10 // the account's concurrent executions quota
	newAccountUnreservedMin = 10 // what reservations must leave unreserved
)

// TestReservedConcurrencyFitsNewAccount: a stack deployed with the
// defaults, in either profile (small is meant for a team's first
// account), reserves no more concurrency than a new account with a quota
// of 10 can give, which is none. A variant that asks for reservations
// (full: authorizerReservedConcurrency, adminReservedConcurrency) is the
// account owner's call.
func TestReservedConcurrencyFitsNewAccount(t *testing.T) {
	sawSmall := false
	for _, v := range allVariants() {
		if p := variantProps(v); p.AuthorizerReservedConcurrency != 0 || p.AdminReservedConcurrency != 0 {
			continue
		}
		sawSmall = sawSmall || v == small
		_, js := synth(t, v)
		total, holders := 0.0, []string{}
		for _, fn := range resources(js, "AWS::Lambda::Function") {
			if n, ok := fn.Props["ReservedConcurrentExecutions"].(float64); ok {
				total += n
				holders = append(holders, fmt.Sprintf("%s %v", fn.ID, n))
			}
		}
		if limit := float64(newAccountConcurrency - newAccountUnreservedMin); total > limit {
			t.Errorf("%s: ReservedConcurrentExecutions total %v (%v), want at most %v: an account with a concurrency quota of %d, "+
				"%d of it kept unreserved, refuses the deploy", v, total, holders, limit, newAccountConcurrency, newAccountUnreservedMin)
		}
	}
	if !sawSmall {
		t.Error("the small variant asks for reservations: nothing checks the small profile's defaults")
	}
}

// TestCostModelGlobal: a family's first stack pays for the whole ledger,
// in every replica (writes, deletes of ended windows, each Region's
// hourly sweep, storage) and for the subject key's replicas, one a
// further Region; the other stacks for none of it.
func TestCostModelGlobal(t *testing.T) {
	p := readPrices(t)
	_, globals := synthGlobal(t)
	for i, js := range globals {
		e := costOf(js, p)
		got := map[string]float64{}
		for _, l := range slices.Concat(e.idle, e.busy, e.perMill) {
			for _, prefix := range []string{"ledger writes", "ledger deletes", "ledger sweep", "ledger storage"} {
				if strings.HasPrefix(l.what, prefix) {
					got[prefix] += l.usd
				}
			}
			if strings.HasPrefix(l.what, "secret SubjectHmacKey") && strings.HasSuffix(l.what, "replicas") {
				got["key replicas"] += l.usd
			}
		}
		want := 5
		if i > 0 {
			want = 0
		}
		if len(got) != want {
			t.Errorf("stack %d: ledger and key replica lines %v, want %d", i, got, want)
		}
		if i == 0 && got["key replicas"] != 2*p.price("AWS::SecretsManager::Secret:replica-month", map[string]bool{}) {
			t.Errorf("stack 0: the subject key's replicas cost %.2f, want 2 × the replica-month", got["key replicas"])
		}
	}
}
