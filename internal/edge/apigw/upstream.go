package apigw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/identity"
)

// An upstream authorizer's answer that does not allow the request (a
// policy that does not allow the methodArn or routeArn, isAuthorized
// false) is answered with ErrUnauthorized, which API Gateway turns into
// 401 (the UNAUTHORIZED gateway response), on REST and HTTP APIs alike,
// through Invoke as through the Chain methods. It cannot stay a Deny: a
// Deny is the gateway's ACCESS_DENIED response, whose status is fixed per
// API, and Sluice's construct makes it the 429 of a rate limit, with
// Retry-After. An authorization failure must never tell the client to
// retry later, and a client must tell it from a rate limit: 401 without
// Retry-After (an HTTP API's rate limit is a 403) does both. The upstream's
// Unauthorized stays 401; an answer Sluice cannot read is logged at error
// and answered 401 too, so that it never grants.

// upstreamAnswer is an upstream authorizer's answer, the one form Sluice
// reads it in whoever supplied it: decoded from an invoked Lambda's JSON
// (UPSTREAM_AUTHORIZER), or made of the typed response of an authorizer
// run in process (the Chain methods, ratelimit.Wrap*: restAnswer,
// simpleAnswer, iamAnswer). It is the union of a REST API (or HTTP API
// IAM policy) response and an HTTP API simple one. behind reads it; the
// answer built of the decision keeps its principalId, context and
// usageIdentifierKey (restResponse, simpleResponse).
type upstreamAnswer struct {
	PrincipalID    string  `json:"principalId"`
	PolicyDocument *Policy `json:"policyDocument"`
	IsAuthorized   *bool   `json:"isAuthorized"`
	// Context is the upstream's context as it gave it: Go values of an
	// in-process authorizer, or as encoding/json decodes them.
	Context            map[string]any `json:"context"`
	UsageIdentifierKey string         `json:"usageIdentifierKey"`
}

// restAnswer is the answer of an in-process REST API authorizer.
func restAnswer(r *events.APIGatewayCustomAuthorizerResponse) *upstreamAnswer {
	p := policyOf(r.PolicyDocument)
	return &upstreamAnswer{PrincipalID: r.PrincipalID, PolicyDocument: &p, Context: r.Context, UsageIdentifierKey: r.UsageIdentifierKey}
}

// simpleAnswer is the answer of an in-process HTTP API authorizer with
// simple responses.
func simpleAnswer(r *events.APIGatewayV2CustomAuthorizerSimpleResponse) *upstreamAnswer {
	ok := r.IsAuthorized
	return &upstreamAnswer{IsAuthorized: &ok, Context: r.Context}
}

// iamAnswer is the answer of an in-process HTTP API authorizer with IAM
// policy responses.
func iamAnswer(r *events.APIGatewayV2CustomAuthorizerIAMPolicyResponse) *upstreamAnswer {
	p := policyOf(r.PolicyDocument)
	return &upstreamAnswer{PrincipalID: r.PrincipalID, PolicyDocument: &p, Context: r.Context}
}

// allows reports whether a allows resource (the methodArn or routeArn):
// its isAuthorized, else its policy evaluated for resource (Policy.Allows,
// as API Gateway evaluates a cached policy for each request).
func (a *upstreamAnswer) allows(resource string) (bool, error) {
	switch {
	case a.IsAuthorized != nil:
		return *a.IsAuthorized, nil
	case a.PolicyDocument != nil:
		return a.PolicyDocument.Allows(resource)
	}
	return false, errors.New("neither policyDocument nor isAuthorized")
}

// behind is the one path of an upstream's answer a, whoever supplied it,
// for req, whose route (methodArn or routeArn) is route. When a allows
// route it sets req.Upstream to what a says of the caller, which the
// principal and context:<key> sources read (authorizer.Decide: the one
// subject hygiene), and returns nil. Otherwise it returns ErrUnauthorized
// (401, never a rate limit's Deny: see above), logged as an upstream
// denial, or at error when a is an answer Sluice cannot evaluate.
func (h *answerer) behind(ctx context.Context, a *upstreamAnswer, route string, req *authorizer.Request) error {
	allowed, err := a.allows(route)
	switch {
	case err != nil:
		h.upstreamRefused(ctx, req, fmt.Errorf("upstream authorizer answer: %w", err))
		return ErrUnauthorized
	case !allowed:
		h.upstreamDenied(ctx, req)
		return ErrUnauthorized
	}
	id := identity.NewUpstreamIdentity(a.PrincipalID, a.Context)
	req.Upstream = &id
	return nil
}

