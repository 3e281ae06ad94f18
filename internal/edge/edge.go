// Package edge turns each transport's request into the decision's
// authorizer.Request, and the decision's authorizer.Result into what each
// transport answers: one function per event shape in, one rendering per
// answer out. It converts and does nothing else: the decision, its log
// line, metrics and stats are the core's (internal/authorizer). Its
// subpackage apigw answers API Gateway's events with these conversions.
//
// Each converter decodes the transport as the transport's own backend
// would, so that a caller cannot make Sluice see another request than the
// handler serves. The questions every edge meets are answered once, here
// and in the core:
//
//   - Query strings are decoded as the backend decodes them. API Gateway
//     hands a Lambda decoded parameters; an Application Load Balancer
//     hands them as the client wrote them, so ALB parameters are
//     percent-decoded here ("%6B%31" is "k1"), and a pair that does not
//     decode is dropped, as Go's url.ParseQuery drops it. A malformed
//     pair never hides the others (net/http: the valid pairs are read).
//   - A value sent twice is kept twice (multi-value maps), so that the
//     subject sources refuse it (identity.Find).
//   - A method is passed on as sent: the core matches it in any case
//     (rules.CanonicalMethod), so "get" meets a GET rule at every edge,
//     and HEAD is matched as GET unless a rule names HEAD for the route
//     (rules.Snapshot.Match), as Go's ServeMux serves it.
//   - A subject that is not UTF-8 is refused (401) at every edge, also
//     where JSON already replaced its bytes with U+FFFD
//     (identity.ValidText).
//   - X-Forwarded-For is read only when the caller says how many proxies
//     in front of the handler append to it (Hops).
package edge

import (
	"cmp"
	"net"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
)

// rest is what a REST API event carries for the decision: the REQUEST
// authorizer's and the proxy integration's, which API Gateway fills alike.
type rest struct {
	api, method, resource string
	headers               map[string]string
	multiHeaders          map[string][]string
	query                 map[string]string
	multiQuery            map[string][]string
	apiKey, sourceIP      string
}

func (e *rest) request() authorizer.Request {
	return authorizer.Request{
		API:          e.api,
		Method:       e.method,
		Resource:     e.resource,
		Headers:      e.headers,
		MultiHeaders: e.multiHeaders,
		// API Gateway decodes parameters before the Lambda sees them.
		Query:      e.query,
		MultiQuery: e.multiQuery,
		APIKey:     e.apiKey,
		SourceIP:   e.sourceIP,
	}
}

// v2 is what an HTTP API payload 2.0 event carries for the decision: the
// authorizer's and the integration's. Repeated headers and parameters
// arrive joined with commas, which the subject sources refuse.
type v2 struct {
	api, routeKey, method string
	headers, query        map[string]string
	sourceIP              string
}

func (e *v2) request() authorizer.Request {
	method, resource := route(e.routeKey, e.method)
	return authorizer.Request{API: e.api, Method: method, Resource: resource,
		Headers: e.headers, Query: e.query, SourceIP: e.sourceIP}
}

// route splits an HTTP API route key ("GET /orders/{id}", "ANY /x",
// "$default") into the method the rules match (the request's real one, as
// the key's may be ANY) and the resource template.
func route(routeKey, method string) (string, string) {
	m, r, ok := strings.Cut(routeKey, " ")
	if !ok {
		return method, routeKey
	}
	if method == "" {
		method = m
	}
	return method, r
}

