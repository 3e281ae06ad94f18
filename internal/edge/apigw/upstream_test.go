package apigw_test

import (
	"bytes"
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
	"github.com/sluicehq/sluice/internal/rules"
)

// teamAuthorizer is an upstream authorizer in-process: its answer depends
// on the x-team header of the event it gets.
type teamAuthorizer struct{}

func (teamAuthorizer) Invoke(_ context.Context, event []byte) ([]byte, error) {
	var ev struct {
		Version   string            `json:"version"`
		MethodArn string            `json:"methodArn"`
		Headers   map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(event, &ev); err != nil {
		return nil, err
	}
	team := ev.Headers["x-team"]
	if ev.Version == "2.0" {
		return json.Marshal(map[string]any{"isAuthorized": team != "blocked", "context": map[string]any{"team": team}})
	}
	effect := "Allow"
	switch team {
	case "":
		return nil, identity.ErrUpstreamUnauthorized
	case "blocked":
		effect = "Deny"
	}
	return json.Marshal(events.APIGatewayCustomAuthorizerResponse{
		PrincipalID: "p-" + team,
		PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
			{Action: []string{"execute-api:Invoke"}, Effect: effect, Resource: []string{ev.MethodArn}}}},
		Context: map[string]any{"team": team, "rule": "forged"},
	})
}

func TestUpstreamChain(t *testing.T) {
	t.Parallel()
	sources, _ := identity.ParseSources("context:team")
	upSources, _ := identity.ParseUpstreamSources("header:x-team")
	logs := &bytes.Buffer{}
	lim := redisLimiter(t, "upstream")
	a := decision(lim, authorizer.Options{Sources: sources},
		rules.Rule{ID: "r-api", API: "a1b2c3", Route: "*", Subject: "*", Limit: new(int64(1)), Period: rules.Period(time.Minute)})
	h := apigw.NewHandler(a, apigw.Options{
		Upstream: identity.NewUpstream(teamAuthorizer{}, identity.UpstreamOptions{Sources: upSources, TTL: identity.DefaultUpstreamTTL}),
		Logger:   jsonLog(logs),
	})
	ctx := context.Background()
	ev := func(team string) events.APIGatewayCustomAuthorizerRequestTypeRequest {
		e := restEvent("")
		e.Headers = map[string]string{"x-team": team}
		return e
	}
	resp, err := h.REST(ctx, ev("red"))
	if err != nil || resp.PolicyDocument.Statement[0].Effect != "Allow" || resp.PrincipalID != "p-red" {
		t.Fatalf("REST(red) = %+v, %v; want Allow with the upstream's principal", resp, err)
	}
	if resp.Context["team"] != "red" || resp.Context["rule"] != "r-api" {
		t.Errorf("context = %v, want the upstream's team and Sluice's own rule (not the upstream's)", resp.Context)
	}
	if resp, _ := h.REST(ctx, ev("red")); resp.PolicyDocument.Statement[0].Effect != "Deny" || resp.Context["rule"] != "r-api" {
		t.Errorf("REST(red) #2 = %+v, want Sluice's Deny (1 a minute per team)", resp)
	}
	// The upstream's Deny and Unauthorized are both 401 (ErrUnauthorized),
	// never the Deny (429) of a rate limit, and never reach Redis.
	calls := lim.Stats().Calls
	if blocked, err := h.REST(ctx, ev("blocked")); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("REST(blocked) = %+v, %v; want Unauthorized for the upstream's Deny", blocked, err)
	}
	if _, err := h.REST(ctx, ev("")); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("REST(no team) error = %v, want Unauthorized", err)
	}
	if raw, err := h.Invoke(ctx, mustJSON(t, ev("blocked"))); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("Invoke(blocked) = %s, %v; want Unauthorized", raw, err)
	}
	// HTTP API simple answers: isAuthorized false is 401 too (an HTTP
	// API's rate limit is its 403).
	hev := events.APIGatewayV2CustomAuthorizerV2Request{Version: "2.0", RouteKey: "GET /x", Headers: map[string]string{"x-team": "blocked"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{APIID: "a1b2c3"}}
	if hr, err := h.HTTP(ctx, hev); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("HTTP(blocked) = %+v, %v; want Unauthorized for the upstream's isAuthorized false", hr, err)
	}
	if lim.Stats().Calls != calls {
		t.Error("the limiter was called for an upstream Deny or Unauthorized")
	}
	if n := strings.Count(logs.String(), `"msg":"upstream authorizer denied","decision":"upstream-deny","api":"a1b2c3"`); n != 3 {
		t.Errorf("%d upstream-deny log lines, want 3 (REST, Invoke, HTTP):\n%s", n, logs)
	}
	if strings.Contains(logs.String(), "blocked") {
		t.Errorf("the upstream's principal or context reached the logs:\n%s", logs)
	}
	hev.Headers["x-team"] = "blue"
	if hr, err := h.HTTP(ctx, hev); err != nil || !hr.IsAuthorized || hr.Context["team"] != "blue" || hr.Context["rule"] != "r-api" {
		t.Errorf("HTTP(blue) = %+v, %v; want authorized by Sluice with both contexts", hr, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
