// Package apigw answers AWS API Gateway's and Lambda's events with the
// core decision (internal/authorizer), through the converters and
// renderings of its parent, internal/edge: REST API REQUEST authorizer
// events in, IAM policies out; HTTP API (payload 2.0) authorizer events
// in, simple responses out; and the check API's proxy and Function URL
// events. The Lambdas in functions/, sluice local's gateway and the
// ratelimit package's authorizer wrappers call the same handlers.
//
// On deny a REST API gets a Deny policy, which the gateway answers with its
// ACCESS_DENIED response (403 by default; the infra rewrites it to 429 with
// Retry-After and the RateLimit fields taken from the context values). An
// HTTP API can only answer 403 when a Lambda authorizer says no: its simple
// responses have no status, and its gateway responses cannot be customised.
package apigw

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/metrics"
)

// ErrUnauthorized is returned to API Gateway when a request has no subject:
// the exact message "Unauthorized" makes the gateway answer 401.
var ErrUnauthorized = errors.New("Unauthorized")

// InvokeAction is the IAM action API Gateway checks an authorizer policy for.
const InvokeAction = "execute-api:Invoke"

var invokeActions = []string{InvokeAction}

// Options configure the handlers.
type Options struct {
	// Logger receives the lines of an upstream authorizer's refusals;
	// default slog.Default(). The decisions' lines are the core's
	// (authorizer.Options.Logger).
	Logger *slog.Logger
	// Metrics, when set, counts an upstream's refusals as unauthorized
	// (the core counts its own decisions).
	Metrics *metrics.Metrics
	// Headers are the rate-limit header dialects (RATELIMIT_HEADERS) whose
	// values the context carries and the check API sends; 0 means
	// headers.Default.
	Headers headers.Dialects
	// Upstream, when set, is the authorizer asked first
	// (UPSTREAM_AUTHORIZER): its answer takes the path of an in-process
	// authorizer's (the Chain methods): when it does not allow, the answer
	// is Unauthorized (401); its Allow names the caller (principal,
	// context:<key> sources), and its principalId, context and
	// usageIdentifierKey are passed on. Handler only, not Check.
	Upstream *identity.Upstream
	// OriginVerify, when set (ORIGIN_VERIFY, ORIGIN_VERIFY_SECRET_ARN),
	// is the value a request must carry in X-Origin-Verify: one that
	// lacks it, carries another or carries two is ErrUnauthorized (401)
	// before any upstream or decision (originVerified). Handler's REST,
	// HTTP and Invoke only: not Check, nor the Chain methods.
	OriginVerify string
}

// answerer is what Handler and Check share: the
// decision (which records itself) and how its answers are rendered.
type answerer struct {
	a       *authorizer.Authorizer
	log     *slog.Logger
	m       *metrics.Metrics
	headers headers.Dialects
}

func newAnswerer(a *authorizer.Authorizer, o Options) answerer {
	o.Logger = cmp.Or(o.Logger, slog.Default())
	o.Headers = cmp.Or(o.Headers, headers.Default)
	return answerer{a: a, log: o.Logger, m: o.Metrics, headers: o.Headers}
}

// Handler answers API Gateway authorizer events with the core's decision
// (authorizer.Authorizer): the authorizer Lambda's handler, and behind an
// in-process upstream the ratelimit package's wrappers' (the Chain methods).
type Handler struct {
	answerer
	up     *identity.Upstream // nil: no upstream authorizer
	origin []byte             // nil: no origin check
}

// NewHandler returns the handler of authorizer events around a.
func NewHandler(a *authorizer.Authorizer, o Options) *Handler {
	h := &Handler{answerer: newAnswerer(a, o), up: o.Upstream}
	if o.OriginVerify != "" {
		h.origin = []byte(o.OriginVerify)
	}
	return h
}

// Observing returns a copy of h whose decisions are also told to fn
// (authorizer.Authorizer.WithObserver): for a Handler another package
// built, as sluice local's gateway does with its App's. h itself is
// unchanged.
func (h *Handler) Observing(fn authorizer.Observe) *Handler {
	c := *h
	c.a = h.a.WithObserver(fn)
	return &c
}

