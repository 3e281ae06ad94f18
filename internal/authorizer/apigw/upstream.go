package apigw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

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

// upstreamAnswer is the union of what an upstream authorizer may answer: a
// REST API (or HTTP API IAM-policy) response, or an HTTP API simple one.
type upstreamAnswer struct {
	PrincipalID        string         `json:"principalId"`
	PolicyDocument     *Policy        `json:"policyDocument"`
	IsAuthorized       *bool          `json:"isAuthorized"`
	Context            map[string]any `json:"context"`
	UsageIdentifierKey string         `json:"usageIdentifierKey"`
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

// chain asks the upstream authorizer about event (the payload API Gateway
// sent) for ur (ur.Route is the methodArn, or the routeArn of an HTTP
// API). When the upstream allowed, it sets req.Upstream to the caller's
// identity and returns the answer; otherwise it returns ErrUnauthorized
// (the upstream said Unauthorized, did not allow, or answered what Sluice
// cannot read). A failure of the upstream is another error (API Gateway
// answers 500, as it would for the upstream alone).
func (h *Authorizer) chain(ctx context.Context, event []byte, ur *identity.UpstreamRequest, req *authorizer.Request) (*upstreamAnswer, error) {
	raw, err := h.up.Authorize(ctx, ur, event)
	switch {
	case errors.Is(err, identity.ErrUpstreamUnauthorized):
		h.m.Unauthorized()
		return nil, ErrUnauthorized
	case err != nil:
		return nil, err
	}
	var a upstreamAnswer
	allowed, err := false, json.Unmarshal(raw, &a)
	if err == nil {
		allowed, err = a.allows(ur.Route)
	}
	if err != nil {
		h.upstreamRefused(ctx, req, fmt.Errorf("upstream authorizer answer: %w", err))
		return nil, ErrUnauthorized
	}
	if !allowed {
		h.upstreamDenied(ctx, req)
		return nil, ErrUnauthorized
	}
	id := identity.NewUpstreamIdentity(a.PrincipalID, a.Context)
	req.Upstream = &id
	return &a, nil
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
func (h *handler) upstreamDenied(ctx context.Context, req *authorizer.Request) {
	h.m.Unauthorized()
	h.log.LogAttrs(ctx, slog.LevelInfo, "upstream authorizer denied",
		slog.String("decision", DecisionUpstreamDeny),
		slog.String("api", req.API), slog.String("route", req.Method+" "+req.Resource))
}

// upstreamRefused counts and logs at error an upstream answer Sluice
// cannot evaluate (err says why), answered 401: the upstream or Sluice
// needs fixing, and until then nothing it answers grants.
func (h *handler) upstreamRefused(ctx context.Context, req *authorizer.Request, err error) {
	h.m.Unauthorized()
	h.log.LogAttrs(ctx, slog.LevelError, "upstream authorizer answer refused",
		slog.String("decision", DecisionUpstreamDeny),
		slog.String("api", req.API), slog.String("route", req.Method+" "+req.Resource), slog.Any("error", err))
}
