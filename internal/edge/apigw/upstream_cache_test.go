package apigw_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/identity"
)

// sampleEvent decodes one of the repository's sample events (events/).
func sampleEvent[T any](t *testing.T, name string) T {
	t.Helper()
	var ev T
	if err := json.Unmarshal(sample(t, name), &ev); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return ev
}

// routeAuthorizer is an HTTP API upstream with simple responses that lets
// "Bearer user-1" call GET /public of API f6g7h8i9j0 and nothing else.
type routeAuthorizer struct{ calls atomic.Int64 }

const publicRoute = "arn:aws:execute-api:eu-west-1:123456789012:f6g7h8i9j0/$default/GET/public"

func (a *routeAuthorizer) Invoke(_ context.Context, event []byte) ([]byte, error) {
	a.calls.Add(1)
	var ev events.APIGatewayV2CustomAuthorizerV2Request
	if err := json.Unmarshal(event, &ev); err != nil {
		return nil, err
	}
	ok := ev.Headers["authorization"] == "Bearer user-1" && ev.RouteArn == publicRoute
	return json.Marshal(events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: ok, Context: map[string]any{"user": "user-1"}})
}

// keyAuthorizer is a REST upstream that authenticates the x-api-key header:
// "key-good" is user-1, allowed on the whole API; any other key, or none,
// is denied.
type keyAuthorizer struct{ calls atomic.Int64 }

func (a *keyAuthorizer) Invoke(_ context.Context, event []byte) ([]byte, error) {
	a.calls.Add(1)
	var ev events.APIGatewayCustomAuthorizerRequestTypeRequest
	if err := json.Unmarshal(event, &ev); err != nil {
		return nil, err
	}
	effect, principal := "Deny", "anonymous"
	if ev.Headers["X-Api-Key"] == "key-good" {
		effect, principal = "Allow", "user-1"
	}
	return json.Marshal(events.APIGatewayCustomAuthorizerResponse{PrincipalID: principal,
		PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
			{Action: []string{"execute-api:Invoke"}, Effect: effect, Resource: []string{"arn:aws:execute-api:eu-west-1:123456789012:a1b2c3d4e5/*"}}}},
		Context: map[string]any{"user": principal}})
}

// chainedAuthorizer is Sluice's authorizer handler behind inv, limiting by
// the upstream's context key user (1000 a minute: never the limit here).
func chainedAuthorizer(t *testing.T, up *identity.Upstream, o apigw.Options) *apigw.Handler {
	t.Helper()
	sources, _ := identity.ParseSources("context:user")
	o.Upstream = up
	return apigw.NewHandler(decision(redisLimiter(t, "upcache"), authorizer.Options{Sources: sources}, everywhere("r-all", 1000, time.Minute)), o)
}

// TestUpstreamCacheSimpleAnswerPerRoute: an HTTP API upstream's
// isAuthorized is its answer for one route. After it allowed user-1 on GET
// /public, user-1 on GET /admin, or on another API, must get what the
// upstream says there (false), not the cached true.
func TestUpstreamCacheSimpleAnswerPerRoute(t *testing.T) {
	t.Parallel()
	inv := &routeAuthorizer{}
	sources, _ := identity.ParseUpstreamSources("header:authorization")
	h := chainedAuthorizer(t, identity.NewUpstream(inv, identity.UpstreamOptions{TTL: 300 * time.Second, Sources: sources}), apigw.Options{})
	call := func(routeArn string) (bool, error) {
		t.Helper()
		ev := sampleEvent[events.APIGatewayV2CustomAuthorizerV2Request](t, "authorizer-http.json")
		ev.RouteArn = routeArn
		ev.Headers["authorization"] = "Bearer user-1"
		out, err := h.Invoke(context.Background(), mustJSON(t, ev))
		if err != nil {
			return false, err
		}
		var resp events.APIGatewayV2CustomAuthorizerSimpleResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("Invoke reply %s: %v", out, err)
		}
		return resp.IsAuthorized, nil
	}
	if ok, err := call(publicRoute); !ok || err != nil {
		t.Fatalf("GET /public = %v, %v; want authorized", ok, err)
	}
	for _, arn := range []string{
		strings.Replace(publicRoute, "GET/public", "GET/admin", 1),
		strings.Replace(publicRoute, "f6g7h8i9j0", "otherapi01", 1),
	} {
		if ok, err := call(arn); ok || !errors.Is(err, apigw.ErrUnauthorized) {
			t.Errorf("%s after an allowed GET /public = authorized %v, %v; want Unauthorized, as the upstream says false there", arn, ok, err)
		}
	}
	if ok, _ := call(publicRoute); !ok {
		t.Error("GET /public again = not authorized")
	}
	if n := inv.calls.Load(); n != 3 {
		t.Errorf("upstream invoked %d times, want 3 (GET /public once, cached; each other route once)", n)
	}
}

