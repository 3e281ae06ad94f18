package ratelimit

import (
	"context"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge"
	"github.com/sluicehq/sluice/internal/limiter"
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
	core := l.decider(&o)
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		req := edge.HTTPAPI(&ev, o.ForwardedHops)
		hdr, status, body, slots := l.judgeEvent(ctx, core, &req, &o)
		if status != 0 {
			return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: single(hdr), Body: string(body)}, nil
		}
		// The in-flight slots are freed when h returns, panics included.
		defer core.Release(ctx, slots)
		resp, err := h(ctx, ev)
		if err == nil && len(hdr) > 0 {
			resp.Headers = addFields(resp.Headers, hdr)
		}
		return resp, err
	}
}

// LimitProxy returns h behind Sluice's limits, for a REST API Lambda proxy
// integration, as LimitHTTPAPI does for an HTTP API: the event's resource
// template, method, headers and parameters (a subject sent twice is
// refused), validated API key and source IP are what Sluice's REST
// authorizer reads of the same request. It is the answer for a REST API
// that has no Sluice authorizer; one that has needs no wrapper.
func (l *Limiter) LimitProxy(h ProxyHandler, o HandlerOptions) ProxyHandler {
	core := l.decider(&o)
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		req := edge.Proxy(&ev, o.ForwardedHops)
		hdr, status, body, slots := l.judgeEvent(ctx, core, &req, &o)
		if status != 0 {
			return events.APIGatewayProxyResponse{StatusCode: status, Headers: single(hdr), Body: string(body)}, nil
		}
		// The in-flight slots are freed when h returns, panics included.
		defer core.Release(ctx, slots)
		resp, err := h(ctx, ev)
		if err == nil && len(hdr) > 0 {
			resp.Headers = addFields(resp.Headers, hdr)
		}
		return resp, err
	}
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
	core := l.decider(&o)
	return func(ctx context.Context, ev events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		req := edge.ALB(&ev, o.ForwardedHops)
		if o.Resource != nil {
			req.Resource = o.Resource(ev.HTTPMethod, ev.Path)
		}
		hdr, status, body, slots := l.judgeEvent(ctx, core, &req, &o)
		multi := ev.MultiValueHeaders != nil
		if status != 0 {
			resp := events.ALBTargetGroupResponse{StatusCode: status, StatusDescription: strconv.Itoa(status) + " " + http.StatusText(status), Body: string(body)}
			if multi {
				resp.MultiValueHeaders = hdr
			} else {
				resp.Headers = single(hdr)
			}
			return resp, nil
		}
		// The in-flight slots are freed when h returns, panics included.
		defer core.Release(ctx, slots)
		resp, err := h(ctx, ev)
		if err == nil && len(hdr) > 0 {
			if multi {
				for k, v := range hdr {
					if _, taken := resp.MultiValueHeaders[k]; !taken {
						if resp.MultiValueHeaders == nil {
							resp.MultiValueHeaders = make(map[string][]string, len(hdr))
						}
						resp.MultiValueHeaders[k] = v
					}
				}
			} else {
				resp.Headers = addFields(resp.Headers, hdr)
			}
		}
		return resp, err
	}
}

// judgeEvent is judge for an integration event: o.API, when set, names
// the api; hdr is nil when the request passes without fields to add.
func (l *Limiter) judgeEvent(ctx context.Context, core *authorizer.Authorizer, req *authorizer.Request, o *HandlerOptions) (hdr http.Header, status int, body []byte, slots limiter.Slots) {
	if o.API != "" {
		req.API = o.API
	}
	hdr = http.Header{}
	status, body, slots = l.judge(ctx, core, req, hdr, o)
	return hdr, status, body, slots
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
