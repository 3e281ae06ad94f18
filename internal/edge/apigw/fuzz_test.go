package apigw_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/rules"
)

// The fuzz targets below send arbitrary payloads through Invoke, the
// Lambda entry point, and through the typed REST and HTTP handlers the
// Lambda runtime would call after decoding the payload itself. They need
// no Redis: the limiter talks to a port nothing listens on, so every
// decision is the rules' failure mode (fail-open allows, the fail-closed
// route rule denies), quickly, after the breaker opens.

// downRedis returns a client of a loopback port that refuses connections.
func downRedis(tb testing.TB) *redis.Client {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, Protocol: 2, MaxRetries: -1,
		DialTimeout: 50 * time.Millisecond})
	tb.Cleanup(func() { c.Close() })
	return c
}

// failureModes are rules on every api: 100 a minute API-wide (fail-open)
// and, on GET /orders/{id}, 2 a minute failing closed.
func failureModes() []rules.Rule {
	order := rules.Rule{ID: "r-order", API: "*", Route: "GET /orders/{id}", Subject: "*", Limit: new(int64(2)), Period: rules.Period(time.Minute),
		FailureMode: rules.FailClosed}
	return []rules.Rule{everywhere("r-api", 100, time.Minute), order}
}

// fuzzAuthorizer is the handler over the down Redis with failureModes;
// subjects from x-api-key, then api_key, then the client's address.
func fuzzAuthorizer(tb testing.TB) *apigw.Handler {
	tb.Helper()
	sources, err := identity.ParseSources("header:x-api-key,query:api_key,ip")
	if err != nil {
		tb.Fatal(err)
	}
	a := decision(downLimiter(tb), authorizer.Options{Sources: sources}, failureModes()...)
	return apigw.NewHandler(a, apigw.Options{Logger: jsonLog(io.Discard)})
}

// addEventSeeds adds the authorizer samples of events/ whose names start
// with prefix, so the corpus follows them.
func addEventSeeds(f *testing.F, prefix string) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "..", "events", prefix+"*.json"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no events/%s*.json samples: %v", prefix, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkInvoke runs payload through Invoke and checks the answer is one of
// what API Gateway can take: a policy or simple response with every
// context key, "Unauthorized", or an error for a payload that is no
// REQUEST authorizer event. It returns Invoke's answer.
func checkInvoke(t *testing.T, h *apigw.Handler, payload []byte) ([]byte, error) {
	t.Helper()
	out, err := h.Invoke(context.Background(), payload)
	if err != nil {
		msg := err.Error()
		if !errors.Is(err, apigw.ErrUnauthorized) && !strings.HasPrefix(msg, "decode authorizer event") &&
			!strings.HasPrefix(msg, "authorizer event type") {
			t.Fatalf("Invoke(%q) error = %v, want Unauthorized or a decode error", payload, err)
		}
		if strings.HasPrefix(msg, "decode authorizer event") && json.Valid(payload) && bytes.HasPrefix(bytes.TrimSpace(payload), []byte("{")) &&
			!strings.Contains(msg, "cannot unmarshal") {
			t.Fatalf("Invoke(%q) could not decode a JSON object: %v", payload, err)
		}
		return nil, err
	}
	var reply struct {
		PrincipalID    *string        `json:"principalId"`
		PolicyDocument *struct{}      `json:"policyDocument"`
		IsAuthorized   *bool          `json:"isAuthorized"`
		Context        map[string]any `json:"context"`
	}
	if err := json.Unmarshal(out, &reply); err != nil {
		t.Fatalf("Invoke(%q) reply %s is not JSON: %v", payload, out, err)
	}
	if (reply.PolicyDocument == nil) == (reply.IsAuthorized == nil) {
		t.Fatalf("Invoke(%q) reply %s: want exactly one of a policy and isAuthorized", payload, out)
	}
	if reply.PrincipalID != nil {
		if b, err := hex.DecodeString(*reply.PrincipalID); err != nil || len(b) != 16 {
			t.Fatalf("Invoke(%q) principalId %q, want a subject hash (32 hex digits)", payload, *reply.PrincipalID)
		}
	}
	for _, k := range []string{headers.KeyLimit, headers.KeyRemaining, headers.KeyReset, headers.KeyRetryAfter,
		headers.KeyRateLimitPolicy, headers.KeyRateLimit, headers.KeyRule, headers.KeyFailOpen} {
		if _, ok := reply.Context[k]; !ok {
			t.Fatalf("Invoke(%q) reply %s: context lacks %q", payload, out, k)
		}
	}
	return out, nil
}

