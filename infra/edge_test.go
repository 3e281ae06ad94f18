package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/edge/apigw"
)

// TestEdgeStack reads the CDN edge back from the template -c
// edge=cloudfront synthesizes: the distribution in front of the demo
// API with the origin header from its secret and the function on viewer
// request; the publisher scheduled once a minute, one at a time, with
// the store's two actions and Redis but not the subject key; the
// authorizer requiring the header (an identity source) and reading both
// secrets.
func TestEdgeStack(t *testing.T) {
	if originVerifyHeader != apigw.OriginVerifyHeader {
		t.Fatalf("infra sends %q, the authorizer requires %q", originVerifyHeader, apigw.OriginVerifyHeader)
	}
	_, js := synth(t, edged)
	str := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	originSecret := logicalID(t, js, "AWS::SecretsManager::Secret", "OriginVerify")
	edgeKey := logicalID(t, js, "AWS::SecretsManager::Secret", "EdgeKey")
	subjectKey := logicalID(t, js, "AWS::SecretsManager::Secret", "SubjectHmacKey")
	fnID := logicalID(t, js, "AWS::CloudFront::Function", "EdgeFunction")
	storeID := logicalID(t, js, "AWS::CloudFront::KeyValueStore", "EdgeStore")
	demo := logicalID(t, js, "AWS::ApiGateway::RestApi", "DemoApi")

	dists := resources(js, "AWS::CloudFront::Distribution")
	if len(dists) != 1 {
		t.Fatalf("distributions = %d, want 1", len(dists))
	}
	cfg := dists[0].Props["DistributionConfig"].(map[string]any)
	origins := cfg["Origins"].([]any)
	if len(origins) != 1 {
		t.Fatalf("origins = %s, want one", str(origins))
	}
	origin := str(origins[0])
	for _, want := range []string{`"HeaderName":"X-Origin-Verify"`, `{"Ref":"` + demo + `"}`, "resolve:secretsmanager:", `"Ref":"` + originSecret + `"`} {
		if !strings.Contains(origin, want) {
			t.Errorf("origin %s lacks %s", origin, want)
		}
	}
	behavior := str(cfg["DefaultCacheBehavior"])
	for _, want := range []string{`"EventType":"viewer-request"`, `"FunctionARN":{"Fn::GetAtt":["` + fnID + `","FunctionARN"]}`, `"DELETE"`, `"ViewerProtocolPolicy":"https-only"`} {
		if !strings.Contains(behavior, want) {
			t.Errorf("default behavior %s lacks %s", behavior, want)
		}
	}
	if !strings.Contains(str(resources(js, "AWS::CloudFront::Function")[0].Props), storeID) {
		t.Errorf("the function is not associated with the store %s", storeID)
	}

	pub := logicalID(t, js, "AWS::Lambda::Function", "EdgePublisher")
	var pubFn resource
	for _, r := range resources(js, "AWS::Lambda::Function") {
		if r.ID == pub {
			pubFn = r
		}
	}
	if got := pubFn.Props["ReservedConcurrentExecutions"]; got != float64(1) {
		t.Errorf("publisher ReservedConcurrentExecutions = %v, want 1", got)
	}
	if got := pubFn.Props["Timeout"]; got != float64(60) {
		t.Errorf("publisher Timeout = %v, want 60", got)
	}
	env := envOf(pubFn)
	if !strings.Contains(str(env["EDGE_STORE_ARN"]), storeID) || env["REDIS_URL"] == nil {
		t.Errorf("publisher environment %s: want EDGE_STORE_ARN (the store) and REDIS_URL", str(env))
	}
	if _, ok := env["SUBJECT_HMAC_KEY_SECRET_ARN"]; ok {
		t.Errorf("publisher environment names the subject key: it moves hashed entries")
	}
	rules := resources(js, "AWS::Events::Rule")
	if len(rules) != 1 || rules[0].Props["ScheduleExpression"] != "rate(1 minute)" || !strings.Contains(str(rules[0].Props["Targets"]), pub) {
		t.Errorf("schedules %s: want one, rate(1 minute), targeting %s", str(rules), pub)
	}
	var kvs []string
	for _, r := range resources(js, "AWS::IAM::Policy") {
		p := str(r.Props)
		if !strings.Contains(p, "cloudfront-keyvaluestore:") {
			continue
		}
		if !strings.Contains(str(r.Props["Roles"]), "EdgePublisher") {
			t.Errorf("%s grants the store to %s, not the publisher", r.ID, str(r.Props["Roles"]))
		}
		if strings.Contains(p, subjectKey) {
			t.Errorf("the publisher's policy %s grants the subject key", r.ID)
		}
		for _, s := range r.Props["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := s.(map[string]any)
			if a := str(st["Action"]); strings.Contains(a, "cloudfront-keyvaluestore:") {
				kvs = append(kvs, a, str(st["Resource"]))
			}
		}
	}
	want := []string{`["cloudfront-keyvaluestore:DescribeKeyValueStore","cloudfront-keyvaluestore:UpdateKeys"]`, `{"Fn::GetAtt":["` + storeID + `","Arn"]}`}
	if !slices.Equal(kvs, want) {
		t.Errorf("store grants %v, want %v", kvs, want)
	}

	auth := resources(js, "AWS::ApiGateway::Authorizer")
	for _, a := range auth {
		if src, _ := a.Props["IdentitySource"].(string); !strings.Contains(src, "method.request.header.X-Origin-Verify") {
			t.Errorf("authorizer %s IdentitySource %q: want X-Origin-Verify among them (401 without it, the function not invoked)", a.ID, src)
		}
	}
	if len(auth) == 0 {
		t.Error("no REST authorizer")
	}
	for _, r := range sluiceFunctions(js) {
		env := str(envOf(r))
		hasKey, hasOrigin := strings.Contains(env, `"EDGE_KEY_SECRET_ARN":{"Ref":"`+edgeKey), strings.Contains(env, `"ORIGIN_VERIFY_SECRET_ARN":{"Ref":"`+originSecret)
		switch {
		case strings.HasPrefix(r.ID, "Authorizer"):
			if !hasKey || !hasOrigin {
				t.Errorf("authorizer environment %s: want EDGE_KEY_SECRET_ARN and ORIGIN_VERIFY_SECRET_ARN", env)
			}
		case strings.HasPrefix(r.ID, "Check") || strings.HasPrefix(r.ID, "AdminSubjects") || strings.HasPrefix(r.ID, "AdminWrite"):
			if !hasKey || hasOrigin {
				t.Errorf("%s environment: edge key %v, origin %v; want the key alone (they record or delete entries)", r.ID, hasKey, hasOrigin)
			}
		default:
			if hasKey || hasOrigin {
				t.Errorf("%s environment: edge key %v, origin %v; want neither", r.ID, hasKey, hasOrigin)
			}
		}
	}
	outs, _ := js["Outputs"].(map[string]any)
	if _, ok := outs["EdgeDomain"]; !ok {
		t.Error("no EdgeDomain output for sluice verify")
	}
}

// TestEdgeProps: the edge is CloudFront or nothing, fronts the demo API,
// and its publisher has a route out of the stack's own VPC.
func TestEdgeProps(t *testing.T) {
	for _, p := range []StackProps{{Edge: "fastly", NatGateways: 1}, {Edge: EdgeCloudFront, NoDemoAPI: true, NatGateways: 1}, {Edge: EdgeCloudFront}} {
		if err := p.validate(); err == nil || !strings.Contains(err.Error(), "Edge") {
			t.Errorf("validate(%+v) = %v, want an error naming Edge", p, err)
		}
	}
	for _, p := range []StackProps{{Edge: EdgeCloudFront, NatGateways: 1}, {Edge: EdgeCloudFront, VpcID: "vpc-1"}} {
		if err := p.validate(); err != nil {
			t.Errorf("validate(%+v) = %v", p, err)
		}
	}
}
