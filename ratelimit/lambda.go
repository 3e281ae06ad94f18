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
	return limitEvent(l, h, o, func(ev *events.APIGatewayV2HTTPRequest) authorizer.Request { return edge.HTTPAPI(ev, o.ForwardedHops) },
		func(_ *events.APIGatewayV2HTTPRequest, r *events.APIGatewayV2HTTPResponse) answer {
			return answer{status: &r.StatusCode, body: &r.Body, headers: &r.Headers}
		})
}

// LimitProxy returns h behind Sluice's limits, for a REST API Lambda proxy
// integration, as LimitHTTPAPI does for an HTTP API: the event's resource
// template, method, headers and parameters (a subject sent twice is
// refused), validated API key and source IP are what Sluice's REST
// authorizer reads of the same request. It is the answer for a REST API
// that has no Sluice authorizer; one that has needs no wrapper.
func (l *Limiter) LimitProxy(h ProxyHandler, o HandlerOptions) ProxyHandler {
	return limitEvent(l, h, o, func(ev *events.APIGatewayProxyRequest) authorizer.Request { return edge.Proxy(ev, o.ForwardedHops) },
		func(_ *events.APIGatewayProxyRequest, r *events.APIGatewayProxyResponse) answer {
			return answer{status: &r.StatusCode, body: &r.Body, headers: &r.Headers}
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
		func(ev *events.ALBTargetGroupRequest, r *events.ALBTargetGroupResponse) answer {
			a := answer{status: &r.StatusCode, desc: &r.StatusDescription, body: &r.Body, headers: &r.Headers}
			if ev.MultiValueHeaders != nil {
				a.multi = &r.MultiValueHeaders
			}
			return a
		})
}

// answer points at the fields of an integration's answer the wrappers
// write: its status (and an ALB's status description), body and headers,
// single-value or, where the event came with multi-value headers (an ALB
// target group's setting), multi.
type answer struct {
	status     *int
	desc, body *string
	headers    *map[string]string
	multi      *map[string][]string // nil: single-value headers
}

// limitEvent is the one path of the integration wrappers, for events E
// answered with R: read is what the decision reads of an event (o.API,
// when set, names the api instead), and fields points at the fields of
// an answer. A request refused is answered with its status, fields and
// problem body; h's answer gets the RateLimit fields when there are any
// (denied requests always carry them; allowed ones with o.AllowHeaders).
func limitEvent[E, R any](l *Limiter, h func(context.Context, E) (R, error), o HandlerOptions,
	read func(*E) authorizer.Request, fields func(*E, *R) answer) func(context.Context, E) (R, error) {
	core := l.decider(&o)
	return func(ctx context.Context, ev E) (R, error) {
		req := read(&ev)
		if o.API != "" {
			req.API = o.API
		}
		hdr := http.Header{}
		status, body, slots := l.judge(ctx, core, &req, hdr, &o)
		if status != 0 {
			var resp R
			a := fields(&ev, &resp)
			*a.status, *a.body = status, string(body)
			if a.desc != nil {
				*a.desc = strconv.Itoa(status) + " " + http.StatusText(status)
			}
			a.add(hdr)
			return resp, nil
		}
		// The in-flight slots are freed when h returns, panics included.
		defer core.Release(ctx, slots)
		resp, err := h(ctx, ev)
		if err == nil && len(hdr) > 0 {
			fields(&ev, &resp).add(hdr)
		}
		return resp, err
	}
}

// add adds the fields of hdr to a's headers, but for names they already
// have: in any case in single-value headers, as written in multi-value
// ones.
func (a answer) add(hdr http.Header) {
	if a.multi == nil {
		*a.headers = addFields(*a.headers, hdr)
		return
	}
	for k, v := range hdr {
		if _, taken := (*a.multi)[k]; !taken {
			if *a.multi == nil {
				*a.multi = make(map[string][]string, len(hdr))
			}
			(*a.multi)[k] = v
		}
	}
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
