package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/admin"
)

// A template shows whether a function can reach what it calls: its subnets'
// route tables, the NAT and internet gateways, the interface endpoints,
// and the security groups of both ends. unreachable walks them, from each
// function's VpcConfig, for every dependency the function's environment
// names. What the template cannot show, the network of a VPC brought
// along, is stated in netFacts.

// netFacts are what the template cannot show: the parts of a VPC, its
// security groups and its data stores that a variant brings along (their
// ids are literals in the template).
type netFacts struct {
	// egressSubnets are literal subnet ids with a NAT route (what CDK's VPC
	// lookup calls private subnets).
	egressSubnets map[string]bool
	// endpoints are the AWS APIs ("secretsmanager", "lambda") with an
	// interface endpoint, private DNS on, in the VPC brought along.
	endpoints map[string]bool
	// groups are literal security group ids that allow all outbound and
	// that the data stores brought along admit.
	groups map[string]bool
	// vpcHosts are hosts inside the VPC brought along (its Redis, its
	// database, the host a database secret names: "db-secret").
	vpcHosts map[string]bool
	// publicHosts are hosts reachable from anywhere (LocalStack's).
	publicHosts map[string]bool
	// vpcCidr is the CIDR block of the VPC brought along.
	vpcCidr string
}

// dependency is one thing a function calls.
type dependency struct {
	what    string // for messages
	kind    depKind
	service string // depAWS: the endpoint service name, such as "secretsmanager"
	target  string // depTarget: the logical id of the resource
	host    string // depHost
	ports   []int
}

type depKind int

const (
	depAWS      depKind = iota // an AWS API, over HTTPS
	depInternet                // a host on the internet, over HTTPS (a JWKS)
	depTarget                  // a resource of the template in a VPC (Redis, an RDS Proxy)
	depHost                    // a host the template does not create
)

// reach is the template, indexed.
type reach struct {
	res   map[string]map[string]any // logical id → resource
	facts netFacts
}

func newReach(js map[string]any, f netFacts) *reach {
	r := &reach{res: map[string]map[string]any{}, facts: f}
	rs, _ := js["Resources"].(map[string]any)
	for id, v := range rs {
		r.res[id], _ = v.(map[string]any)
	}
	return r
}

func (r *reach) typ(id string) string {
	t, _ := r.res[id]["Type"].(string)
	return t
}

func (r *reach) props(id string) map[string]any {
	p, _ := r.res[id]["Properties"].(map[string]any)
	return p
}