// ask invokes the upstream authorizer (UPSTREAM_AUTHORIZER), when there is
// one, with ev for req, whose route is route, and returns its answer,
// through behind: nil without an upstream; ErrUnauthorized when it said
// Unauthorized, did not allow, or answered what Sluice cannot read. A
// failure of the upstream is another error (API Gateway answers 500, as
// it would for the upstream alone). ev is the payload API Gateway sent
// ([]byte), or a typed event, encoded as API Gateway sent it.
func (h *Handler) ask(ctx context.Context, ev any, req *authorizer.Request, route string, stageVariables map[string]string) (*upstreamAnswer, error) {
	if h.up == nil {
		return nil, nil
	}
	event, ok := ev.([]byte)
	if !ok {
		var err error
		if event, err = json.Marshal(ev); err != nil {
			return nil, fmt.Errorf("encode event for the upstream authorizer: %w", err)
		}
	}
	raw, err := h.up.Authorize(ctx, upstreamRequest(req, route, stageVariables), event)
	switch {
	case errors.Is(err, identity.ErrUpstreamUnauthorized):
		h.m.Unauthorized()
		return nil, ErrUnauthorized
	case err != nil:
		return nil, err
	}
	var a upstreamAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		h.upstreamRefused(ctx, req, fmt.Errorf("upstream authorizer answer: %w", err))
		return nil, ErrUnauthorized
	}
	if err := h.behind(ctx, &a, route, req); err != nil {
		return nil, err
	}
	return &a, nil
}

// mergeContext is the context of an answer: Sluice's own values (own:
// the rate-limit keys and verified claims, contextValues) over the
// upstream's as it gave them, strings, numbers and booleans kept as such.
// Sluice's keys win: an upstream value under one of them (limit,
// retryAfter, rateLimit, …) is dropped, so no upstream can change what a
// 429 says or what the backend reads as its limits. An upstream value API
// Gateway refuses in a context (an object, an array, null) is dropped too.
// It adds to own and returns it; upstream is not modified.
func mergeContext(own, upstream map[string]any) map[string]any {
	for k, v := range upstream {
		if _, taken := own[k]; taken {
			continue
		}
		if _, ok := identity.ContextString(v); ok {
			own[k] = v
		}
	}
	return own
}

// upstreamRequest is what the upstream's cache key reads of req, whose
// route (methodArn or routeArn) is route.
func upstreamRequest(req *authorizer.Request, route string, stageVariables map[string]string) *identity.UpstreamRequest {
	return &identity.UpstreamRequest{
		Request: identity.Request{Headers: req.Headers, MultiHeaders: req.MultiHeaders, Query: req.Query,
			MultiQuery: req.MultiQuery, APIKey: req.APIKey, SourceIP: req.SourceIP},
		Route:          route,
		StageVariables: stageVariables,
	}
}

// upstreamDenied counts and logs (at info, without the subject) a request
// the upstream authorizer did not allow, answered 401.
func (h *answerer) upstreamDenied(ctx context.Context, req *authorizer.Request) {
	h.m.Unauthorized()
	h.log.LogAttrs(ctx, slog.LevelInfo, "upstream authorizer denied",
		slog.String("decision", authorizer.DecisionUpstreamDeny),
		slog.String("api", req.API), slog.String("route", req.Method+" "+req.Resource))
}

// upstreamRefused counts and logs at error an upstream answer Sluice
// cannot evaluate (err says why), answered 401: the upstream or Sluice
// needs fixing, and until then nothing it answers grants.
func (h *answerer) upstreamRefused(ctx context.Context, req *authorizer.Request, err error) {
	h.m.Unauthorized()
	h.log.LogAttrs(ctx, slog.LevelError, "upstream authorizer answer refused",
		slog.String("decision", authorizer.DecisionUpstreamDeny),
		slog.String("api", req.API), slog.String("route", req.Method+" "+req.Resource), slog.Any("error", err))
}
