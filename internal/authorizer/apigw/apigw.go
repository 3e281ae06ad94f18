// Package apigw adapts the authorizer decision to AWS API Gateway and Lambda:
// REST API REQUEST authorizer events in, IAM policies out; HTTP API (payload
// 2.0) authorizer events in, simple responses out; and the check API's
// proxy and Function URL events. The Lambdas in functions/ and the local
// gateway of cmd/sluice call the same handlers.
//
// On deny a REST API gets a Deny policy, which the gateway answers with its
// ACCESS_DENIED response (403 by default; the infra rewrites it to 429 with
// Retry-After and the RateLimit fields taken from the context values). An
// HTTP API can only answer 403 when a Lambda authorizer says no: its simple
// responses have no status, and its gateway responses cannot be customised.
package apigw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/stats"
)

// ErrUnauthorized is returned to API Gateway when a request has no subject:
// the exact message "Unauthorized" makes the gateway answer 401.
var ErrUnauthorized = errors.New("Unauthorized")

// Context keys of the authorizer response, readable in the gateway as
// $context.authorizer.<key> (REST) or $context.authorizer.<key> /
// $request.context.authorizer.<key> (HTTP).
const (
	KeyLimit           = "limit"           // number: tokens per period of the limiting rule
	KeyRemaining       = "remaining"       // number: tokens left
	KeyReset           = "reset"           // number: seconds until the bucket is full, rounded up
	KeyRetryAfter      = "retryAfter"      // number: seconds until a retry can pass, rounded up; 0 when allowed
	KeyRateLimitPolicy = "rateLimitPolicy" // string: RateLimit-Policy field value
	KeyRateLimit       = "rateLimit"       // string: RateLimit field value
	KeyRule            = "rule"            // string: id of the limiting rule, "" when none applied
	KeyFailOpen        = "failOpen"        // boolean: Redis failed and the request was let through
	// KeyResetAt is only present with the legacy header dialect
	// (RATELIMIT_HEADERS): X-RateLimit-Reset's Unix time.
	KeyResetAt = headers.KeyResetAt // number: Unix time in seconds when the bucket is full
)

// InvokeAction is the IAM action API Gateway checks an authorizer policy for.
const InvokeAction = "execute-api:Invoke"

var invokeActions = []string{InvokeAction}

// Options configure the handlers.
type Options struct {
	// Logger receives one line per error and per fail-open; default
	// slog.Default().
	Logger *slog.Logger
	// Metrics, when set, aggregates decisions into CloudWatch EMF lines.
	Metrics *Metrics
	// Headers are the rate-limit header dialects (RATELIMIT_HEADERS) whose
	// values the context carries and the check API sends; 0 means
	// headers.Default.
	Headers headers.Dialects
	// Stats, when set, counts every decision per rule and each denied
	// subject (by hash), for the admin API's GET /stats (sluice local).
	Stats *stats.Stats
	// Upstream, when set, is the authorizer asked first
	// (UPSTREAM_AUTHORIZER): its answer takes the path of an in-process
	// authorizer's (the Chain methods): when it does not allow, the answer
	// is Unauthorized (401); its Allow names the caller (principal,
	// context:<key> sources), and its principalId, context and
	// usageIdentifierKey are passed on. Authorizer handlers only.
	Upstream *identity.Upstream
	// ShowSubjects are the kinds of source whose subjects the decision log
	// line and the stats carry as sent (SUBJECT_SHOW), beside the hash:
	// identities only (identity.SourceJWT, SourceContext, SourcePrincipal,
	// SourceIP). A credential kind (header, query, apikey) is ignored here
	// whatever the caller passes: an API key is never logged. Default none:
	// every subject is only a hash.
	ShowSubjects []identity.SourceKind
	// Observe, when set, is told of every decision of the authorizer and
	// check handlers, unauthorized ones included (not of a Guard's: its
	// callers tell their own observers, with their answer's time): the hook through which sluice local
	// counts the REST API's decisions in its Prometheus metrics, without
	// this package (and so the Lambdas) depending on Prometheus.
	Observe Observe
}