// REST answers a REST API REQUEST authorizer event: an Allow or Deny policy
// for ev.MethodArn, principalId the subject hash, and the rate-limit context
// values. It returns ErrUnauthorized when the request has no subject, or
// when the upstream authorizer did not allow it.
func (h *Handler) REST(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
	if !h.originVerified(ev.Headers, ev.MultiValueHeaders) {
		return events.APIGatewayCustomAuthorizerResponse{}, h.refuseOrigin(ctx)
	}
	req := edge.RESTAuthorizer(&ev)
	up, err := h.ask(ctx, ev, &req, ev.MethodArn, ev.StageVariables)
	if err != nil {
		return events.APIGatewayCustomAuthorizerResponse{}, err
	}
	return h.answerREST(ctx, &req, ev.MethodArn, up)
}

// answerREST decides on req, whose route is arn (a methodArn, or an HTTP
// API's routeArn), behind up, the upstream authorizer's answer (nil
// without one: behind), and answers with a policy (restResponse). It
// returns ErrUnauthorized when up does not allow arn or req has no
// subject. Every policy answer is made here: Sluice's own, and behind an
// upstream, invoked or in process.
func (h *answerer) answerREST(ctx context.Context, req *authorizer.Request, arn string, up *upstreamAnswer) (events.APIGatewayCustomAuthorizerResponse, error) {
	if up != nil {
		if err := h.behind(ctx, up, arn, req); err != nil {
			return events.APIGatewayCustomAuthorizerResponse{}, err
		}
	}
	res, ok := h.decide(ctx, req)
	if !ok {
		return events.APIGatewayCustomAuthorizerResponse{}, ErrUnauthorized
	}
	return h.restResponse(&res, req, arn, up), nil
}

// answerHTTP is answerREST for an HTTP API with simple responses
// (simpleResponse): every simple answer is made here.
func (h *answerer) answerHTTP(ctx context.Context, req *authorizer.Request, routeARN string, up *upstreamAnswer) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	if up != nil {
		if err := h.behind(ctx, up, routeARN, req); err != nil {
			return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
		}
	}
	res, ok := h.decide(ctx, req)
	if !ok {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, ErrUnauthorized
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{
		IsAuthorized: res.Allowed,
		Context:      h.answerContext(&res, up),
	}, nil
}

// restResponse is the REST answer of res for methodARN: an Allow or Deny
// of it. up is the upstream's answer that allowed the request, nil
// without one: its principalId (the backend's contract; the subject hash
// when it has none) and usageIdentifierKey (a usage plan's key,
// apiKeySource AUTHORIZER) are kept, on allow and on Sluice's deny alike,
// and its context merged (answerContext).
func (h *answerer) restResponse(res *authorizer.Result, req *authorizer.Request, methodARN string, up *upstreamAnswer) events.APIGatewayCustomAuthorizerResponse {
	effect := "Deny"
	if res.Allowed {
		effect = "Allow"
	}
	principal := h.a.SubjectHash(res.Subject)
	var usageKey string
	if up != nil {
		if up.PrincipalID != "" {
			principal = up.PrincipalID
		}
		usageKey = up.UsageIdentifierKey
	}
	return events.APIGatewayCustomAuthorizerResponse{
		UsageIdentifierKey: usageKey,
		PrincipalID:        principal,
		PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{
			Version: "2012-10-17",
			Statement: []events.IAMPolicyStatement{{
				Action:   invokeActions,
				Effect:   effect,
				Resource: []string{methodARN},
			}},
		},
		Context: h.answerContext(res, up),
	}
}

// HTTP answers an HTTP API (payload format 2.0) authorizer event with a
// simple response. A deny is isAuthorized false, which the HTTP API always
// answers with 403: it cannot send 429 or Retry-After. It returns
// ErrUnauthorized (401) when the request has no subject, or when the
// upstream authorizer did not allow it.
func (h *Handler) HTTP(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	if !h.originVerified(ev.Headers, nil) {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, h.refuseOrigin(ctx)
	}
	req := edge.HTTPAuthorizer(&ev)
	up, err := h.ask(ctx, ev, &req, ev.RouteArn, ev.StageVariables)
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
	}
	return h.answerHTTP(ctx, &req, ev.RouteArn, up)
}

