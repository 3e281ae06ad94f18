package apigw_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/authorizer/apigw"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
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
	lim := limiter.New(testenv.Redis(t), limiter.Options{Prefix: testenv.Prefix(t, "upstream"), Timeout: time.Second})
	snap := rules.NewSnapshot([]rules.Rule{
		{ID: "r-api", API: "a1b2c3", Route: "*", Subject: "*", Limit: new(int64(1)), Period: rules.Period(time.Minute)},
	}, nil, rules.SnapshotOptions{})
	h := apigw.NewAuthorizer(authorizer.New(snaps{snap}, lim, authorizer.Options{Sources: sources}), apigw.Options{
		Upstream:         identity.NewUpstream(teamAuthorizer{}, identity.UpstreamOptions{}),
		UpstreamIdentity: []identity.Source{identity.HeaderSource("x-team")},
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
	calls := lim.Stats().Calls
	blocked, err := h.REST(ctx, ev("blocked"))
	want, _ := teamAuthorizer{}.Invoke(ctx, mustJSON(t, ev("blocked")))
	var wantResp events.APIGatewayCustomAuthorizerResponse
	json.Unmarshal(want, &wantResp)
	if err != nil || !cmp.Equal(blocked, wantResp) {
		t.Errorf("REST(blocked) = %+v, %v; want the upstream's Deny unchanged %+v", blocked, err, wantResp)
	}
	if _, err := h.REST(ctx, ev("")); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("REST(no team) error = %v, want Unauthorized", err)
	}
	if lim.Stats().Calls != calls {
		t.Error("the limiter was called for an upstream Deny or Unauthorized")
	}
	// Invoke passes the upstream's answer through byte for byte.
	raw, err := h.Invoke(ctx, mustJSON(t, ev("blocked")))
	if err != nil || !strings.Contains(string(raw), `"principalId":"p-blocked"`) {
		t.Errorf("Invoke(blocked) = %s, %v", raw, err)
	}
	// HTTP API simple answers: isAuthorized false passes through.
	hev := events.APIGatewayV2CustomAuthorizerV2Request{Version: "2.0", RouteKey: "GET /x", Headers: map[string]string{"x-team": "blocked"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{APIID: "a1b2c3"}}
	if hr, err := h.HTTP(ctx, hev); err != nil || hr.IsAuthorized || hr.Context["team"] != "blocked" {
		t.Errorf("HTTP(blocked) = %+v, %v; want the upstream's isAuthorized false", hr, err)
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
