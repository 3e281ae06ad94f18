package apigw

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/edge"
)

// The Chain methods answer behind an upstream authorizer run in process
// (the public ratelimit package's Wrap*): up is its answer to ev. Its
// answer takes the one path of an invoked upstream's (UPSTREAM_AUTHORIZER
// through REST, HTTP and Invoke): behind, the decision, the answer
// (answerREST, answerHTTP). So:
//
//   - an upstream that does not allow the request is answered with
//     ErrUnauthorized (401, never the ACCESS_DENIED of a rate limit: see
//     upstream.go), and nothing reaches Redis;
//   - the subject sources (principal or context:<key>; an embedded
//     limiter's SUBJECT_SOURCES) read the upstream's answer; an allowed
//     request whose subject is missing or fails the subject hygiene is
//     ErrUnauthorized (401), logged at warn;
//   - otherwise Sluice decides: an Allow or Deny of the route (REST, HTTP
//     IAM), or isAuthorized (HTTP simple), with the contexts merged
//     (mergeContext: Sluice's keys win). Over the limit the gateway
//     responses send 429 with Retry-After and the RateLimit fields exactly
//     as for Sluice's own authorizer. The upstream's principalId and
//     usageIdentifierKey are kept.

// ChainREST answers a REST API REQUEST authorizer event behind up. up
// allows when its policy allows ev.MethodArn (Policy.Allows).
func (h *Handler) ChainREST(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest, up events.APIGatewayCustomAuthorizerResponse) (events.APIGatewayCustomAuthorizerResponse, error) {
	req := edge.RESTAuthorizer(&ev)
	return h.answerREST(ctx, &req, ev.MethodArn, restAnswer(&up))
}

// ChainHTTP answers an HTTP API (payload 2.0) authorizer event behind up,
// a simple response, which has no principalId: the subject sources must
// name a context key, or every allowed request is ErrUnauthorized.
func (h *Handler) ChainHTTP(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request, up events.APIGatewayV2CustomAuthorizerSimpleResponse) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	req := edge.HTTPAuthorizer(&ev)
	return h.answerHTTP(ctx, &req, ev.RouteArn, simpleAnswer(&up))
}

// ChainHTTPIAM answers an HTTP API (payload 2.0) authorizer event behind
// up, an IAM policy response: up allows when its policy allows ev.RouteArn
// (Policy.Allows); the answer is an Allow or Deny of ev.RouteArn.
func (h *Handler) ChainHTTPIAM(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request, up events.APIGatewayV2CustomAuthorizerIAMPolicyResponse) (events.APIGatewayV2CustomAuthorizerIAMPolicyResponse, error) {
	req := edge.HTTPAuthorizer(&ev)
	out, err := h.answerREST(ctx, &req, ev.RouteArn, iamAnswer(&up))
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerIAMPolicyResponse{}, err
	}
	return events.APIGatewayV2CustomAuthorizerIAMPolicyResponse{PrincipalID: out.PrincipalID, PolicyDocument: out.PolicyDocument, Context: out.Context}, nil
}