// Observe is told of one decision: req and what Decide returned for it,
// and took, the decision's time (subject, rules, limiter). It is called on
// the request's goroutine before the answer is made: it must be quick and
// safe for concurrent use, and must not keep req or res.
type Observe func(req *authorizer.Request, res *authorizer.Result, err error, took time.Duration)

// Showable reports whether subjects of kind may be shown as sent: they
// name someone (a verified claim, an upstream authorizer's answer, an
// address) rather than being a secret that lets one in (a header, a
// query parameter, an API key).
func Showable(kind identity.SourceKind) bool {
	return kind.Verified() || kind == identity.SourceIP
}

// handler is what the authorizer and the check handlers share: the
// decision, its log and its metrics.
type handler struct {
	a       *authorizer.Authorizer
	log     *slog.Logger
	m       *Metrics
	headers headers.Dialects
	stats   *stats.Stats
	show    uint32 // bit k: subjects of SourceKind k are shown (Showable kinds only)
	observe Observe
}

func newHandler(a *authorizer.Authorizer, o Options) handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Headers == 0 {
		o.Headers = headers.Default
	}
	var show uint32
	for _, k := range o.ShowSubjects {
		if Showable(k) && k < 32 {
			show |= 1 << k
		}
	}
	return handler{a: a, log: o.Logger, m: o.Metrics, headers: o.Headers, stats: o.Stats, show: show, observe: o.Observe}
}

// shown is what the log and the stats carry as subject beside its hash:
// subject as sent when its source's kind was opted in and may be shown,
// else "".
func (h *handler) shown(kind identity.SourceKind, subject string) string {
	if kind == 0 || kind >= 32 || h.show&(1<<kind) == 0 || !Showable(kind) {
		return ""
	}
	return subject
}

// Authorizer answers API Gateway authorizer events.
type Authorizer struct {
	handler
	up *identity.Upstream // nil: no upstream authorizer
}

// NewAuthorizer returns the authorizer event handler around a.
func NewAuthorizer(a *authorizer.Authorizer, o Options) *Authorizer {
	return &Authorizer{handler: newHandler(a, o), up: o.Upstream}
}

// Observing returns a copy of h that also tells fn of every decision
// (Options.Observe): for an Authorizer another package built, as sluice
// local's gateway does with its App's. h itself is unchanged.
func (h *Authorizer) Observing(fn Observe) *Authorizer {
	c := *h
	c.observe = fn
	return &c
}

