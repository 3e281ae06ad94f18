package apigw

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
)

// Guard is the decision of a handler that answers the request itself
// instead of an authorizer that answers API Gateway: the public ratelimit
// package's net/http middleware and its Lambda integration wrappers (API
// Gateway HTTP API, REST proxy, ALB). It runs the authorizer's one path:
// the same Decide (subject sources and hygiene, rules, limiter), the same
// decision log line, EMF metrics and stats, and the same rate-limit fields
// in the same dialects as the check API sends and the gateway responses
// map from the authorizer's context.
type Guard struct{ handler }

// NewGuard returns the Guard around a.
func NewGuard(a *authorizer.Authorizer, o Options) *Guard {
	return &Guard{handler: newHandler(a, o)}
}

// Decide decides on req as the authorizer does and records the decision
// (log line, metrics, stats). Its error wraps authorizer.ErrNoSubject when
// no source yields a usable subject (the authorizer's 401), counted as
// unauthorized and not logged; else it is the limiter's failure, already
// logged, with res holding what the rules' failure mode decided (allowed
// with FailOpen, or denied).
func (g *Guard) Decide(ctx context.Context, req *authorizer.Request) (authorizer.Result, error) {
	res, err := g.a.Decide(ctx, req)
	if errors.Is(err, authorizer.ErrNoSubject) {
		g.m.Unauthorized()
		return res, err
	}
	g.record(ctx, req, &res, err)
	return res, err
}

// SetFields sets in hdr the rate-limit fields of the configured dialects
// for res, nothing when no rule applied, and Retry-After (whole seconds,
// rounded up) when res denies.
func (g *Guard) SetFields(hdr http.Header, res *authorizer.Result) { g.setFields(hdr, res) }

// setFields is SetFields, shared with the check API: the values are the
// authorizer context's (contextValues), so every answer says the same.
func (h *handler) setFields(hdr http.Header, res *authorizer.Result) {
	if res.Effective != nil {
		ctxv := h.contextValues(res)
		for _, f := range h.headers.Fields() {
			// Assigned, not Set: Set would canonicalise RateLimit to
			// Ratelimit.
			hdr[f.Name] = []string{fmt.Sprint(ctxv[f.Key])}
		}
	}
	if !res.Allowed {
		hdr.Set("Retry-After", strconv.FormatInt(authorizer.Seconds(res.RetryAfter), 10))
	}
}

// HTTPAPIRequest is what the decision reads of an HTTP API (payload format
// 2.0) Lambda integration event: the api id, the route key's method (the
// request's own when the key's is ANY) and resource template, as
// httpRequest reads them of the authorizer's event of the same request.
// Repeated headers and parameters arrive joined with commas, which the
// subject sources refuse.
func HTTPAPIRequest(ev *events.APIGatewayV2HTTPRequest) authorizer.Request {
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

// ProxyRequest is what the decision reads of a REST API Lambda proxy
// event, as restRequest reads it of the authorizer's event of the same
// request (its validated API key included).
func ProxyRequest(ev *events.APIGatewayProxyRequest) authorizer.Request {
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

// ALBRequest is what the decision reads of an Application Load Balancer
// target event: no api id and no route template (an ALB has neither; the
// caller names them), the method, the headers and parameters in whichever
// form the target group sends (multi-value or not), and the source IP: the
// last address of X-Forwarded-For, which the load balancer appends itself
// (the ones before it are the client's to write). ALB sends parameters
// percent-encoded as the client wrote them; the query sources read them so.
func ALBRequest(ev *events.ALBTargetGroupRequest) authorizer.Request {
	req := authorizer.Request{
		Method:       ev.HTTPMethod,
		Headers:      ev.Headers,
		MultiHeaders: ev.MultiValueHeaders,
		Query:        ev.QueryStringParameters,
		MultiQuery:   ev.MultiValueQueryStringParameters,
	}
	xff := ev.Headers["x-forwarded-for"]
	if vs := ev.MultiValueHeaders["x-forwarded-for"]; len(vs) > 0 {
		xff = vs[len(vs)-1]
	}
	if i := strings.LastIndexByte(xff, ','); i >= 0 {
		xff = xff[i+1:]
	}
	if ip := net.ParseIP(strings.TrimSpace(xff)); ip != nil {
		req.SourceIP = ip.String()
	}
	if req.Headers == nil && req.MultiHeaders != nil {
		// A multi-value target group sends no single-value maps: the
		// sources read the last value, as the load balancer's own.
		req.Headers = lastValues(req.MultiHeaders)
		req.Query = lastValues(req.MultiQuery)
	}
	return req
}

// lastValues is m with each key's last value.
func lastValues(m map[string][]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, vs := range m {
		if len(vs) > 0 {
			out[k] = vs[len(vs)-1]
		}
	}
	return out
}
