package apigw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/identity"
)

// upstreamAnswer is the union of what an upstream authorizer may answer: a
// REST API (or HTTP API IAM-policy) response, or an HTTP API simple one.
type upstreamAnswer struct {
	PrincipalID    string                                   `json:"principalId"`
	PolicyDocument *events.APIGatewayCustomAuthorizerPolicy `json:"policyDocument"`
	IsAuthorized   *bool                                    `json:"isAuthorized"`
	Context        map[string]any                           `json:"context"`
}

// chain asks the upstream authorizer about event (the payload API Gateway
// sent), for resource (the methodArn, or the routeArn of an HTTP API). It
// returns the caller's identity when the upstream allowed; otherwise the
// upstream's own answer, to be passed through unchanged (a Deny policy, or
// isAuthorized false), or ErrUnauthorized when the upstream said
// Unauthorized. A failure of the upstream is an error (API Gateway answers
// 500, as it would for the upstream alone).
func (h *Authorizer) chain(ctx context.Context, event []byte, resource string, req *authorizer.Request) (pass []byte, err error) {
	ir := identity.Request{Headers: req.Headers, Query: req.Query, APIKey: req.APIKey, SourceIP: req.SourceIP}
	raw, err := h.up.Authorize(ctx, identity.IdentityKey(h.upIdentity, &ir), event)
	if errors.Is(err, identity.ErrUpstreamUnauthorized) {
		h.m.Unauthorized()
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, err
	}
	var a upstreamAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("upstream authorizer answer: %w", err)
	}
	allowed := false
	switch {
	case a.IsAuthorized != nil:
		allowed = *a.IsAuthorized
	case a.PolicyDocument != nil:
		allowed = Evaluate(*a.PolicyDocument, resource)
	default:
		return nil, errors.New("upstream authorizer answer: neither policyDocument nor isAuthorized")
	}
	if !allowed {
		return raw, nil
	}
	id := identity.NewUpstreamIdentity(a.PrincipalID, a.Context)
	req.Upstream = &id
	return nil, nil
}

// viaUpstream asks the upstream authorizer, when there is one, about ev
// (a typed event, re-encoded as API Gateway sent it) for resource. done
// reports that its answer is the reply: out, the upstream's own answer
// passed through (R the handler's response type), or err. Otherwise the
// request goes on to Sluice's decision, with req.Upstream set when an
// upstream allowed.
func viaUpstream[R any](ctx context.Context, h *Authorizer, ev any, resource string, req *authorizer.Request) (out R, done bool, err error) {
	if h.up == nil {
		return out, false, nil
	}
	event, err := json.Marshal(ev)
	if err != nil {
		return out, true, fmt.Errorf("encode event for the upstream authorizer: %w", err)
	}
	pass, err := h.chain(ctx, event, resource, req)
	if err == nil && pass == nil {
		return out, false, nil
	}
	if err == nil {
		err = json.Unmarshal(pass, &out)
	}
	return out, true, err
}