// TestUpstreamCacheOffWithoutSources: an upstream that authenticates
// x-api-key; the operator named no identity sources, so nothing is cached,
// and a request with the first caller's Authorization but no key, or a
// wrong one, is the upstream's to answer.
func TestUpstreamCacheOffWithoutSources(t *testing.T) {
	t.Parallel()
	inv := &keyAuthorizer{}
	h := chainedAuthorizer(t, identity.NewUpstream(inv, identity.UpstreamOptions{TTL: 300 * time.Second}), apigw.Options{})
	call := func(key string) (events.APIGatewayCustomAuthorizerResponse, bool, error) {
		t.Helper()
		ev := sampleEvent[events.APIGatewayCustomAuthorizerRequestTypeRequest](t, "authorizer-rest.json")
		ev.Headers["Authorization"] = "Bearer shared"
		ev.MultiValueHeaders["Authorization"] = []string{"Bearer shared"}
		if key == "" {
			delete(ev.Headers, "X-Api-Key")
			delete(ev.MultiValueHeaders, "X-Api-Key")
		} else {
			ev.Headers["X-Api-Key"], ev.MultiValueHeaders["X-Api-Key"] = key, []string{key}
		}
		out, err := h.Invoke(context.Background(), mustJSON(t, ev))
		if err != nil {
			return events.APIGatewayCustomAuthorizerResponse{}, false, err
		}
		var resp events.APIGatewayCustomAuthorizerResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("Invoke reply %s: %v", out, err)
		}
		return resp, apigw.Evaluate(resp.PolicyDocument, ev.MethodArn), nil
	}
	if resp, ok, err := call("key-good"); !ok || err != nil || resp.PrincipalID != "user-1" {
		t.Fatalf("key-good = %+v, %v, %v; want Allow as user-1", resp, ok, err)
	}
	for _, key := range []string{"", "key-wrong"} {
		if resp, ok, err := call(key); ok || !errors.Is(err, apigw.ErrUnauthorized) {
			t.Errorf("key %q after key-good = Allow %v as %q, %v; want Unauthorized, as the upstream denies it", key, ok, resp.PrincipalID, err)
		}
	}
	if n := inv.calls.Load(); n != 3 {
		t.Errorf("upstream invoked %d times, want 3: no cache without UPSTREAM_IDENTITY_SOURCES", n)
	}

	// Named, the key the upstream reads keys the cache: the good key is
	// reused, a wrong one is asked.
	sources, _ := identity.ParseUpstreamSources("header:x-api-key,header:authorization")
	inv = &keyAuthorizer{}
	h = chainedAuthorizer(t, identity.NewUpstream(inv, identity.UpstreamOptions{TTL: 300 * time.Second, Sources: sources}), apigw.Options{})
	for _, key := range []string{"key-good", "key-good", "key-wrong", "key-good"} {
		if _, ok, err := call(key); ok != (key == "key-good") {
			t.Errorf("named sources: key %q = Allow %v, %v", key, ok, err)
		}
	}
	if n := inv.calls.Load(); n != 2 {
		t.Errorf("named sources: upstream invoked %d times, want 2 (key-good once, key-wrong once)", n)
	}
}