// ofType returns the ids of the resources of typ, sorted.
func (r *reach) ofType(typ string) []string {
	var ids []string
	for id := range r.res {
		if r.typ(id) == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// refID returns the logical id v refers to ({"Ref": id} or
// {"Fn::GetAtt": [id, ...]}), or "".
func refID(v any) string {
	m, _ := v.(map[string]any)
	if id, ok := m["Ref"].(string); ok {
		return id
	}
	if a, ok := m["Fn::GetAtt"].([]any); ok && len(a) > 0 {
		id, _ := a[0].(string)
		return id
	}
	return ""
}

// refs returns every logical id referred to anywhere in v, pseudo
// parameters (AWS::Region) left out.
func refs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if id := refID(x); id != "" && !strings.HasPrefix(id, "AWS::") { // not a pseudo parameter
			out = append(out, id)
		}
		for _, e := range x {
			out = append(out, refs(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, refs(e)...)
		}
	}
	return out
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// unreachable returns one line per dependency a function cannot reach,
// and per dependency of a kind this walk does not know.
func unreachable(js map[string]any, f netFacts) []string {
	r := newReach(js, f)
	var problems []string
	for _, fn := range r.ofType("AWS::Lambda::Function") {
		for _, d := range r.dependencies(fn) {
			if why := r.check(fn, d); why != "" {
				problems = append(problems, fmt.Sprintf("%s → %s: %s", fn, d.what, why))
			}
		}
	}
	return problems
}

// dependencies reads what fn calls from its environment.
func (r *reach) dependencies(fn string) []dependency {
	env, _ := r.props(fn)["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	var deps []dependency
	secrets := false
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range vars {
			if !yield(k) {
				return
			}
		}
	}) {
		v := vars[k]
		switch {
		case k == "REDIS_URL":
			deps = append(deps, r.endpointDep("Redis", v, 6379))
		case k == "DB_HOST":
			deps = append(deps, r.endpointDep("the database", v, 5432))
		case k == "DATABASE_URL":
			deps = append(deps, r.endpointDep("the database", v, 5432))
		case k == "DB_SECRET_ARN" && vars["DB_HOST"] == nil:
			if c := r.attachedCluster(v); c != "" {
				// A secret of the template attached to its cluster: the
				// cluster's endpoint, directly (no proxy).
				deps = append(deps, dependency{what: "the database (" + c + ")", kind: depTarget, target: c, ports: []int{5432}})
				break
			}
			deps = append(deps, dependency{what: "the database (the secret's host)", kind: depHost, host: "db-secret", ports: []int{5432}})
		case k == "UPSTREAM_AUTHORIZER", k == "USER_ON_EVENT_FUNCTION_ARN":
			deps = append(deps, dependency{what: "Lambda (" + k + ")", kind: depAWS, service: "lambda", ports: []int{443}})
		case k == "INSIGHTS_RULE_PREFIX":
			deps = append(deps, dependency{what: "CloudWatch (Contributor Insights)", kind: depAWS, service: "monitoring", ports: []int{443}})
		case k == "JWT_ISSUER":
			u := fmt.Sprint(v)
			if j, ok := vars["JWT_JWKS_URL"].(string); ok {
				u = j
			}
			deps = append(deps, dependency{what: "the JWKS of " + u, kind: depInternet, ports: []int{443}})
		}
		if strings.HasSuffix(k, "_SECRET_ARN") && !secrets {
			secrets = true
			deps = append(deps, dependency{what: "Secrets Manager", kind: depAWS, service: "secretsmanager", ports: []int{443}})
		}
	}
	return deps
}

// attachedCluster returns the DBCluster the secret v names is attached
// to (a SecretTargetAttachment of the template), or "".
func (r *reach) attachedCluster(v any) string {
	id := refID(v)
	if r.typ(id) != "AWS::SecretsManager::SecretTargetAttachment" {
		return ""
	}
	if c := refID(r.props(id)["TargetId"]); r.typ(c) == "AWS::RDS::DBCluster" {
		return c
	}
	return ""
}

// endpointDep is a Redis or database at v: a URL or host, literal, or
// built from a resource of the template.
func (r *reach) endpointDep(what string, v any, port int) dependency {
	if s, ok := v.(string); ok {
		host, p := s, port
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			host = u.Hostname()
			if n, err := strconv.Atoi(u.Port()); err == nil {
				p = n
			}
		}
		return dependency{what: what + " at " + host, kind: depHost, host: host, ports: []int{p}}
	}
	for _, id := range refs(v) {
		switch r.typ(id) {
		case "AWS::ElastiCache::ReplicationGroup", "AWS::RDS::DBProxy":
			return dependency{what: what + " (" + id + ")", kind: depTarget, target: id, ports: []int{port}}
		case "AWS::ElastiCache::ServerlessCache":
			// Replica reads on 6380, advertised in the cluster topology.
			return dependency{what: what + " (" + id + ")", kind: depTarget, target: id, ports: []int{6379, 6380}}
		}
	}
	return dependency{what: what + " (unknown)", kind: depHost, host: fmt.Sprint(v), ports: []int{port}}
}

// fnVpc is where a function runs: vpc is the logical id of the template's
// VPC, or "byo" for a VPC brought along; "" outside any VPC.
type fnVpc struct {
	vpc     string
	subnets []any
	groups  []any
}

func (r *reach) placement(fn string) fnVpc {
	vc, _ := r.props(fn)["VpcConfig"].(map[string]any)
	if vc == nil {
		return fnVpc{}
	}
	p := fnVpc{subnets: list(vc["SubnetIds"]), groups: list(vc["SecurityGroupIds"])}
	p.vpc = r.vpcOfSubnets(p.subnets)
	return p
}

// vpcOfSubnets returns the VPC of the first subnet: its logical id, or
// "byo" for a literal subnet id.
func (r *reach) vpcOfSubnets(subnets []any) string {
	if len(subnets) == 0 {
		return ""
	}
	if id := refID(subnets[0]); id != "" {
		return refID(r.props(id)["VpcId"])
	}
	return "byo"
}

func (r *reach) check(fn string, d dependency) string {
	p := r.placement(fn)
	if p.vpc == "" {
		switch d.kind {
		case depAWS, depInternet:
			return "" // Lambda's own network reaches AWS APIs and the internet
		case depHost:
			if r.facts.publicHosts[d.host] {
				return ""
			}
			return "the function is outside any VPC, and " + d.host + " is not reachable from the internet"
		default:
			return "the function is outside any VPC, and " + d.target + " is in one"
		}
	}
	if len(p.subnets) == 0 || len(p.groups) == 0 {
		return "VpcConfig without subnets or security groups"
	}
	egress := true
	for _, s := range p.subnets {
		egress = egress && r.subnetHasNat(s)
	}
	switch d.kind {
	case depInternet:
		if !egress {
			return "the function's subnets have no NAT route to the internet"
		}
		return r.egressAllows(p, 443, true)
	case depAWS:
		if egress {
			return r.egressAllows(p, 443, true)
		}
		return r.viaEndpoint(p, d.service)
	case depTarget:
		if vpc := r.vpcOfTarget(d.target); vpc != p.vpc {
			return fmt.Sprintf("%s is in VPC %q, the function in %q", d.target, vpc, p.vpc)
		}
		for _, port := range d.ports {
			if why := r.egressAllows(p, port, false, r.targetGroups(d.target)...); why != "" {
				return why
			}
			if why := r.ingressAllows(r.targetGroups(d.target), p, port); why != "" {
				return why
			}
		}
		return ""
	default: // depHost
		if p.vpc != "byo" || !r.facts.vpcHosts[d.host] {
			return fmt.Sprintf("%s is not in the function's VPC (%s): the template creates no route to it", d.host, p.vpc)
		}
		for _, port := range d.ports {
			if why := r.egressAllows(p, port, true); why != "" {
				return why
			}
		}
		return ""
	}
}

