package events_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/events"
)

// kinds maps a sample's file-name prefix to the type it decodes into,
// longest prefix first.
var kinds = []struct {
	prefix string
	event  func() any
}{
	{"authorizer-rest", func() any { return new(events.APIGatewayCustomAuthorizerRequestTypeRequest) }},
	{"authorizer-http", func() any { return new(events.APIGatewayV2CustomAuthorizerV2Request) }},
	{"check-url", func() any { return new(events.LambdaFunctionURLRequest) }},
	{"check", func() any { return new(events.APIGatewayProxyRequest) }},
	{"admin-", func() any { return new(events.APIGatewayProxyRequest) }},
	{"migrate", func() any { return new(migrateEvent) }},
}

// migrateEvent is the CloudFormation custom resource request the CDK
// Provider framework passes to the migrate function (its onEvent handler):
// CloudFormation's request with ResponseURL redacted to "...", since the
// framework answers CloudFormation itself. cfn.Event lacks ServiceToken.
type migrateEvent struct {
	cfn.Event
	ServiceToken string `json:"ServiceToken"`
}

// TestSamples decodes every sample into the aws-lambda-go type its file
// name says, refusing fields the type does not have, and fails for a file
// named after no function. The e2e package runs the samples through the
// handlers.
func TestSamples(t *testing.T) {
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample events: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(file, ".json"), func(t *testing.T) {
			t.Parallel()
			var v any
			for _, k := range kinds {
				if strings.HasPrefix(file, k.prefix) {
					v = k.event()
					break
				}
			}
			if v == nil {
				t.Fatalf("%s: no event type for this file name; name it after its function (authorizer-rest*, authorizer-http*, check*, check-url*, admin-*, migrate*)", file)
			}
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("decode %s into %T: %v", file, v, err)
			}
			// migrate's handler is its main package, which only the
			// emulator runs: check here that the sample is what the
			// Provider framework sends for this stack's resource.
			if ev, ok := v.(*migrateEvent); ok {
				if ev.RequestType != cfn.RequestCreate || ev.ResourceType != "Custom::SluiceMigrate" || ev.ServiceToken == "" ||
					ev.ResourceProperties["ServiceToken"] != ev.ServiceToken || ev.ResourceProperties["Nonce"] == nil {
					t.Errorf("%s = %+v; want a Create of Custom::SluiceMigrate with a ServiceToken and a Nonce property", file, ev)
				}
			}
		})
	}
}
