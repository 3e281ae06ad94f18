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

// upstreamEvent returns the event to send upstream for a typed handler:
// the event as API Gateway sent it, re-encoded.
func upstreamEvent(ev any) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event for the upstream authorizer: %w", err)
	}
	return b, nil
}
