package sluice_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/cdn"
)

// TestEdgeFunction synthesizes the edge as a user adds it: the function
// on cloudfront-js-2.0 associated with its store, its code within 10 KB
// holding no edge key (a dynamic reference), and the publisher's grant
// exactly the two data-plane calls on that store.
func TestEdgeFunction(t *testing.T) {
	stack := shopStack()
	if msg := panicOf(func() { sluice.NewEdgeFunction(stack, "Bad", &sluice.EdgeFunctionProps{}) }); !strings.Contains(msg, "API is required") {
		t.Errorf("no API: panicked %q", msg)
	}
	if msg := panicOf(func() {
		sluice.NewEdgeFunction(stack, "Bad2", &sluice.EdgeFunctionProps{API: jsii.String("a1b2c3d4e5"), SubjectSources: "cookie:x"})
	}); !strings.Contains(msg, "subject sources") {
		t.Errorf("bad sources: panicked %q", msg)
	}
	e := sluice.NewEdgeFunction(stack, "Edge", &sluice.EdgeFunctionProps{API: jsii.String("a1b2c3d4e5"), SubjectSources: "header:x-api-key,query:api_key"})
	role := awsiam.NewRole(stack, jsii.String("Publisher"), &awsiam.RoleProps{AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil)})
	e.GrantPublish(role)

	res, _ := resourcesOf(t, stack)
	var fns, stores, policies int
	for name, r := range res {
		switch r.Type {
		case "AWS::CloudFront::KeyValueStore":
			stores++
		case "AWS::CloudFront::Function":
			fns++
			cfg, _ := json.Marshal(r.Properties["FunctionConfig"])
			if !strings.Contains(string(cfg), `"Runtime":"cloudfront-js-2.0"`) || !strings.Contains(string(cfg), "KeyValueStoreAssociations") {
				t.Errorf("%s FunctionConfig = %s, want cloudfront-js-2.0 with the store associated", name, cfg)
			}
			code, _ := json.Marshal(r.Properties["FunctionCode"])
			if !strings.Contains(string(code), "resolve:secretsmanager:") {
				t.Errorf("%s code holds no dynamic reference to the edge key", name)
			}
			if len(code) > cdn.MaxFunctionBytes {
				t.Errorf("%s code is %d bytes as synthesized, over %d", name, len(code), cdn.MaxFunctionBytes)
			}
		case "AWS::IAM::Policy":
			policies++
			doc, _ := json.Marshal(r.Properties["PolicyDocument"])
			var d struct{ Statement []struct{ Action any } }
			_ = json.Unmarshal(doc, &d)
			if len(d.Statement) != 1 {
				t.Fatalf("publisher policy = %s, want one statement", doc)
			}
			acts, _ := json.Marshal(d.Statement[0].Action)
			if string(acts) != `["cloudfront-keyvaluestore:DescribeKeyValueStore","cloudfront-keyvaluestore:UpdateKeys"]` ||
				!strings.Contains(string(doc), "EdgeStore") {
				t.Errorf("publisher policy = %s, want the two calls on the edge's store", doc)
			}
		}
	}
	if fns != 1 || stores != 1 || policies != 1 {
		t.Errorf("%d functions, %d stores, %d policies; want one each", fns, stores, policies)
	}
}