// subnetHasNat reports whether the subnet's route table sends 0.0.0.0/0
// to a NAT gateway in a subnet routed to an attached internet gateway.
func (r *reach) subnetHasNat(subnet any) bool {
	id := refID(subnet)
	if id == "" {
		s, _ := subnet.(string)
		return r.facts.egressSubnets[s]
	}
	for _, nat := range r.defaultRoutes(id, "NatGatewayId") {
		natSubnet := refID(r.props(nat)["SubnetId"])
		for _, igw := range r.defaultRoutes(natSubnet, "GatewayId") {
			if r.typ(igw) != "AWS::EC2::InternetGateway" {
				continue
			}
			for _, att := range r.ofType("AWS::EC2::VPCGatewayAttachment") {
				if refID(r.props(att)["InternetGatewayId"]) == igw {
					return true
				}
			}
		}
	}
	return false
}

// defaultRoutes returns the targets (by field, such as NatGatewayId) of
// the 0.0.0.0/0 routes of the subnet's route table.
func (r *reach) defaultRoutes(subnet, field string) []string {
	var out []string
	for _, a := range r.ofType("AWS::EC2::SubnetRouteTableAssociation") {
		if refID(r.props(a)["SubnetId"]) != subnet {
			continue
		}
		rt := refID(r.props(a)["RouteTableId"])
		for _, route := range r.ofType("AWS::EC2::Route") {
			rp := r.props(route)
			if refID(rp["RouteTableId"]) == rt && rp["DestinationCidrBlock"] == "0.0.0.0/0" {
				if t := refID(rp[field]); t != "" {
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// viaEndpoint checks an interface endpoint for service in the function's
// VPC, with private DNS, and the rules between the two.
func (r *reach) viaEndpoint(p fnVpc, service string) string {
	for _, ep := range r.ofType("AWS::EC2::VPCEndpoint") {
		ps := r.props(ep)
		name := fmt.Sprint(ps["ServiceName"])
		// A literal name, or Fn::Join's, printed: com.amazonaws.<region>.<service>.
		if ps["VpcEndpointType"] != "Interface" || !strings.HasSuffix(strings.TrimRight(name, "]"), "."+service) {
			continue
		}
		vpc := refID(ps["VpcId"])
		if _, literal := ps["VpcId"].(string); literal {
			vpc = "byo"
		}
		if vpc != p.vpc {
			continue
		}
		if ps["PrivateDnsEnabled"] != true {
			return "the " + service + " endpoint " + ep + " has no private DNS: the SDK's host name does not resolve to it"
		}
		var groups []string
		for _, g := range list(ps["SecurityGroupIds"]) {
			groups = append(groups, refID(g))
		}
		if why := r.egressAllows(p, 443, false, groups...); why != "" {
			return why
		}
		return r.ingressAllows(groups, p, 443)
	}
	if p.vpc == "byo" && r.facts.endpoints[service] {
		return r.egressAllows(p, 443, true)
	}
	return "no NAT route and no " + service + " interface endpoint in the function's VPC"
}

// vpcOfTarget is the VPC of a data store of the template.
func (r *reach) vpcOfTarget(id string) string {
	ps := r.props(id)
	switch r.typ(id) {
	case "AWS::ElastiCache::ReplicationGroup":
		group := refID(ps["CacheSubnetGroupName"])
		return r.vpcOfSubnets(list(r.props(group)["SubnetIds"]))
	case "AWS::ElastiCache::ServerlessCache":
		return r.vpcOfSubnets(list(ps["SubnetIds"]))
	case "AWS::RDS::DBProxy":
		return r.vpcOfSubnets(list(ps["VpcSubnetIds"]))
	case "AWS::RDS::DBCluster":
		group := refID(ps["DBSubnetGroupName"])
		return r.vpcOfSubnets(list(r.props(group)["SubnetIds"]))
	}
	return ""
}

// targetGroups are the security groups of a data store of the template.
func (r *reach) targetGroups(id string) []string {
	ps := r.props(id)
	var raw []any
	switch r.typ(id) {
	case "AWS::ElastiCache::ReplicationGroup", "AWS::ElastiCache::ServerlessCache":
		raw = list(ps["SecurityGroupIds"])
	case "AWS::RDS::DBProxy", "AWS::RDS::DBCluster":
		raw = list(ps["VpcSecurityGroupIds"])
	}
	var out []string
	for _, g := range raw {
		out = append(out, refID(g))
	}
	return out
}

// rule is one security group rule, in or out.
type rule struct {
	proto     string
	from, to  int
	peerGroup string // logical id, or the literal id
	cidr      string // "vpc" for the VPC's own block
}

func (ru rule) allows(port int) bool {
	return ru.proto == "-1" || ru.proto == "tcp" && ru.from <= port && port <= ru.to
}

// rules returns the ingress or egress rules of group (a logical id), inline
// and standalone.
func (r *reach) rules(group string, egress bool) []rule {
	inline, standalone, peerKey := "SecurityGroupIngress", "AWS::EC2::SecurityGroupIngress", "SourceSecurityGroupId"
	if egress {
		inline, standalone, peerKey = "SecurityGroupEgress", "AWS::EC2::SecurityGroupEgress", "DestinationSecurityGroupId"
	}
	parse := func(m map[string]any) rule {
		ru := rule{proto: fmt.Sprint(m["IpProtocol"])}
		ru.from, _ = toInt(m["FromPort"])
		ru.to, _ = toInt(m["ToPort"])
		if id := refID(m[peerKey]); id != "" {
			ru.peerGroup = id
		} else if s, ok := m[peerKey].(string); ok {
			ru.peerGroup = s
		}
		switch c := m["CidrIp"].(type) {
		case string:
			ru.cidr = c
		case map[string]any:
			if a, ok := c["Fn::GetAtt"].([]any); ok && len(a) == 2 && a[1] == "CidrBlock" {
				ru.cidr = "vpc"
			}
		}
		return ru
	}
	var out []rule
	for _, m := range list(r.props(group)[inline]) {
		if mm, ok := m.(map[string]any); ok {
			out = append(out, parse(mm))
		}
	}
	for _, id := range r.ofType(standalone) {
		if refID(r.props(id)["GroupId"]) == group {
			out = append(out, parse(r.props(id)))
		}
	}
	return out
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case float64:
		return int(x), true
	case string:
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}

// egressAllows checks that one of the function's groups lets it out on
// port: to anywhere, or (internet false) to one of the peer groups or the
// VPC's block.
func (r *reach) egressAllows(p fnVpc, port int, internet bool, peers ...string) string {
	for _, g := range p.groups {
		id := refID(g)
		if id == "" {
			if s, _ := g.(string); r.facts.groups[s] {
				return ""
			}
			continue
		}
		for _, ru := range r.rules(id, true) {
			if !ru.allows(port) {
				continue
			}
			if ru.cidr == "0.0.0.0/0" || !internet && (ru.cidr == "vpc" || ru.cidr == r.facts.vpcCidr && ru.cidr != "" ||
				ru.peerGroup != "" && slices.Contains(peers, ru.peerGroup)) {
				return ""
			}
		}
	}
	return fmt.Sprintf("no security group of the function (%v) allows it out on tcp/%d", p.groups, port)
}

// ingressAllows checks that one of groups admits the function on port:
// from one of its groups, or from the VPC's block.
func (r *reach) ingressAllows(groups []string, p fnVpc, port int) string {
	var fnGroups []string
	for _, g := range p.groups {
		if id := refID(g); id != "" {
			fnGroups = append(fnGroups, id)
		} else if s, ok := g.(string); ok {
			fnGroups = append(fnGroups, s)
		}
	}
	for _, g := range groups {
		for _, ru := range r.rules(g, false) {
			if ru.allows(port) && (slices.Contains(fnGroups, ru.peerGroup) || ru.cidr == "vpc" ||
				ru.cidr != "" && ru.cidr == r.facts.vpcCidr) {
				return ""
			}
		}
	}
	return fmt.Sprintf("no group of the target (%v) admits the function's groups (%v) on tcp/%d", groups, fnGroups, port)
}

// variantFacts are what each variant brings along.
func variantFacts(v variant) netFacts {
	switch v {
	case byo:
		// Private subnets (a NAT route); the group given allows all out,
		// Redis and the database admit it.
		return netFacts{
			egressSubnets: map[string]bool{byoSubnets[0]: true, byoSubnets[1]: true},
			groups:        map[string]bool{"sg-0123456789abcdef0": true},
			vpcHosts:      map[string]bool{byoRedisHost: true, "proxy.example.internal": true},
		}
	case byoIsolated:
		return netFacts{vpcHosts: map[string]bool{byoRedisHost: true, "db-secret": true}, vpcCidr: isolatedVpcCidr}
	case localstack:
		return netFacts{publicHosts: map[string]bool{"host.docker.internal": true}}
	}
	return netFacts{}
}

// TestReachability: in every variant, every function reaches every
// dependency its environment names (Redis, the database or its proxy,
// Secrets Manager, Lambda, the JWKS, CloudWatch), through a route,
// endpoint or public path from its subnets, with security group rules at
// both ends.
func TestReachability(t *testing.T) {
	for _, v := range allVariants() {
		_, js := synth(t, v)
		for _, p := range unreachable(js, variantFacts(v)) {
			t.Errorf("%s: %s", v, p)
		}
	}
}

// TestReachabilityWalk checks the walk itself on the variants: it must
// find each kind of dependency there, or it would pass on a template it
// cannot read.
func TestReachabilityWalk(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range allVariants() {
		_, js := synth(t, v)
		r := newReach(js, variantFacts(v))
		for _, fn := range r.ofType("AWS::Lambda::Function") {
			for _, d := range r.dependencies(fn) {
				key := d.service
				switch d.kind {
				case depTarget:
					key = r.typ(d.target)
				case depHost:
					key = "host"
				case depInternet:
					key = "internet"
				}
				seen[key] = true
			}
		}
	}
	for _, want := range []string{"secretsmanager", "lambda", "monitoring", "internet", "host",
		"AWS::ElastiCache::ReplicationGroup", "AWS::ElastiCache::ServerlessCache", "AWS::RDS::DBProxy", "AWS::RDS::DBCluster"} {
		if !seen[want] {
			t.Errorf("no variant has a dependency on %s: the walk misreads the template (seen %v)", want, seen)
		}
	}
}

// What a function holds, read from the template: the grant kinds
// overGranted compares with what the function may use.
const (
	holdsRedis       = "Redis (REDIS_URL, or admitted by its security group)"
	holdsRedisAuth   = "Redis's AUTH token"
	holdsSubjectKey  = "the subject hash key"
	holdsSigningKey  = "the rules signing key"
	holdsDBOwner     = "the database's owner login"
	holdsDBReader    = "the database's read-only login"
	holdsDBShared    = "the database brought along (its one login)"
	holdsDBNetwork   = "the database (admitted by its security group)"
	holdsReaderLogin = "the read-only role's login to set (DB_READER_SECRET_ARN)"
	holdsCloudWatch  = "CloudWatch"
	holdsLambda      = "Lambda invoke (an upstream authorizer)"
	holdsVpc         = "a VPC"
)

// allowedHoldings is what a function with access a may hold; name is the
// function's (the authorizer alone may invoke an upstream, migrate alone
// sets the read-only role's login).
func allowedHoldings(name string, a access) map[string]bool {
	ok := map[string]bool{}
	if a.stats {
		ok[holdsCloudWatch] = true
		ok[holdsSubjectKey] = a.key
		return ok // and no VPC: the CloudWatch API is outside it
	}
	ok[holdsVpc], ok[holdsDBNetwork], ok[holdsDBShared] = true, true, true
	if a.write {
		ok[holdsDBOwner] = true
	} else {
		ok[holdsDBReader] = true
	}
	if a.redis {
		ok[holdsRedis], ok[holdsRedisAuth], ok[holdsSubjectKey] = true, true, true
	}
	ok[holdsSigningKey] = a.sign
	switch name {
	case "authorizer":
		ok[holdsLambda] = true
	case "migrate":
		ok[holdsReaderLogin], ok[holdsDBReader] = true, true
	}
	return ok
}

// secretKind names the secret v refers to (a logical id, or an ARN of a
// secret brought along), as a holds* kind, or "" when it is none of
// Sluice's.
func (r *reach) secretKind(v any, p *StackProps) string {
	for _, id := range refs(v) {
		switch {
		case strings.HasPrefix(id, "DbReaderSecret"):
			return holdsDBReader
		case strings.HasPrefix(id, "DbSecret"):
			return holdsDBOwner
		case strings.HasPrefix(id, "RedisAuthToken"), strings.HasPrefix(id, "RedisUserSecret"):
			return holdsRedisAuth
		case strings.HasPrefix(id, "SubjectHmacKey"):
			return holdsSubjectKey
		case strings.HasPrefix(id, "RulesSigningKey"):
			return holdsSigningKey
		}
	}
	s := fmt.Sprint(v) // a literal ARN, or Fn::Join's parts printed
	switch {
	case p.RedisAuthSecretArn != "" && strings.Contains(s, p.RedisAuthSecretArn):
		return holdsRedisAuth
	case p.DatabaseSecretArn != "" && strings.Contains(s, p.DatabaseSecretArn):
		return holdsDBShared
	}
	return ""
}

// holdings returns what fn holds in the template: its environment's
// settings, the secrets and APIs its role's policies grant, its VPC, and
// the data stores whose security groups admit its own.
func (r *reach) holdings(fn string, p *StackProps) map[string]bool {
	has := map[string]bool{}
	env, _ := r.props(fn)["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	for k, v := range vars {
		switch k {
		case "REDIS_URL":
			has[holdsRedis] = true
		case "SUBJECT_HMAC_KEY_SECRET_ARN":
			has[holdsSubjectKey] = true
		case "REDIS_AUTH_SECRET_ARN":
			has[holdsRedisAuth] = true
		case "RULES_SIGNING_KEY_SECRET_ARN", "RULES_SIGNING_KEY":
			has[holdsSigningKey] = true
		case "DB_SECRET_ARN":
			if kind := r.secretKind(v, p); kind != "" {
				has[kind] = true
			} else {
				has["an unknown database secret "+fmt.Sprint(v)] = true
			}
		case "DATABASE_URL":
			has[holdsDBShared] = true
		case "DB_READER_SECRET_ARN":
			has[holdsReaderLogin] = true
		case "INSIGHTS_RULE_PREFIX":
			has[holdsCloudWatch] = true
		case "UPSTREAM_AUTHORIZER":
			has[holdsLambda] = true
		}
	}
	role := refID(r.props(fn)["Role"])
	for _, pol := range r.ofType("AWS::IAM::Policy") {
		attached := false
		for _, ro := range list(r.props(pol)["Roles"]) {
			attached = attached || refID(ro) == role
		}
		if !attached {
			continue
		}
		doc, _ := r.props(pol)["PolicyDocument"].(map[string]any)
		for _, st := range list(doc["Statement"]) {
			stm, _ := st.(map[string]any)
			var actions []string
			switch a := stm["Action"].(type) {
			case string:
				actions = []string{a}
			case []any:
				for _, x := range a {
					actions = append(actions, fmt.Sprint(x))
				}
			}
			resList := list(stm["Resource"])
			if resList == nil {
				resList = []any{stm["Resource"]}
			}
			for _, act := range actions {
				switch service, _, _ := strings.Cut(act, ":"); service {
				case "secretsmanager":
					for _, res := range resList {
						if kind := r.secretKind(res, p); kind != "" {
							has[kind] = true
						} else {
							has["secretsmanager on "+fmt.Sprint(res)] = true
						}
					}
				case "cloudwatch":
					has[holdsCloudWatch] = true
				case "lambda":
					has[holdsLambda] = true
				case "kms":
					// Decrypting the secrets it reads (CDK grants with them).
				default:
					has["IAM "+act] = true
				}
			}
		}
	}
	pl := r.placement(fn)
	if pl.vpc == "" {
		return has
	}
	has[holdsVpc] = true
	var groups []string
	for _, g := range pl.groups {
		if id := refID(g); id != "" {
			groups = append(groups, id)
		}
	}
	admits := func(targets ...string) bool {
		for _, t := range targets {
			for _, tg := range r.targetGroups(t) {
				for _, ru := range r.rules(tg, false) {
					if slices.Contains(groups, ru.peerGroup) {
						return true
					}
				}
			}
		}
		return false
	}
	if admits(append(r.ofType("AWS::ElastiCache::ReplicationGroup"), r.ofType("AWS::ElastiCache::ServerlessCache")...)...) {
		has[holdsRedis] = true
	}
	if admits(append(r.ofType("AWS::RDS::DBProxy"), r.ofType("AWS::RDS::DBCluster")...)...) {
		has[holdsDBNetwork] = true
	}
	return has
}

// overGranted returns one line per thing a Sluice function holds in the
// template that its access (functionAccess) does not need.
func overGranted(js map[string]any, p *StackProps) []string {
	r := newReach(js, netFacts{})
	var problems []string
	for _, fn := range r.ofType("AWS::Lambda::Function") {
		if r.props(fn)["Handler"] != "bootstrap" {
			continue // the provider framework's
		}
		name := strings.TrimPrefix(fmt.Sprint(r.props(fn)["Description"]), "Sluice ")
		a, ok := functionAccess[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s (%s): no entry in functionAccess", fn, name))
			continue
		}
		allowed := allowedHoldings(name, a)
		for _, h := range slices.Sorted(maps.Keys(r.holdings(fn, p))) {
			if !allowed[h] {
				problems = append(problems, fmt.Sprintf("%s holds %s, which its routes do not need", name, h))
			}
		}
	}
	return problems
}

// TestLeastPrivilege: in every variant, no function holds what its code
// does not use: admin-read (the rule and plan reads) has the database's
// read-only login alone (no Redis, not admitted by Redis's security
// group), only admin-write (the rule and plan writes) and migrate have the
// owner's login and the rules signing key, admin-stats is outside the VPC with CloudWatch and the
// subject hash key alone, and only the authorizer may invoke an upstream.
func TestLeastPrivilege(t *testing.T) {
	for _, v := range allVariants() {
		_, js := synth(t, v)
		for _, p := range overGranted(js, variantProps(v)) {
			t.Errorf("%s: %s", v, p)
		}
	}
}

// TestLeastPrivilegeWalk checks the walk on the full variant: it sees the
// read-only login of the read function, and each grant or setting added to
// an admin function that it does not need is reported.
func TestLeastPrivilegeWalk(t *testing.T) {
	_, js := synth(t, full)
	r := newReach(js, netFacts{})
	var get, create, subjects string
	for _, fn := range r.ofType("AWS::Lambda::Function") {
		switch r.props(fn)["Description"] {
		case "Sluice " + admin.FunctionRead:
			get = fn
		case "Sluice " + admin.FunctionWrite:
			create = fn
		case "Sluice " + admin.FunctionSubjects:
			subjects = fn
		}
	}
	if get == "" || create == "" || subjects == "" {
		t.Fatal("no admin-read, admin-write or admin-subjects function in the full template")
	}
	if h := r.holdings(get, variantProps(full)); !h[holdsDBReader] || h[holdsDBOwner] || h[holdsRedis] {
		t.Fatalf("admin-read holds %v, want the read-only login and neither Redis nor the owner's", h)
	}
	if h := r.holdings(create, variantProps(full)); !h[holdsDBOwner] || !h[holdsRedis] || !h[holdsSubjectKey] || !h[holdsSigningKey] {
		t.Fatalf("admin-write holds %v, want the owner's login, Redis, the subject hash key and the rules signing key", h)
	}
	if h := r.holdings(subjects, variantProps(full)); !h[holdsDBReader] || h[holdsDBOwner] || !h[holdsRedis] {
		t.Fatalf("admin-subjects holds %v, want the read-only login and Redis, not the owner's login", h)
	}
	// The owner's login as the functions name it: its attachment.
	ownerSecret := ""
	for _, id := range r.ofType("AWS::SecretsManager::SecretTargetAttachment") {
		if strings.HasPrefix(id, "DbSecret") {
			ownerSecret = id
		}
	}
	if ownerSecret == "" {
		t.Fatal("no DbSecret attachment in the full template")
	}
	createGroups := r.props(create)["VpcConfig"].(map[string]any)["SecurityGroupIds"]
	signingKey := logicalIDOr(js, "AWS::SecretsManager::Secret", "RulesSigningKey")
	grantSecret := func(fn, secret string) func(js map[string]any) {
		return func(js map[string]any) {
			role := refID(fnProps(js, fn)["Role"])
			js["Resources"].(map[string]any)["ExtraPolicy"] = map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{
				"Roles": []any{map[string]any{"Ref": role}},
				"PolicyDocument": map[string]any{"Statement": []any{map[string]any{
					"Action": []any{"secretsmanager:GetSecretValue"}, "Effect": "Allow", "Resource": map[string]any{"Ref": secret}}}},
			}}
		}
	}
	grantOwner := func(fn string) func(js map[string]any) { return grantSecret(fn, ownerSecret) }
	for _, tc := range []struct {
		name   string
		fn     string // the admin function given it
		mutate func(js map[string]any)
		want   string
	}{
		{"REDIS_URL", admin.FunctionRead, func(js map[string]any) {
			fnProps(js, get)["Environment"].(map[string]any)["Variables"].(map[string]any)["REDIS_URL"] = "rediss://x:6379"
		}, holdsRedis},
		{"the owner's secret", admin.FunctionRead, func(js map[string]any) {
			fnProps(js, get)["Environment"].(map[string]any)["Variables"].(map[string]any)["DB_SECRET_ARN"] = map[string]any{"Ref": ownerSecret}
		}, holdsDBOwner},
		{"a grant on the owner's secret", admin.FunctionRead, grantOwner(get), holdsDBOwner},
		{"the security group Redis admits", admin.FunctionRead, func(js map[string]any) {
			fnProps(js, get)["VpcConfig"].(map[string]any)["SecurityGroupIds"] = createGroups
		}, holdsRedis},
		{"a grant on the owner's secret", admin.FunctionSubjects, grantOwner(subjects), holdsDBOwner},
		{"a grant on the rules signing key", admin.FunctionSubjects, grantSecret(subjects, signingKey), holdsSigningKey},
		{"RULES_SIGNING_KEY_SECRET_ARN", admin.FunctionRead, func(js map[string]any) {
			fnProps(js, get)["Environment"].(map[string]any)["Variables"].(map[string]any)["RULES_SIGNING_KEY_SECRET_ARN"] = map[string]any{"Ref": signingKey}
		}, holdsSigningKey},
	} {
		var mutated map[string]any
		b, _ := json.Marshal(js)
		if err := json.Unmarshal(b, &mutated); err != nil {
			t.Fatal(err)
		}
		tc.mutate(mutated)
		want := tc.fn + " holds " + tc.want
		if got := overGranted(mutated, variantProps(full)); !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("%s given %s: overGranted = %q, want %q", tc.fn, tc.name, got, want)
		}
	}
}

// fnProps returns the Properties of the resource id of a template.
func fnProps(js map[string]any, id string) map[string]any {
	return js["Resources"].(map[string]any)[id].(map[string]any)["Properties"].(map[string]any)
}

// hashesSubject reports whether the admin function name serves a route
// under /subjects, whose code hashes the subject it is given.
func hashesSubject(name string) bool {
	for _, r := range admin.Routes() {
		if r.Function == name && strings.HasPrefix(r.Resource, "/subjects") {
			return true
		}
	}
	return false
}

// TestAccessMatchesMains ties functionAccess to the code: what each main
// builds (the internal/app graph it names) bounds what it can use, so its
// access must say the same. app.AdminRead dials no Redis and may run on
// the read-only role; app.AdminStats reaches CloudWatch alone;
// app.AdminFull and the decision path (decidemain.Run) use Redis and the
// subject hash key; app.NewMigrator owns the schema. Among the admin functions, exactly the one serving the rule and
// plan writes takes the owner's login, and it serves nothing else
// (internal/app's TestReaderRole runs every other route on the read-only
// role).
func TestAccessMatchesMains(t *testing.T) {
	// The graph each main builds: an admin class, the decision path
	// (decidemain), or the migrator.
	parts := regexp.MustCompile(`app\.Admin(Read|Stats|Full)\b|(decidemain)\.Run|app\.New(Migrator|EdgePublisher)\b`)
	for _, name := range sluice.Functions {
		a, ok := functionAccess[name]
		if !ok {
			t.Errorf("function %s has no entry in functionAccess (adminAccess for an admin function)", name)
			continue
		}
		src, err := os.ReadFile(filepath.Join(functionsDir, name, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, m := range parts.FindAllStringSubmatch(string(src), -1) {
			got[m[1]+m[2]+m[3]] = true
		}
		var want access
		switch {
		case got["Read"]:
		case got["Stats"]:
			// With the subject hash key when its route hashes a subject
			// (the Stats part reads it when configured).
			want.stats, want.key = true, hashesSubject(name)
		case got["Full"]:
			want.redis = true
			// The subject view shows a global rule's budget.
			if slices.ContainsFunc(admin.Routes(), func(r admin.RouteInfo) bool {
				return r.Function == name && r.Name == admin.RouteSubjectLimits
			}) {
				want.ledger = ledgerRead
			}
		case got["decidemain"]:
			want.redis, want.ledger = true, ledgerDecide
		case got["EdgePublisher"]:
			// The outbox and the rules snapshot in Redis, the store out: no key, no database.
			want.redis, want.publish = true, true
		case got["Migrator"]:
			// It publishes the rules snapshot, signed, after migrating.
			want.write, want.redis, want.sign = true, true, true
		default:
			t.Errorf("functions/%s/main.go names no app part", name)
			continue
		}
		want.write = want.write || a.write // checked against the routes below
		// The full admin signs the snapshot it publishes after a write.
		want.sign = want.sign || got["Full"] && want.write
		if a != want {
			t.Errorf("%s: functionAccess %+v, but its main builds %v: want %+v", name, a, slices.Sorted(maps.Keys(got)), want)
		}
	}
	served := map[string]bool{}
	for _, r := range admin.Routes() {
		served[r.Function] = true
		a, ok := adminAccess[r.Function]
		if !ok {
			t.Errorf("route %q: its function %s has no entry in adminAccess", r.Name, r.Function)
			continue
		}
		// POST /batch writes rules and plans of a set in one transaction.
		writes := r.Method != "GET" && (strings.HasPrefix(r.Resource, "/rules") || strings.HasPrefix(r.Resource, "/plans") || r.Resource == "/batch")
		if a.write != writes {
			t.Errorf("route %q: adminAccess[%s].write = %v, want %v (only rule and plan writes take the owner's login)", r.Name, r.Function, a.write, writes)
		}
	}
	for name := range adminAccess {
		if !served[name] {
			t.Errorf("adminAccess has %s, which serves no route of admin.Routes", name)
		}
	}
}
