package ratelimit

import (
	"context"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge"
)

// HTTPAPIHandler is a Lambda integration handler of an API Gateway HTTP
// API, payload format 2.0, as lambda.Start takes it.
type HTTPAPIHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// ProxyHandler is a Lambda proxy integration handler of an API Gateway
// REST API.
type ProxyHandler func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// ALBHandler is the handler of an Application Load Balancer's Lambda
// target group.
type ALBHandler func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error)

// LimitHTTPAPI returns h behind Sluice's limits, for an HTTP API route
// whose integration is the Lambda: the real 429 an HTTP API authorizer
// cannot send. Each event is decided on as Sluice's authorizer decides on
// the same request (api id, the route key's resource, the request's
// method, the subject sources over its headers, parameters and source
// IP): over the limit the answer is 429 with Retry-After, the RateLimit
// fields and a problem+json body, and h is not called; without a usable
// subject 401; within it, h's answer, with the RateLimit fields added
// when o.AllowHeaders is set (h's own fields of those names win). o.API,
// when set, is the api instead of the event's id.
func (l *Limiter) LimitHTTPAPI(h HTTPAPIHandler, o HandlerOptions) HTTPAPIHandler {
	return limitEvent(l, h, o,
		func(ev *events.APIGatewayV2HTTPRequest) authorizer.Request { return edge.HTTPAPI(ev, o.ForwardedHops) },
		func(_ *events.APIGatewayV2HTTPRequest, status int, hdr http.Header, body string) events.APIGatewayV2HTTPResponse {
			return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: single(hdr), Body: body}
		},
		func(_ *events.APIGatewayV2HTTPRequest, resp *events.APIGatewayV2HTTPResponse, hdr http.Header) {
			resp.Headers = addFields(resp.Headers, hdr)
		})
}

// LimitProxy returns h behind Sluice's limits, for a REST API Lambda proxy
// integration, as LimitHTTPAPI does for an HTTP API: the event's resource
// template, method, headers and parameters (a subject sent twice is
// refused), validated API key and source IP are what Sluice's REST
// authorizer reads of the same request. It is the answer for a REST API
// that has no Sluice authorizer; one that has needs no wrapper.
func (l *Limiter) LimitProxy(h ProxyHandler, o HandlerOptions) ProxyHandler {
	return limitEvent(l, h, o,
		func(ev *events.APIGatewayProxyRequest) authorizer.Request { return edge.Proxy(ev, o.ForwardedHops) },
		func(_ *events.APIGatewayProxyRequest, status int, hdr http.Header, body string) events.APIGatewayProxyResponse {
			return events.APIGatewayProxyResponse{StatusCode: status, Headers: single(hdr), Body: body}
		},
		func(_ *events.APIGatewayProxyRequest, resp *events.APIGatewayProxyResponse, hdr http.Header) {
			resp.Headers = addFields(resp.Headers, hdr)
		})
}

// LimitALB returns h behind Sluice's limits, for an Application Load
// Balancer's Lambda target, as LimitHTTPAPI does for an HTTP API. A load
// balancer has neither api id nor route template: the api is o.API, the
// route o.Resource's answer for the event's method and path (nil: the
// rules of route "*" only). The ip source reads X-Forwarded-For's
// o.ForwardedHops-th address from the right: 1 for a load balancer in its
// default append mode; 0 (the default) gives the ip source nothing, as an
// ALB event carries no address of its own. Query parameters are
// percent-decoded, as the backend decodes them. The answer's headers take the form
// of the event's (multi-value when the target group sends multi-value
// headers, as the load balancer then requires).
func (l *Limiter) LimitALB(h ALBHandler, o HandlerOptions) ALBHandler {
	return limitEvent(l, h, o,
		func(ev *events.ALBTargetGroupRequest) authorizer.Request {
			req := edge.ALB(ev, o.ForwardedHops)
			if o.Resource != nil {
				req.Resource = o.Resource(ev.HTTPMethod, ev.Path)
			}
			return req
		},
		func(ev *events.ALBTargetGroupRequest, status int, hdr http.Header, body string) events.ALBTargetGroupResponse {
			resp := events.ALBTargetGroupResponse{StatusCode: status, StatusDescription: strconv.Itoa(status) + " " + http.StatusText(status), Body: body}
			if ev.MultiValueHeaders != nil {
				resp.MultiValueHeaders = hdr
			} else {
				resp.Headers = single(hdr)
			}
			return resp
		},
		func(ev *events.ALBTargetGroupRequest, resp *events.ALBTargetGroupResponse, hdr http.Header) {
			if ev.MultiValueHeaders == nil {
				resp.Headers = addFields(resp.Headers, hdr)
				return
			}
			for k, v := range hdr {
				if _, taken := resp.MultiValueHeaders[k]; !taken {
					if resp.MultiValueHeaders == nil {
						resp.MultiValueHeaders = make(map[string][]string, len(hdr))
					}
					resp.MultiValueHeaders[k] = v
				}
			}
		})
}

// limitEvent is the one path of the integration wrappers, for events E
// answered with R: read is what the decision reads of an event (o.API,
// when set, names the api instead), refused the answer to a request
// refused (its status, fields and problem body), and add adds the
// RateLimit fields to h's answer when there are any (denied requests
// always carry them; allowed ones with o.AllowHeaders).
func limitEvent[E, R any](l *Limiter, h func(context.Context, E) (R, error), o HandlerOptions, read func(*E) authorizer.Request,
	refused func(ev *E, status int, hdr http.Header, body string) R, add func(ev *E, resp *R, hdr http.Header)) func(context.Context, E) (R, error) {
	core := l.decider(&o)
	return func(ctx context.Context, ev E) (R, error) {
		req := read(&ev)
		if o.API != "" {
			req.API = o.API
		}
		hdr := http.Header{}
		status, body, slots := l.judge(ctx, core, &req, hdr, &o)
		if status != 0 {
			return refused(&ev, status, hdr, string(body)), nil
		}
		// The in-flight slots are freed when h returns, panics included.
		defer core.Release(ctx, slots)
		resp, err := h(ctx, ev)
		if err == nil && len(hdr) > 0 {
			add(&ev, &resp, hdr)
		}
		return resp, err
	}
}

// single is h with one value a name, as single-value event responses carry
// them.
func single(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			out[k] = v[0]
		}
	}
	return out
}

// addFields adds the fields of hdr to headers, but for names headers
// already has (in any case).
func addFields(headers map[string]string, hdr http.Header) map[string]string {
	if headers == nil {
		headers = make(map[string]string, len(hdr))
	}
	have := make(map[string]bool, len(headers))
	for k := range headers {
		have[http.CanonicalHeaderKey(k)] = true
	}
	for k, v := range hdr {
		if !have[http.CanonicalHeaderKey(k)] && len(v) > 0 {
			headers[k] = v[0]
		}
	}
	return headers
}