// REST answers a REST API REQUEST authorizer event: an Allow or Deny policy
// for ev.MethodArn, principalId the subject hash, and the rate-limit context
// values. It returns ErrUnauthorized when the request has no subject, or
// when the upstream authorizer did not allow it.
func (h *Authorizer) REST(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
	req := restRequest(&ev)
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
func (h *handler) answerREST(ctx context.Context, req *authorizer.Request, arn string, up *upstreamAnswer) (events.APIGatewayCustomAuthorizerResponse, error) {
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
func (h *handler) answerHTTP(ctx context.Context, req *authorizer.Request, routeARN string, up *upstreamAnswer) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
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

// restRequest is what the decision reads of a REST API REQUEST event.
func restRequest(ev *events.APIGatewayCustomAuthorizerRequestTypeRequest) authorizer.Request {
	return authorizer.Request{
		API:          ev.RequestContext.APIID,
		Method:       first(ev.HTTPMethod, ev.RequestContext.HTTPMethod),
		Resource:     first(ev.Resource, ev.RequestContext.ResourcePath),
		Headers:      ev.Headers,
		MultiHeaders: ev.MultiValueHeaders,
		Query:        ev.QueryStringParameters,
		MultiQuery:   ev.MultiValueQueryStringParameters,
		APIKey:       ev.RequestContext.Identity.APIKey,
		SourceIP:     ev.RequestContext.Identity.SourceIP,
	}
}

// httpRequest is what the decision reads of an HTTP API payload 2.0 event.
func httpRequest(ev *events.APIGatewayV2CustomAuthorizerV2Request) authorizer.Request {
	method, resource := httpRoute(ev.RouteKey, ev.RequestContext.HTTP.Method)
	return authorizer.Request{
		API:      ev.RequestContext.APIID,
		Method:   method,
		Resource: resource,
		Headers:  ev.Headers,
		Query:    ev.QueryStringParameters,
		SourceIP: ev.RequestContext.HTTP.SourceIP,
	}
}

// restResponse is the REST answer of res for methodARN: an Allow or Deny
// of it. up is the upstream's answer that allowed the request, nil
// without one: its principalId (the backend's contract; the subject hash
// when it has none) and usageIdentifierKey (a usage plan's key,
// apiKeySource AUTHORIZER) are kept, on allow and on Sluice's deny alike,
// and its context merged (answerContext).
func (h *handler) restResponse(res *authorizer.Result, req *authorizer.Request, methodARN string, up *upstreamAnswer) events.APIGatewayCustomAuthorizerResponse {
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
func (h *Authorizer) HTTP(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	req := httpRequest(&ev)
	up, err := h.ask(ctx, ev, &req, ev.RouteArn, ev.StageVariables)
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
	}
	return h.answerHTTP(ctx, &req, ev.RouteArn, up)
}

// httpRoute splits an HTTP API route key ("GET /orders/{id}", "ANY /x",
// "$default") into the method the rules match (the request's real one, as
// the key's may be ANY) and the resource template.
func httpRoute(routeKey, method string) (string, string) {
	m, r, ok := strings.Cut(routeKey, " ")
	if !ok {
		return method, routeKey
	}
	if method == "" {
		method = m
	}
	return method, r
}

// authEvent is the union of what the decision reads from a REST API
// REQUEST event and an HTTP API payload 2.0 event, so Invoke decodes a
// payload once and skips the rest (multi-value maps, certificates).
type authEvent struct {
	Version        string              `json:"version"`
	Type           string              `json:"type"`
	MethodArn      string              `json:"methodArn"` //nolint:staticcheck // API Gateway's spelling
	RouteArn       string              `json:"routeArn"`
	Resource       string              `json:"resource"`
	HTTPMethod     string              `json:"httpMethod"`
	RouteKey       string              `json:"routeKey"`
	Headers        map[string]string   `json:"headers"`
	MultiHeaders   map[string][]string `json:"multiValueHeaders"`
	Query          map[string]string   `json:"queryStringParameters"`
	MultiQuery     map[string][]string `json:"multiValueQueryStringParameters"`
	StageVariables map[string]string   `json:"stageVariables"`
	RequestContext struct {
		APIID        string `json:"apiId"`
		HTTPMethod   string `json:"httpMethod"`
		ResourcePath string `json:"resourcePath"`
		Identity     struct {
			APIKey   string `json:"apiKey"`
			SourceIP string `json:"sourceIp"`
		} `json:"identity"`
		HTTP struct {
			Method   string `json:"method"`
			SourceIP string `json:"sourceIp"`
		} `json:"http"`
	} `json:"requestContext"`
}

// Invoke makes Authorizer a lambda.Handler taking either event kind: a
// payload with "version": "2.0" is an HTTP API event, anything else a REST
// API REQUEST event (or an HTTP API payload 1.0 event, which has the same
// shape and takes the same IAM policy). One function can so serve both
// kinds of API. It answers exactly as REST and HTTP do.
func (h *Authorizer) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var ev authEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("decode authorizer event: %w", err)
	}
	rc := &ev.RequestContext
	if ev.Version == "2.0" {
		req := authorizer.Request{API: rc.APIID, Headers: ev.Headers, Query: ev.Query, SourceIP: rc.HTTP.SourceIP}
		req.Method, req.Resource = httpRoute(ev.RouteKey, rc.HTTP.Method)
		up, err := h.ask(ctx, payload, &req, ev.RouteArn, ev.StageVariables)
		if err != nil {
			return nil, err
		}
		out, err := h.answerHTTP(ctx, &req, ev.RouteArn, up)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
	if ev.Type != "" && ev.Type != "REQUEST" {
		return nil, fmt.Errorf("authorizer event type %q: only REQUEST authorizers are supported", ev.Type)
	}
	req := authorizer.Request{
		API:          rc.APIID,
		Method:       first(ev.HTTPMethod, rc.HTTPMethod),
		Resource:     first(ev.Resource, rc.ResourcePath),
		Headers:      ev.Headers,
		MultiHeaders: ev.MultiHeaders,
		Query:        ev.Query,
		MultiQuery:   ev.MultiQuery,
		APIKey:       rc.Identity.APIKey,
		SourceIP:     rc.Identity.SourceIP,
	}
	up, err := h.ask(ctx, payload, &req, ev.MethodArn, ev.StageVariables)
	if err != nil {
		return nil, err
	}
	out, err := h.answerREST(ctx, &req, ev.MethodArn, up)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// decide runs the decision, logs its error or fail-open, and records it;
// ok is false when the request has no subject. Behind an upstream
// authorizer (req.Upstream) a missing subject is logged at warn, saying
// what the answer lacks and never a value: the upstream vouched for the
// caller, so its answer or SUBJECT_SOURCES is wrong.
func (h *handler) decide(ctx context.Context, req *authorizer.Request) (authorizer.Result, bool) {
	var start time.Time
	if h.observe != nil {
		start = time.Now()
	}
	res, err := h.a.Decide(ctx, req)
	if h.observe != nil {
		h.observe(req, &res, err, time.Since(start))
	}
	if errors.Is(err, authorizer.ErrNoSubject) {
		h.m.Unauthorized()
		if req.Upstream != nil {
			h.log.LogAttrs(ctx, slog.LevelWarn, "no subject in the upstream authorizer's answer",
				slog.String("api", req.API), slog.String("route", req.Method+" "+req.Resource), slog.Any("error", err))
		}
		return res, false
	}
	h.record(ctx, req, &res, err)
	return res, true
}

// record logs a decision that was not a plain allow and counts every
// decision in the metrics and the stats. The log line and the stats name
// the subject of the limiting rule's dimension (DimensionSubject): a
// per-IP floor's denial is the IP's, not that of the one-off key the
// request carried, so a random-key flood shows as one IP.
func (h *handler) record(ctx context.Context, req *authorizer.Request, res *authorizer.Result, err error) {
	var hash, shown string
	if err != nil || res.FailOpen || !res.Allowed || res.ShadowDenied {
		// Only these are hashed: an allowed request pays nothing more.
		subject, kind := res.DimensionSubject, res.DimensionSource
		if subject == "" { // no rule applied
			subject, kind = res.Subject, 0
		}
		hash, shown = h.a.SubjectHash(subject), h.shown(kind, subject)
		logDecision(ctx, h.log, req, res, hash, shown, err)
	}
	h.m.Record(res)
	if err != nil && !res.FailOpen {
		h.m.FailClosed()
	}
	h.stats.Record(stats.Decision{Rule: res.Rule, API: req.API, SubjectHash: hash, Subject: shown,
		Allowed: res.Allowed, ShadowDenied: res.ShadowDenied, FailOpen: res.FailOpen})
}

// Decision values of the decision log line (its "decision" key), what the
// stack's Contributor Insights rules filter on.
const (
	DecisionDeny       = "deny"        // a rule denied
	DecisionShadowDeny = "shadow-deny" // a shadow rule would have denied; allowed
	DecisionFailOpen   = "fail-open"   // Redis failed, the rule fails open; allowed
	DecisionFailClosed = "fail-closed" // Redis failed, the rule fails closed; denied
	// DecisionUpstreamDeny: the upstream authorizer did not allow, or
	// answered what Sluice cannot read; 401, no limiter call.
	DecisionUpstreamDeny = "upstream-deny"
)

// logDecision writes the one line of a decision that was not a plain
// allow: a denial or shadow denial at info, a fail-open at warn, a failure
// at error. Every line carries api, ruleId, dimension (the limiting
// rule's), principalId (hash: that dimension's subject's) and decision,
// which is what the deployed stack's Contributor Insights rules count: it
// needs LOG_LEVEL info (the default) to see denials. A denial served from the local deny cache is logged too, so
// the counts are of denied requests, not of Redis calls. When shown is not
// "" (SUBJECT_SHOW named the subject's source, an identity) the line
// carries it as "subject" beside the hash; a credential never is.
func logDecision(ctx context.Context, log *slog.Logger, req *authorizer.Request, res *authorizer.Result, hash, shown string, err error) {
	level, msg, decision := slog.LevelInfo, "rate limit denied", DecisionDeny
	switch {
	case res.FailOpen:
		level, msg, decision = slog.LevelWarn, "rate limit failed open", DecisionFailOpen
	case err != nil:
		level, msg, decision = slog.LevelError, "rate limit decision failed", DecisionFailClosed
	case res.Allowed:
		msg, decision = "rate limit shadow denied", DecisionShadowDeny
	}
	if !log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("decision", decision),
		slog.String("api", req.API),
		slog.String("route", req.Method+" "+req.Resource),
		slog.String("principalId", hash),
		slog.String("ruleId", res.Rule),
		slog.String("dimension", res.Dimension),
		slog.Bool("allowed", res.Allowed),
		slog.Bool("failOpen", res.FailOpen),
	}
	if shown != "" {
		attrs = append(attrs, slog.String("subject", shown))
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	log.LogAttrs(ctx, level, msg, attrs...)
}

// answerContext is the context of an authorizer answer of r: Sluice's
// own values (contextValues), merged behind an upstream with the context
// of its answer up (mergeContext); nil up: Sluice's alone.
func (h *handler) answerContext(r *authorizer.Result, up *upstreamAnswer) map[string]any {
	v := h.contextValues(r)
	if up != nil {
		v = mergeContext(v, up.Context)
	}
	return v
}

// contextValues are the authorizer context: strings, numbers and booleans
// only, every key always present so gateway mappings never miss one, and
// the keys of the chosen header dialects beyond them (KeyResetAt).
func (h *handler) contextValues(r *authorizer.Result) map[string]any {
	var buf [96]byte
	v := map[string]any{
		KeyLimit:           r.Limit,
		KeyRemaining:       r.Remaining,
		KeyReset:           authorizer.Seconds(r.Reset),
		KeyRetryAfter:      authorizer.Seconds(r.RetryAfter),
		KeyRateLimitPolicy: r.Policy(),
		KeyRateLimit:       string(r.AppendRateLimit(buf[:0])),
		KeyRule:            r.Rule,
		KeyFailOpen:        r.FailOpen,
	}
	// The verified claims, without overwriting the rate-limit keys the
	// gateway responses read.
	for k, x := range r.Context {
		if _, taken := v[k]; !taken {
			v[k] = x
		}
	}
	if h.headers&headers.Legacy != 0 {
		// The authorizer's clock: the client compares it with its own.
		v[KeyResetAt] = resetAt(time.Now(), r)
	}
	return v
}

// resetAt is the Unix time in seconds, rounded up, when r's bucket is full;
// now when no rule applied.
func resetAt(now time.Time, r *authorizer.Result) int64 {
	return now.Add(r.Reset).Add(time.Second - 1).Unix()
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