// Invoke makes Handler a lambda.Handler taking either event kind: a
// payload with "version": "2.0" is an HTTP API event, anything else a REST
// API REQUEST event (or an HTTP API payload 1.0 event, which has the same
// shape and takes the same IAM policy). One function can so serve both
// kinds of API. It answers exactly as REST and HTTP do.
func (h *Handler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var ev edge.AuthorizerEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("decode authorizer event: %w", err)
	}
	if !ev.V2() && ev.Type != "" && ev.Type != "REQUEST" {
		return nil, fmt.Errorf("authorizer event type %q: only REQUEST authorizers are supported", ev.Type)
	}
	if !h.originVerified(ev.Headers, ev.MultiHeaders) {
		return nil, h.refuseOrigin(ctx)
	}
	req := ev.Request()
	arn := ev.MethodArn
	if ev.V2() {
		arn = ev.RouteArn
	}
	up, err := h.ask(ctx, payload, &req, arn, ev.StageVariables)
	if err != nil {
		return nil, err
	}
	if ev.V2() {
		out, err := h.answerHTTP(ctx, &req, arn, up)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
	out, err := h.answerREST(ctx, &req, arn, up)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// decide runs the decision, which records itself (the core's log line,
// metrics, stats and observer); ok is false when the request has no
// subject.
func (h *answerer) decide(ctx context.Context, req *authorizer.Request) (authorizer.Result, bool) {
	res, err := h.a.Decide(ctx, req)
	return res, !errors.Is(err, authorizer.ErrNoSubject)
}

// answerContext is the context of an authorizer answer of r: Sluice's
// own values (contextValues), merged behind an upstream with the context
// of its answer up (mergeContext); nil up: Sluice's alone.
func (h *answerer) answerContext(r *authorizer.Result, up *upstreamAnswer) map[string]any {
	v := h.contextValues(r)
	if up != nil {
		v = mergeContext(v, up.Context)
	}
	return v
}

// contextValues are the authorizer context of r (edge.Context).
func (h *answerer) contextValues(r *authorizer.Result) map[string]any {
	return edge.Context(r, h.headers, time.Now())
}

// OriginVerifyHeader is the header the CDN edge's distribution adds to
// every request it sends the REST API, and the authorizer requires when
// Options.OriginVerify is set: a request that did not come through the
// distribution does not carry its value.
const OriginVerifyHeader = "X-Origin-Verify"

// originVerified reports whether the event's headers carry exactly one
// X-Origin-Verify whose value is h's (true when h has none to require).
// headers is the single-value map (any case; API Gateway keeps the
// sender's), multi the multi-value one (REST; nil for an HTTP API, whose
// map joins repeated headers with commas, which a value cannot hold). The
// comparison takes the same time for every value of a given length.
func (h *Handler) originVerified(headers map[string]string, multi map[string][]string) bool {
	if h.origin == nil {
		return true
	}
	var got string
	n := 0
	for k, v := range headers {
		if strings.EqualFold(k, OriginVerifyHeader) {
			got = v
			n++
		}
	}
	for k, vs := range multi {
		if strings.EqualFold(k, OriginVerifyHeader) && len(vs) != 1 {
			return false
		}
	}
	return n == 1 && subtle.ConstantTimeCompare([]byte(got), h.origin) == 1
}

// refuseOrigin logs and counts a request the origin check refused, and
// returns ErrUnauthorized: API Gateway answers 401, as it does itself
// when the header is missing (an identity source), not ACCESS_DENIED,
// which the stack turns into a 429 telling the sender to come back. The
// line names neither the value sent nor the subject.
func (h *Handler) refuseOrigin(ctx context.Context) error {
	h.m.Unauthorized()
	h.log.LogAttrs(ctx, slog.LevelWarn, "request not through the edge's distribution",
		slog.String("header", OriginVerifyHeader), slog.Int("status", http.StatusUnauthorized))
	return ErrUnauthorized
}
