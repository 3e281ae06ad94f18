package apigw_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestSubjectHygiene: an oversized or doubled subject is 401 without a
// Redis call, on every event shape; an accepted one is named by its keyed
// hash, never by the subject or its unkeyed hash.
func TestSubjectHygiene(t *testing.T) {
	t.Parallel()
	key := []byte("test-subject-key-0123456789")
	lim := limiter.New(testenv.Redis(t), limiter.Options{Prefix: testenv.Prefix(t, "hygiene"), Timeout: time.Second, SubjectKey: key})
	auth := apigw.NewHandler(decision(lim, authorizer.Options{},
		rules.Rule{ID: "r-api", API: "a1b2c3", Route: "*", Subject: "*", Limit: new(int64(100)), Period: rules.Period(time.Minute)}), apigw.Options{})
	ctx := context.Background()

	long := strings.Repeat("k", identity.MaxSubjectLen+1)
	rest := func(mutate func(*events.APIGatewayCustomAuthorizerRequestTypeRequest)) events.APIGatewayCustomAuthorizerRequestTypeRequest {
		ev := restEvent("key-1")
		mutate(&ev)
		return ev
	}
	for name, ev := range map[string]events.APIGatewayCustomAuthorizerRequestTypeRequest{
		"257 bytes": rest(func(ev *events.APIGatewayCustomAuthorizerRequestTypeRequest) { ev.Headers["X-Api-Key"] = long }),
		"two x-api-key lines": rest(func(ev *events.APIGatewayCustomAuthorizerRequestTypeRequest) {
			ev.MultiValueHeaders = map[string][]string{"X-Api-Key": {"key-0", "key-1"}}
		}),
		"comma-joined": rest(func(ev *events.APIGatewayCustomAuthorizerRequestTypeRequest) { ev.Headers["X-Api-Key"] = "a,b" }),
	} {
		before := lim.Stats()
		if _, err := auth.REST(ctx, ev); !errors.Is(err, apigw.ErrUnauthorized) {
			t.Errorf("REST(%s) error = %v, want Unauthorized", name, err)
		}
		b, _ := json.Marshal(ev)
		if _, err := auth.Invoke(ctx, b); !errors.Is(err, apigw.ErrUnauthorized) {
			t.Errorf("Invoke(%s) error = %v, want Unauthorized", name, err)
		}
		if after := lim.Stats(); after.Calls != before.Calls || after.RedisCalls != before.RedisCalls {
			t.Errorf("%s: limiter calls %d → %d, Redis calls %d → %d; want none", name, before.Calls, after.Calls, before.RedisCalls, after.RedisCalls)
		}
	}
	httpEv := events.APIGatewayV2CustomAuthorizerV2Request{
		Version: "2.0", RouteKey: "GET /orders/{id}", Headers: map[string]string{"x-api-key": "key-1,key-2"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{APIID: "a1b2c3"},
	}
	if _, err := auth.HTTP(ctx, httpEv); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("HTTP(a,b) error = %v, want Unauthorized", err)
	}

	resp, err := auth.REST(ctx, restEvent("key-1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := limiter.NewHasher(key).SubjectHash("key-1"); resp.PrincipalID != want {
		t.Errorf("principalId = %q, want the keyed hash %q", resp.PrincipalID, want)
	}
	if resp.PrincipalID == limiter.SubjectHash("key-1") {
		t.Errorf("principalId %q is the unkeyed hash", resp.PrincipalID)
	}
}
