package apigw_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer/apigw"
)

// TestChainRESTFromJSON is the upstream answer as an invoked Lambda returns
// it (JSON, so a numeric context value decodes as float64): ChainREST limits
// the tenant it names on the route rule (2 a minute), answers the
// upstream's Deny with Unauthorized, and logs a missing context key at warn without the subject.
func TestChainRESTFromJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ev := restEvent("")
	var up events.APIGatewayCustomAuthorizerResponse
	if err := json.Unmarshal([]byte(`{"principalId": "user-secret-7",
		"policyDocument": {"Version": "2012-10-17", "Statement": [{"Action": ["execute-api:Invoke"], "Effect": "Allow", "Resource": ["arn:aws:execute-api:eu-west-1:123456789012:a1b2c3/*"]}]},
		"context": {"tenant": 4217, "plan": "gold"}}`), &up); err != nil {
		t.Fatal(err)
	}

	var effects []string
	for range 3 {
		got, err := f.auth.ChainREST(context.Background(), ev, up, "tenant")
		if err != nil {
			t.Fatalf("ChainREST: %v", err)
		}
		effects = append(effects, got.PolicyDocument.Statement[0].Effect)
		if got.PrincipalID != "user-secret-7" || got.Context["plan"] != "gold" || got.Context[apigw.KeyRule] != "r-order" {
			t.Errorf("answer = principal %q context %v, want the upstream's principal and plan, rule r-order", got.PrincipalID, got.Context)
		}
		if _, err := json.Marshal(got); err != nil {
			t.Errorf("the answer does not marshal: %v", err)
		}
	}
	if strings.Join(effects, " ") != "Allow Allow Deny" {
		t.Errorf("effects = %v, want Allow Allow Deny", effects)
	}

	deny := up
	deny.PolicyDocument.Statement = []events.IAMPolicyStatement{{Action: []string{"execute-api:Invoke"}, Effect: "Deny", Resource: []string{"*"}}}
	if got, err := f.auth.ChainREST(context.Background(), ev, deny, "tenant"); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("upstream Deny = %+v, %v; want Unauthorized (401), not a Deny the gateway sends as a 429", got, err)
	}

	if _, err := f.auth.ChainREST(context.Background(), ev, up, "team"); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("missing context key: err = %v, want Unauthorized", err)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, `context key \"team\"`) {
		t.Errorf("no warn line naming the missing key in the logs:\n%s", logs)
	}
	if strings.Contains(logs, "user-secret-7") || strings.Contains(logs, "4217") {
		t.Errorf("a subject reached the logs:\n%s", logs)
	}
}
