package ratelimit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/ratelimit"
)

// The upstream repros of the Lambda path (internal/edge/apigw's
// TestUpstreamCache*), in process: the team's handler runs for every
// event, and what it does not allow on a route is never granted there,
// whatever it allowed before, and is Unauthorized (401), not the Deny a
// rate limit answers with (429 with Retry-After).

const publicARN = "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3d4e5/prod/GET/public"

// TestWrapRESTAnswersPerRoute: a team handler that lets user-1 call GET
// /public only; after an allowed GET /public, GET /admin is Unauthorized.
func TestWrapRESTAnswersPerRoute(t *testing.T) {
	rl := newSetup(t).limiter(t, "")
	h := rl.WrapREST(func(_ context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
		// An answer for the public route, whatever the route asked.
		return events.APIGatewayCustomAuthorizerResponse{PrincipalID: "user-1", PolicyDocument: policy("Allow", publicARN),
			UsageIdentifierKey: "plan-key-1"}, nil
	})
	ev := sample[events.APIGatewayCustomAuthorizerRequestTypeRequest](t, "authorizer-rest.json")
	ev.MethodArn, ev.Path, ev.Resource = publicARN, "/public", "/public"
	got, err := h(context.Background(), ev)
	if err != nil || got.PolicyDocument.Statement[0].Effect != "Allow" || got.UsageIdentifierKey != "plan-key-1" {
		t.Fatalf("GET /public = %+v, %v; want the team's Allow with its usage key", got, err)
	}
	for _, arn := range []string{strings.Replace(publicARN, "GET/public", "GET/admin", 1), strings.Replace(publicARN, "a1b2c3d4e5", "otherapi01", 1)} {
		ev.MethodArn = arn
		if got, err := h(context.Background(), ev); !errors.Is(err, ratelimit.ErrUnauthorized) {
			t.Errorf("%s after GET /public = %+v, %v; want Unauthorized", arn, got, err)
		}
	}
}

// TestWrapHTTPAnswersPerRoute: the same with an HTTP API simple response.
func TestWrapHTTPAnswersPerRoute(t *testing.T) {
	rl := newSetup(t).limiter(t, "user")
	const public = "arn:aws:execute-api:eu-west-1:123456789012:f6g7h8i9j0/$default/GET/public"
	h := rl.WrapHTTP(func(_ context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
		ok := ev.Headers["authorization"] == "Bearer user-1" && ev.RouteArn == public
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: ok, Context: map[string]any{"user": "user-1"}}, nil
	})
	ev := sample[events.APIGatewayV2CustomAuthorizerV2Request](t, "authorizer-http.json")
	ev.Headers["authorization"], ev.RouteArn = "Bearer user-1", public
	if got, err := h(context.Background(), ev); err != nil || !got.IsAuthorized {
		t.Fatalf("GET /public = %+v, %v; want authorized", got, err)
	}
	for _, arn := range []string{strings.Replace(public, "GET/public", "GET/admin", 1), strings.Replace(public, "f6g7h8i9j0", "otherapi01", 1)} {
		ev.RouteArn = arn
		if got, err := h(context.Background(), ev); got.IsAuthorized || !errors.Is(err, ratelimit.ErrUnauthorized) {
			t.Errorf("%s after GET /public = %+v, %v; want Unauthorized", arn, got, err)
		}
	}
}

// TestWrapRESTKeyNotShared: a team handler that authenticates x-api-key;
// requests carrying the first caller's Authorization with no key or a
// wrong one get Unauthorized, never the first caller's Allow or principal.
func TestWrapRESTKeyNotShared(t *testing.T) {
	rl := newSetup(t).limiter(t, "")
	h := rl.WrapREST(func(_ context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
		effect, principal := "Deny", "anonymous"
		if ev.Headers["X-Api-Key"] == "key-good" {
			effect, principal = "Allow", "user-1"
		}
		return events.APIGatewayCustomAuthorizerResponse{PrincipalID: principal, PolicyDocument: policy(effect, ev.MethodArn)}, nil
	})
	for _, key := range []string{"key-good", "", "key-wrong"} {
		ev := sample[events.APIGatewayCustomAuthorizerRequestTypeRequest](t, "authorizer-rest.json")
		ev.Headers["Authorization"] = "Bearer shared"
		ev.Headers["X-Api-Key"] = key
		got, err := h(context.Background(), ev)
		if key == "key-good" {
			if err != nil || got.PrincipalID != "user-1" || got.PolicyDocument.Statement[0].Effect != "Allow" {
				t.Fatalf("key-good = %+v, %v; want Allow as user-1", got, err)
			}
			continue
		}
		if !errors.Is(err, ratelimit.ErrUnauthorized) || got.PrincipalID == "user-1" {
			t.Errorf("key %q = %+v, %v; want Unauthorized", key, got, err)
		}
	}
}