// AuthorizerEvent is what the decision reads of an API Gateway authorizer
// event, either kind: a REST API REQUEST event (or an HTTP API payload 1.0
// one, of the same shape) and an HTTP API payload 2.0 event, told apart by
// Version. The authorizer Lambda decodes its payload into it once, and
// skips the rest (certificates, the request context's other fields).
type AuthorizerEvent struct {
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

// V2 reports whether ev is an HTTP API payload 2.0 event.
func (ev *AuthorizerEvent) V2() bool { return ev.Version == "2.0" }

// Request is the decision's request of ev.
func (ev *AuthorizerEvent) Request() authorizer.Request {
	rc := &ev.RequestContext
	if ev.V2() {
		e := v2{api: rc.APIID, routeKey: ev.RouteKey, method: rc.HTTP.Method, headers: ev.Headers, query: ev.Query, sourceIP: rc.HTTP.SourceIP}
		return e.request()
	}
	e := rest{api: rc.APIID, method: cmp.Or(ev.HTTPMethod, rc.HTTPMethod), resource: cmp.Or(ev.Resource, rc.ResourcePath),
		headers: ev.Headers, multiHeaders: ev.MultiHeaders, query: ev.Query, multiQuery: ev.MultiQuery,
		apiKey: rc.Identity.APIKey, sourceIP: rc.Identity.SourceIP}
	return e.request()
}

// RESTAuthorizer is the decision's request of a REST API REQUEST
// authorizer event, as a typed handler receives it.
func RESTAuthorizer(ev *events.APIGatewayCustomAuthorizerRequestTypeRequest) authorizer.Request {
	e := rest{api: ev.RequestContext.APIID, method: cmp.Or(ev.HTTPMethod, ev.RequestContext.HTTPMethod),
		resource: cmp.Or(ev.Resource, ev.RequestContext.ResourcePath), headers: ev.Headers, multiHeaders: ev.MultiValueHeaders,
		query: ev.QueryStringParameters, multiQuery: ev.MultiValueQueryStringParameters,
		apiKey: ev.RequestContext.Identity.APIKey, sourceIP: ev.RequestContext.Identity.SourceIP}
	return e.request()
}

// HTTPAuthorizer is the decision's request of an HTTP API payload 2.0
// authorizer event.
func HTTPAuthorizer(ev *events.APIGatewayV2CustomAuthorizerV2Request) authorizer.Request {
	e := v2{api: ev.RequestContext.APIID, routeKey: ev.RouteKey, method: ev.RequestContext.HTTP.Method,
		headers: ev.Headers, query: ev.QueryStringParameters, sourceIP: ev.RequestContext.HTTP.SourceIP}
	return e.request()
}

// Proxy is the decision's request of a REST API Lambda proxy integration
// event: what Sluice's REST authorizer reads of the same request (its
// validated API key included). hops > 0 reads the source IP from
// X-Forwarded-For instead of requestContext.identity.sourceIp (Hops).
func Proxy(ev *events.APIGatewayProxyRequest, hops int) authorizer.Request {
	e := rest{api: ev.RequestContext.APIID, method: cmp.Or(ev.HTTPMethod, ev.RequestContext.HTTPMethod),
		resource: cmp.Or(ev.Resource, ev.RequestContext.ResourcePath), headers: ev.Headers, multiHeaders: ev.MultiValueHeaders,
		query: ev.QueryStringParameters, multiQuery: ev.MultiValueQueryStringParameters,
		apiKey: ev.RequestContext.Identity.APIKey, sourceIP: ev.RequestContext.Identity.SourceIP}
	if hops > 0 {
		e.sourceIP = forwardedEvent(ev.Headers, ev.MultiValueHeaders, hops)
	}
	return e.request()
}

// HTTPAPI is the decision's request of an HTTP API payload 2.0 Lambda
// integration event: what Sluice's HTTP API authorizer reads of the same
// request. hops > 0 reads the source IP from X-Forwarded-For (Hops).
func HTTPAPI(ev *events.APIGatewayV2HTTPRequest, hops int) authorizer.Request {
	e := v2{api: ev.RequestContext.APIID, routeKey: ev.RouteKey, method: ev.RequestContext.HTTP.Method,
		headers: ev.Headers, query: ev.QueryStringParameters, sourceIP: ev.RequestContext.HTTP.SourceIP}
	if hops > 0 {
		e.sourceIP = forwardedEvent(ev.Headers, nil, hops)
	}
	return e.request()
}

// ALB is the decision's request of an Application Load Balancer target
// event: no api id and no route template (a load balancer has neither;
// the caller names them), the method, the headers in whichever form the
// target group sends them, and the query parameters percent-decoded, as
// the backend decodes them (a load balancer passes them as the client
// wrote them: "k1", "%6b1" and "k%31" are one key). The source IP is
// X-Forwarded-For's hops-th address from the right (Hops); with hops 0 the
// request has none, as an ALB event carries no address of its own.
func ALB(ev *events.ALBTargetGroupRequest, hops int) authorizer.Request {
	req := authorizer.Request{
		Method:       ev.HTTPMethod,
		Headers:      ev.Headers,
		MultiHeaders: ev.MultiValueHeaders,
	}
	if req.Headers == nil && req.MultiHeaders != nil {
		// A multi-value target group sends no single-value maps: the
		// sources read the last value, as the load balancer's own.
		req.Headers = lastValues(req.MultiHeaders)
	}
	req.Query, req.MultiQuery = decodeALBQuery(ev.QueryStringParameters, ev.MultiValueQueryStringParameters)
	if hops > 0 {
		req.SourceIP = forwardedEvent(ev.Headers, ev.MultiValueHeaders, hops)
	}
	return req
}

// decodeALBQuery percent-decodes a load balancer's parameters, keys and
// values, as url.ParseQuery would the raw query: '+' is a space, and a
// pair that does not decode is dropped. Keys that decode alike ("k1" and
// "%6b1") merge into one key with every value, which the subject sources
// then refuse as sent twice.
func decodeALBQuery(single map[string]string, multi map[string][]string) (map[string]string, map[string][]string) {
	if len(single) == 0 && len(multi) == 0 {
		return nil, nil
	}
	all := make(url.Values, max(len(single), len(multi)))
	if multi != nil {
		for k, vs := range multi {
			for _, v := range vs {
				addDecoded(all, k, v)
			}
		}
	} else {
		for k, v := range single {
			addDecoded(all, k, v)
		}
	}
	return firstValues(all), all
}

func addDecoded(q url.Values, k, v string) {
	dk, err := url.QueryUnescape(k)
	if err != nil {
		return
	}
	dv, err := url.QueryUnescape(v)
	if err != nil {
		return
	}
	q[dk] = append(q[dk], dv)
}

// parseQuery decodes a raw query string as a Go handler's r.URL.Query() does:
// each pair that decodes is kept, a malformed one ("%zz", a ';') is
// dropped without hiding the others. Nil for an empty query.
func parseQuery(raw string) (map[string]string, map[string][]string) {
	if raw == "" {
		return nil, nil
	}
	q, _ := url.ParseQuery(raw) // the pairs that parsed, as r.URL.Query()
	if len(q) == 0 {
		return nil, nil
	}
	return firstValues(q), q
}

// Hops is how many proxies in front of a handler append the address they
// saw to X-Forwarded-For, and are trusted to: the client's address is the
// hops-th from the right of the header (every line of it, in order). 0 does
// not read the header, whose every address the client may have written.
// docs/middleware.md gives the value for each host (an ALB in append mode:
// 1; CloudFront in front of it: 2).
//
// forwarded returns that address of the X-Forwarded-For values xff, in
// canonical form; "" when the header has fewer addresses than hops, or
// that one does not parse as an IP address.
func forwarded(xff []string, hops int) string {
	if hops <= 0 {
		return ""
	}
	n := 0
	for i := len(xff) - 1; i >= 0; i-- {
		line := xff[i]
		for line != "" {
			var item string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				item, line = line[j+1:], line[:j]
			} else {
				item, line = line, ""
			}
			if n++; n == hops {
				ip := net.ParseIP(strings.TrimSpace(item))
				if ip == nil {
					return ""
				}
				return ip.String()
			}
		}
	}
	return ""
}

// forwardedEvent is forwarded over an event's X-Forwarded-For header,
// looked up case-insensitively, every value when the event has them.
func forwardedEvent(single map[string]string, multi map[string][]string, hops int) string {
	for k, vs := range multi {
		if strings.EqualFold(k, "x-forwarded-for") {
			return forwarded(vs, hops)
		}
	}
	for k, v := range single {
		if strings.EqualFold(k, "x-forwarded-for") {
			return forwarded([]string{v}, hops)
		}
	}
	return ""
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

// firstValues is m with each key's first value. Nil for an empty m.
func firstValues(m map[string][]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, vs := range m {
		if len(vs) > 0 {
			out[k] = vs[0]
		}
	}
	return out
}
