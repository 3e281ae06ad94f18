package apigw_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
)

// chainFixture is newFixture limiting by the upstream's context key key.
func chainFixture(t *testing.T, key string) fixture {
	t.Helper()
	return newFixtureWith(t, authorizer.Options{Sources: []identity.Source{{Kind: identity.SourceContext, Name: key}}})
}

// TestChainRESTFromJSON is the upstream answer as an invoked Lambda returns
// it (JSON, so a numeric context value decodes as float64): ChainREST limits
// the tenant it names on the route rule (2 a minute), answers the
// upstream's Deny with Unauthorized without a limiter call, and logs a
// missing context key at warn without the subject.
func TestChainRESTFromJSON(t *testing.T) {
	t.Parallel()
	f := chainFixture(t, "tenant")
	ev := restEvent("")
	var up events.APIGatewayCustomAuthorizerResponse
	if err := json.Unmarshal([]byte(`{"principalId": "user-secret-7",
		"policyDocument": {"Version": "2012-10-17", "Statement": [{"Action": ["execute-api:Invoke"], "Effect": "Allow", "Resource": ["arn:aws:execute-api:eu-west-1:123456789012:a1b2c3/*"]}]},
		"context": {"tenant": 4217, "plan": "gold"}}`), &up); err != nil {
		t.Fatal(err)
	}

	var effects []string
	for range 3 {
		got, err := f.auth.ChainREST(context.Background(), ev, up)
		if err != nil {
			t.Fatalf("ChainREST: %v", err)
		}
		effects = append(effects, got.PolicyDocument.Statement[0].Effect)
		if got.PrincipalID != "user-secret-7" || got.Context["plan"] != "gold" || got.Context[headers.KeyRule] != "r-order" {
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
	calls := f.lim.Stats().Calls
	if got, err := f.auth.ChainREST(context.Background(), ev, deny); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("upstream Deny = %+v, %v; want Unauthorized (401), not a Deny the gateway sends as a 429", got, err)
	}
	if f.lim.Stats().Calls != calls {
		t.Error("the limiter was called for the upstream's Deny")
	}

	team := chainFixture(t, "team")
	if _, err := team.auth.ChainREST(context.Background(), ev, up); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("missing context key: err = %v, want Unauthorized", err)
	}
	logs := team.logs.String()
	if !strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, `context key \"team\"`) {
		t.Errorf("no warn line naming the missing key in the logs:\n%s", logs)
	}
	if logs := f.logs.String() + logs; strings.Contains(logs, "user-secret-7") || strings.Contains(logs, "4217") {
		t.Errorf("a subject reached the logs:\n%s", logs)
	}
}

// TestChainMergeContext: the answer's context is the upstream's, as it gave
// it (a number stays a number), with Sluice's keys winning; a value API
// Gateway refuses in a context is dropped; the upstream's map is not
// modified. The same for an answer in process and one invoked.
func TestChainMergeContext(t *testing.T) {
	t.Parallel()
	upCtx := func() map[string]any {
		return map[string]any{"tenant": "acme", "limit": "forged", "retryAfter": 0, "rateLimit": "forged", "seats": 3, "admin": true,
			"nested": map[string]any{"x": 1}, "none": nil}
	}
	want := map[string]any{"tenant": "acme", "seats": 3, "admin": true}
	check := func(name string, got map[string]any) {
		t.Helper()
		for k, v := range want {
			if !cmp.Equal(got[k], v) {
				t.Errorf("%s: context[%q] = %#v, want the upstream's %#v", name, k, got[k], v)
			}
		}
		if got[headers.KeyLimit] != int64(100) || got[headers.KeyRetryAfter] != int64(0) || got[headers.KeyRateLimit] == "forged" {
			t.Errorf("%s: context = %v, want Sluice's limit, retryAfter and rateLimit", name, got)
		}
		if _, ok := got["nested"]; ok {
			t.Errorf("%s: context = %v, want no nested (API Gateway refuses an object)", name, got)
		}
		if _, ok := got["none"]; ok {
			t.Errorf("%s: context = %v, want no none (API Gateway refuses null)", name, got)
		}
	}
	f := chainFixture(t, "tenant")
	ev := restEvent("")
	ev.MethodArn, ev.Resource = "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3/prod/GET/x", "/x"
	in := upCtx()
	up := events.APIGatewayCustomAuthorizerResponse{PrincipalID: "u", Context: in, PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{
		Statement: []events.IAMPolicyStatement{{Action: []string{"execute-api:Invoke"}, Effect: "Allow", Resource: []string{"*"}}}}}
	got, err := f.auth.ChainREST(context.Background(), ev, up)
	if err != nil {
		t.Fatal(err)
	}
	check("in process", got.Context)
	if diff := cmp.Diff(upCtx(), in); diff != "" {
		t.Errorf("the upstream's context was modified (-want +got):\n%s", diff)
	}

	// Invoked: its JSON answer, through Invoke and the answer's JSON.
	h := apigw.NewHandler(f.a, apigw.Options{Upstream: identity.NewUpstream(answerInvoker(mustJSON(t, up)), identity.UpstreamOptions{})})
	raw, err := h.Invoke(context.Background(), mustJSON(t, ev))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct{ Context map[string]any }
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	want["seats"], want["tenant"] = 3.0, "acme" // as JSON decodes them
	resp.Context[headers.KeyLimit] = int64(resp.Context[headers.KeyLimit].(float64))
	resp.Context[headers.KeyRetryAfter] = int64(resp.Context[headers.KeyRetryAfter].(float64))
	check("invoked", resp.Context)
}

// answerInvoker is an upstream authorizer Lambda that answers every event
// with its JSON.
type answerInvoker []byte

func (a answerInvoker) Invoke(context.Context, []byte) ([]byte, error) { return a, nil }
