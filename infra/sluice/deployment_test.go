package sluice_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// TestAuthorizerJWT: a jwt: subject source needs the issuer and audience,
// or the authorizer would fail every cold start with JWT_ISSUER required;
// the construct refuses it, and the JWT props become the JWT_* variables.
func TestAuthorizerJWT(t *testing.T) {
	stack := shopStack()
	asset := "testdata/authorizer"
	if msg := panicOf(func() {
		sluice.NewAuthorizer(stack, "NoIssuer", &sluice.AuthorizerProps{FunctionProps: sluice.FunctionProps{AssetDir: asset}, SubjectSources: "jwt:sub"})
	}); !strings.Contains(msg, "set JWT (Issuer and Audience)") {
		t.Errorf("jwt:sub without JWT: panic %q, want one asking for JWT", msg)
	}
	if msg := panicOf(func() {
		sluice.NewAuthorizer(stack, "NoAudience", &sluice.AuthorizerProps{FunctionProps: sluice.FunctionProps{AssetDir: asset},
			SubjectSources: "jwt:sub", JWT: &sluice.JWT{Issuer: "https://idp.example"}})
	}); !strings.Contains(msg, "JWT needs Issuer and Audience") {
		t.Errorf("JWT without audience: panic %q, want one naming Audience", msg)
	}
	authorizedAPI(stack, sluice.AuthorizerProps{SubjectSources: "jwt:sub",
		JWT: &sluice.JWT{Issuer: "https://idp.example", Audience: []string{"a", "b"}, TokenUse: "access", JWKSURL: "https://idp.example/keys"}}, nil)
	_, js := resourcesOf(t, stack)
	for _, want := range []string{`"JWT_ISSUER":"https://idp.example"`, `"JWT_AUDIENCE":"a,b"`, `"JWT_TOKEN_USE":"access"`, `"JWT_JWKS_URL":"https://idp.example/keys"`} {
		if !strings.Contains(js, want) {
			t.Errorf("template lacks %s", want)
		}
	}
}

// TestReadOutputs: the outputs file of `cdk deploy --outputs-file`, and
// what it must hold.
func TestReadOutputs(t *testing.T) {
	dir := t.TempDir()
	write := func(v any) string {
		p := filepath.Join(dir, fmt.Sprint(len(v.(map[string]map[string]string)["Sluice"]))+".json")
		b, _ := json.Marshal(v)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := map[string]string{
		sluice.OutputVpcID: "vpc-1", sluice.OutputAvailabilityZones: "eu-west-1a, eu-west-1b", sluice.OutputSubnetIDs: "subnet-1,subnet-2",
		sluice.OutputSecurityGroupIDs: "sg-1", sluice.OutputRedisURL: "rediss://r:6379", sluice.OutputDatabaseSecretArn: "arn:db",
		sluice.OutputSubjectKeySecretArn: "arn:key", "AdminApiUrl": "https://x",
	}
	a, err := sluice.ReadOutputs(write(map[string]map[string]string{"Sluice": full}), "Sluice")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%v %v %v %v", a.AvailabilityZones, a.SubnetIDs, a.SecurityGroupIDs, a.SubjectKeySecretArn); got != "[eu-west-1a eu-west-1b] [subnet-1 subnet-2] [sg-1] arn:key" {
		t.Errorf("ReadOutputs = %s", got)
	}
	noSubnets := map[string]string{sluice.OutputVpcID: "vpc-1", sluice.OutputRedisURL: "rediss://r:6379", sluice.OutputDatabaseSecretArn: "arn:db"}
	if _, err := sluice.ReadOutputs(write(map[string]map[string]string{"Sluice": noSubnets}), "Sluice"); err == nil ||
		!strings.Contains(err.Error(), "cannot reach its Redis") {
		t.Errorf("ReadOutputs(a VPC without subnets) error = %v, want one saying why they are needed", err)
	}
	if _, err := sluice.ReadOutputs(write(map[string]map[string]string{"Sluice": full}), "Other"); err == nil || !strings.Contains(err.Error(), `no stack "Other"`) {
		t.Errorf("ReadOutputs(other stack) error = %v", err)
	}
}

// TestNewAlarms: the construct's alarms need a topic, and watch the 5XX of
// the APIs the authorizer's gateway responses were installed on.
func TestNewAlarms(t *testing.T) {
	stack := shopStack()
	a, api := authorizedAPI(stack, sluice.AuthorizerProps{}, &awsapigateway.RestApiProps{RestApiName: jsii.String("shop")})
	a.AddGatewayResponses(stack, "RateLimit", api)
	if msg := panicOf(func() { a.NewAlarms(stack, "X", &sluice.AlarmsProps{}) }); !strings.Contains(msg, "Topic is required") {
		t.Errorf("NewAlarms without a topic: panic %q", msg)
	}
	topic := awssns.NewTopic(stack, jsii.String("Oncall"), nil)
	al := a.NewAlarms(stack, "RateLimit", &sluice.AlarmsProps{Topic: topic, APINames: []string{"billing"}})
	if len(al.ServerErrors) != 2 {
		t.Errorf("5XX alarms = %d, want 2 (shop, billing)", len(al.ServerErrors))
	}
	res, js := resourcesOf(t, stack)
	alarms := 0
	for id, r := range res {
		if r.Type != "AWS::CloudWatch::Alarm" {
			continue
		}
		alarms++
		acts, _ := json.Marshal(r.Properties["AlarmActions"])
		if !strings.Contains(string(acts), `"Ref":"Oncall`) {
			t.Errorf("alarm %s AlarmActions = %s, want the topic", id, acts)
		}
	}
	if alarms != 9 {
		t.Errorf("alarms = %d, want 9 (fail-open, fail-closed, breaker, rules refused, throttles, p99, start failures, two APIs' 5XX)", alarms)
	}
	for _, name := range []string{`"Value":"shop"`, `"Value":"billing"`} {
		if !strings.Contains(js, name) {
			t.Errorf("no 5XX alarm with ApiName %s", name)
		}
	}
}
