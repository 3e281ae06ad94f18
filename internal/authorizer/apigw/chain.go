package apigw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
)

// The Chain methods answer behind an upstream authorizer: the team's own,
// run first (in process by the public ratelimit package, or invoked as a
// Lambda). Its answer is up; key is the context key to limit by, "" for
// its principalId (authorizer.DecideFor). They share one rule:
//
//   - an upstream that does not allow the request is answered with
//     ErrUnauthorized (401, never the ACCESS_DENIED of a rate limit: see
//     upstream.go), and nothing reaches Redis;
//   - an allowed request whose subject is missing or fails the hygiene
//     checks is ErrUnauthorized (401);
//   - otherwise Sluice decides. The upstream's answer is returned with the
//     contexts merged (authorizer.MergeContext: Sluice's keys win); over the
//     limit its policy becomes a Deny of the method (REST, HTTP IAM) or
//     isAuthorized false (HTTP simple), so the gateway responses send 429
//     with Retry-After and the RateLimit fields exactly as for Sluice's own
//     authorizer. The upstream's principalId and usageIdentifierKey are
//     kept.

// ChainREST answers a REST API REQUEST authorizer event behind up. up
// allows when its policy allows ev.MethodArn (Policy.Allows).
func (h *Authorizer) ChainREST(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest, up events.APIGatewayCustomAuthorizerResponse, key string) (events.APIGatewayCustomAuthorizerResponse, error) {
	req := restRequest(&ev)
	return h.chainPolicy(ctx, up, key, &req, ev.MethodArn)
}

// chainPolicy answers req behind up, a policy answer: up allows when its
// policy allows arn (Policy.Allows); over the limit the policy becomes a
// Deny of arn. REST's response type carries the fields of HTTP's IAM one.
func (h *handler) chainPolicy(ctx context.Context, up events.APIGatewayCustomAuthorizerResponse, key string, req *authorizer.Request, arn string) (events.APIGatewayCustomAuthorizerResponse, error) {
	p := policyOf(up.PolicyDocument)
	allowed, err := p.Allows(arn)
	if err != nil {
		h.upstreamRefused(ctx, req, fmt.Errorf("upstream authorizer answer: %w", err))
		return events.APIGatewayCustomAuthorizerResponse{}, ErrUnauthorized
	}
	u := authorizer.Upstream{Allowed: allowed, PrincipalID: up.PrincipalID, Context: up.Context}
	res, err := h.decideFor(ctx, &u, key, req)
	if err != nil {
		return events.APIGatewayCustomAuthorizerResponse{}, err
	}
	out := up
	out.Context = authorizer.MergeContext(h.ownValues(&res), up.Context)
	if !res.Allowed {
		out.PolicyDocument = h.restResponse(&res, req, arn, nil).PolicyDocument
	}
	return out, nil
}

// ChainHTTP answers an HTTP API (payload 2.0) authorizer event behind up,
// a simple response, which has no principalId: key must name a context
// key, or every allowed request is ErrUnauthorized.
func (h *Authorizer) ChainHTTP(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request, up events.APIGatewayV2CustomAuthorizerSimpleResponse, key string) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	u := authorizer.Upstream{Allowed: up.IsAuthorized, Context: up.Context}
	req := httpRequest(&ev)
	res, err := h.decideFor(ctx, &u, key, &req)
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{
		IsAuthorized: res.Allowed,
		Context:      authorizer.MergeContext(h.ownValues(&res), up.Context),
	}, nil
}

// ChainHTTPIAM answers an HTTP API (payload 2.0) authorizer event behind
// up, an IAM policy response: up allows when its policy allows ev.RouteArn
// (Policy.Allows); over the limit the policy becomes a Deny of ev.RouteArn.
func (h *Authorizer) ChainHTTPIAM(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request, up events.APIGatewayV2CustomAuthorizerIAMPolicyResponse, key string) (events.APIGatewayV2CustomAuthorizerIAMPolicyResponse, error) {
	req := httpRequest(&ev)
	out, err := h.chainPolicy(ctx, events.APIGatewayCustomAuthorizerResponse{PrincipalID: up.PrincipalID, PolicyDocument: up.PolicyDocument, Context: up.Context}, key, &req, ev.RouteArn)
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerIAMPolicyResponse{}, err
	}
	return events.APIGatewayV2CustomAuthorizerIAMPolicyResponse{PrincipalID: out.PrincipalID, PolicyDocument: out.PolicyDocument, Context: out.Context}, nil
}

// decideFor is decide behind an upstream. It returns ErrUnauthorized when
// the upstream did not allow (counted and logged at info as an upstream
// denial, not as Sluice's decision) and when the subject is missing or
// refused (counted as unauthorized and logged at warn, since the upstream
// vouched for the caller and so its answer or the context key is wrong).
func (h *handler) decideFor(ctx context.Context, up *authorizer.Upstream, key string, req *authorizer.Request) (authorizer.Result, error) {
	res, err := h.a.DecideFor(ctx, up, key, req)
	switch {
	case errors.Is(err, authorizer.ErrUpstreamDenied):
		h.upstreamDenied(ctx, req)
		return res, ErrUnauthorized
	case errors.Is(err, authorizer.ErrNoSubject):
		h.m.Unauthorized()
		h.log.LogAttrs(ctx, slog.LevelWarn, "no subject in the upstream authorizer's answer",
			slog.String("api", req.API), slog.String("route", req.Method+" "+req.Resource), slog.Any("error", err))
		return res, ErrUnauthorized
	}
	h.record(ctx, req, &res, err)
	return res, nil
}

// ownValues are Sluice's own context values of res, without the
// upstream's (res.Context, flattened to strings): MergeContext adds the
// upstream's as it gave them, numbers and booleans kept.
func (h *handler) ownValues(res *authorizer.Result) map[string]any {
	own := *res
	own.Context = nil
	return h.contextValues(&own)
}