// sameAnswer checks that a typed handler, which the Lambda runtime calls on
// a payload it could decode as its event, answered (typed, typedErr) as
// Invoke did (out, err). Invoke decodes the fields of both event kinds, so
// it may refuse a payload whose field of the other kind has a wrong type.
func sameAnswer(t *testing.T, payload []byte, typed any, typedErr error, out []byte, err error) {
	t.Helper()
	switch {
	case errors.Is(err, apigw.ErrUnauthorized):
		if !errors.Is(typedErr, apigw.ErrUnauthorized) {
			t.Fatalf("typed handler(%q) = %+v, %v; Invoke said Unauthorized", payload, typed, typedErr)
		}
	case err != nil:
		// A decode error of Invoke's.
	case typedErr != nil:
		t.Fatalf("typed handler(%q) error = %v where Invoke answered %s", payload, typedErr, out)
	default:
		b, _ := json.Marshal(typed)
		if !bytes.Equal(b, out) {
			t.Fatalf("typed handler(%q) = %s, Invoke = %s; want the same answer", payload, b, out)
		}
	}
}

// FuzzInvokeREST: any payload gives an Allow or Deny policy for its method
// ARN, Unauthorized, or a decode error, never a panic; and where the Lambda
// runtime could decode it as a REST API REQUEST event, the typed REST
// handler answers exactly as Invoke does.
func FuzzInvokeREST(f *testing.F) {
	addEventSeeds(f, "authorizer-rest")
	h := fuzzAuthorizer(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		out, err := checkInvoke(t, h, payload)
		var ev events.APIGatewayCustomAuthorizerRequestTypeRequest
		var kind struct{ Version, Type string }
		if json.Unmarshal(payload, &ev) != nil || json.Unmarshal(payload, &kind) != nil ||
			kind.Version == "2.0" || (kind.Type != "" && kind.Type != "REQUEST") {
			return
		}
		resp, typedErr := h.REST(context.Background(), ev)
		if typedErr == nil {
			st := resp.PolicyDocument.Statement
			if len(st) != 1 || (st[0].Effect != "Allow" && st[0].Effect != "Deny") || len(st[0].Resource) != 1 || st[0].Resource[0] != ev.MethodArn {
				t.Fatalf("REST(%q) policy %+v, want one Allow or Deny statement on %q", payload, resp.PolicyDocument, ev.MethodArn)
			}
		}
		sameAnswer(t, payload, resp, typedErr, out, err)
	})
}

// FuzzInvokeHTTP: the same for HTTP API (payload format 2.0) events and
// the typed HTTP handler.
func FuzzInvokeHTTP(f *testing.F) {
	addEventSeeds(f, "authorizer-http")
	h := fuzzAuthorizer(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		out, err := checkInvoke(t, h, payload)
		var ev events.APIGatewayV2CustomAuthorizerV2Request
		if json.Unmarshal(payload, &ev) != nil || ev.Version != "2.0" {
			return
		}
		resp, typedErr := h.HTTP(context.Background(), ev)
		sameAnswer(t, payload, resp, typedErr, out, err)
	})
}

// FuzzUpstreamAnswer sends the sample REST event through Invoke behind an
// upstream answering the fuzzed bytes: whatever it answers, Sluice answers
// with a policy or Unauthorized (401), never another error (500) or a
// panic; an answer with no Allow in it never gets an Allow.
func FuzzUpstreamAnswer(f *testing.F) {
	for _, s := range []string{
		`{"principalId":"u","policyDocument":{"Version":"2012-10-17","Statement":[{"Action":"execute-api:Invoke","Effect":"Allow","Resource":"*"}]}}`,
		`{"principalId":"u","policyDocument":{"Statement":{"Action":["execute-api:*"],"Effect":"Deny","NotResource":"arn:*"}},"usageIdentifierKey":"k"}`,
		`{"isAuthorized":true,"context":{"tenant":"acme"}}`,
		`{"isAuthorized":false}`, `{"principalId":"u"}`, `null`, `[]`, `"Allow"`,
	} {
		f.Add([]byte(s))
	}
	payload := sample(f, "authorizer-rest.json")
	sources, _ := identity.ParseSources("principal")
	a := decision(downLimiter(f), authorizer.Options{Sources: sources})
	f.Fuzz(func(t *testing.T, answer []byte) {
		h := apigw.NewHandler(a, apigw.Options{Logger: jsonLog(io.Discard),
			Upstream: identity.NewUpstream(rawAuthorizer(answer), identity.UpstreamOptions{})})
		out, err := h.Invoke(context.Background(), payload)
		if err != nil {
			if !errors.Is(err, apigw.ErrUnauthorized) {
				t.Fatalf("Invoke behind %q: error %v, want a policy or Unauthorized", answer, err)
			}
			return
		}
		var resp events.APIGatewayCustomAuthorizerResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("Invoke behind %q = %s: %v", answer, out, err)
		}
		canon := answer // escapes such as \u0041 resolved
		var v any
		if json.Unmarshal(answer, &v) == nil {
			canon, _ = json.Marshal(v)
		}
		if !bytes.Contains(bytes.ToLower(canon), []byte("allow")) && !bytes.Contains(canon, []byte("true")) &&
			apigw.Evaluate(resp.PolicyDocument, "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3d4e5/prod/GET/orders/42") {
			t.Fatalf("Invoke behind %q = %s: an Allow the upstream never gave", answer, out)
		}
	})
}
