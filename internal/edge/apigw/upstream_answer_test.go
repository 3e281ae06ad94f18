package apigw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/identity"
)

// rawAuthorizer is an upstream that answers every event with the same
// bytes.
type rawAuthorizer string

func (a rawAuthorizer) Invoke(context.Context, []byte) ([]byte, error) { return []byte(a), nil }

// TestUpstreamAnswerShapes: an upstream's policy in every form IAM's
// grammar allows (Action and Resource as a string or an array, one
// Statement object or an array, NotAction and NotResource) is read as API
// Gateway reads it, through Invoke with the sample REST event (methodArn
// .../a1b2c3d4e5/prod/GET/orders/42). An allowed answer keeps the
// upstream's usageIdentifierKey; a denied one is Unauthorized (401), never
// the ACCESS_DENIED a rate limit answers with 429.
func TestUpstreamAnswerShapes(t *testing.T) {
	t.Parallel()
	const api = "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3d4e5"
	tests := []struct {
		name, policy string
		allow        bool
	}{
		{"strings", `{"Version":"2012-10-17","Statement":[{"Action":"execute-api:Invoke","Effect":"Allow","Resource":"` + api + `/*"}]}`, true},
		{"arrays", `{"Version":"2012-10-17","Statement":[{"Action":["execute-api:Invoke"],"Effect":"Allow","Resource":["` + api + `/*/GET/*"]}]}`, true},
		{"one statement object", `{"Version":"2012-10-17","Statement":{"Action":"execute-api:*","Effect":"Allow","Resource":"*"}}`, true},
		{"string deny wins", `{"Statement":[{"Action":"execute-api:Invoke","Effect":"Allow","Resource":"*"},{"Action":"execute-api:Invoke","Effect":"Deny","Resource":"` + api + `/prod/GET/orders/*"}]}`, false},
		{"deny NotResource, other route", `{"Statement":[{"Action":"*","Effect":"Allow","Resource":"*"},{"Action":"execute-api:Invoke","Effect":"Deny","NotResource":"` + api + `/prod/GET/orders/*"}]}`, true},
		{"deny NotResource, this route", `{"Statement":[{"Action":"*","Effect":"Allow","Resource":"*"},{"Action":"execute-api:Invoke","Effect":"Deny","NotResource":["` + api + `/prod/POST/*"]}]}`, false},
		{"allow NotAction of another service", `{"Statement":[{"NotAction":"s3:*","Effect":"Allow","Resource":"*"}]}`, true},
		{"allow NotAction of invoke", `{"Statement":[{"NotAction":["execute-api:Invoke"],"Effect":"Allow","Resource":"*"}]}`, false},
		{"allow other resource", `{"Statement":[{"Action":"execute-api:Invoke","Effect":"Allow","Resource":"` + api + `/prod/POST/orders"}]}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			answer := `{"principalId":"user-1","usageIdentifierKey":"plan-key-1","context":{"user":"user-1"},"policyDocument":` + tc.policy + `}`
			h := chainedAuthorizer(t, identity.NewUpstream(rawAuthorizer(answer), identity.UpstreamOptions{TTL: -1}), apigw.Options{})
			ev := sampleEvent[events.APIGatewayCustomAuthorizerRequestTypeRequest](t, "authorizer-rest.json")
			out, err := h.Invoke(context.Background(), mustJSON(t, ev))
			if !tc.allow {
				if !errors.Is(err, apigw.ErrUnauthorized) {
					t.Errorf("Invoke = %s, %v; want Unauthorized (the upstream denied)", out, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			var resp events.APIGatewayCustomAuthorizerResponse
			if err := json.Unmarshal(out, &resp); err != nil || !apigw.Evaluate(resp.PolicyDocument, ev.MethodArn) {
				t.Fatalf("Invoke = %s, %v; want an Allow of the methodArn", out, err)
			}
			if resp.PrincipalID != "user-1" || resp.UsageIdentifierKey != "plan-key-1" {
				t.Errorf("Invoke = principalId %q usageIdentifierKey %q; want the upstream's user-1 and plan-key-1", resp.PrincipalID, resp.UsageIdentifierKey)
			}
		})
	}
}

// TestUpstreamAnswerRefused: an answer Sluice cannot evaluate as API
// Gateway would is refused with Unauthorized (401), never a 500 and never
// an Allow, and the log line at error says why (without the subject).
func TestUpstreamAnswerRefused(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, answer, why string }{
		{"not JSON", `Allow`, "invalid character"},
		{"neither shape", `{"principalId":"user-1"}`, "neither policyDocument nor isAuthorized"},
		{"a Condition", `{"principalId":"user-1","policyDocument":{"Statement":[{"Action":"execute-api:Invoke","Effect":"Allow","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"203.0.113.0/24"}}}]}}`, "statement 1: has a Condition"},
		{"an Effect", `{"principalId":"user-1","policyDocument":{"Statement":[{"Action":"execute-api:Invoke","Effect":"Permit","Resource":"*"}]}}`, `Effect \"Permit\" is not Allow or Deny`},
		{"Action and NotAction", `{"principalId":"user-1","policyDocument":{"Statement":[{"Action":"*","NotAction":"s3:*","Effect":"Allow","Resource":"*"}]}}`, "exactly one of Action and NotAction"},
		{"no Resource", `{"principalId":"user-1","policyDocument":{"Statement":[{"Action":"*","Effect":"Allow"}]}}`, "exactly one of Resource and NotResource"},
		{"a number for Action", `{"principalId":"user-1","policyDocument":{"Statement":[{"Action":7,"Effect":"Allow","Resource":"*"}]}}`, "want a string or an array of strings, not a number"},
		{"Statement a string", `{"principalId":"user-1","policyDocument":{"Statement":"Allow"}}`, "want a statement object or an array of them, not a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := &bytes.Buffer{}
			h := chainedAuthorizer(t, identity.NewUpstream(rawAuthorizer(tc.answer), identity.UpstreamOptions{}),
				apigw.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			ev := sampleEvent[events.APIGatewayCustomAuthorizerRequestTypeRequest](t, "authorizer-rest.json")
			if out, err := h.Invoke(context.Background(), mustJSON(t, ev)); !errors.Is(err, apigw.ErrUnauthorized) {
				t.Errorf("Invoke = %s, %v; want Unauthorized", out, err)
			}
			line := logs.String()
			if !strings.Contains(line, `"level":"ERROR","msg":"upstream authorizer answer refused"`) || !strings.Contains(line, tc.why) {
				t.Errorf("log = %s\nwant an error line saying %q", line, tc.why)
			}
			if strings.Contains(line, "user-1") {
				t.Errorf("the upstream's principal reached the log: %s", line)
			}
		})
	}
}
