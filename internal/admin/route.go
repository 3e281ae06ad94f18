package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/httpapi"
)

// The admin routes, as "METHOD /resource/{param}" the way API Gateway names
// them. Pass one to Service.HandleRoute (or apigw.Handler) to serve only that
// operation.
const (
	RouteCreateRule    = "POST /rules"
	RouteListRules     = "GET /rules"
	RouteGetRule       = "GET /rules/{id}"
	RouteUpdateRule    = "PUT /rules/{id}"
	RouteDeleteRule    = "DELETE /rules/{id}"
	RouteRuleHistory   = "GET /rules/{id}/history"
	RouteCreatePlan    = "POST /plans"
	RouteListPlans     = "GET /plans"
	RouteGetPlan       = "GET /plans/{name}"
	RouteUpdatePlan    = "PUT /plans/{name}"
	RouteDeletePlan    = "DELETE /plans/{name}"
	RoutePlanHistory   = "GET /plans/{name}/history"
	RouteSubjectLimits = "GET /subjects/{subject}/limits"
	RouteResetSubject  = "DELETE /subjects/{subject}/buckets"
	RouteUsage         = "POST /usage"
	RouteStats         = "GET /stats"
)

// Request is one admin HTTP request, already taken apart by an adapter.
type Request struct {
	// Method is the HTTP method, upper case.
	Method string
	// Resource is the route template the gateway matched, such as
	// "/rules/{id}", with PathParams holding its parameters. When empty,
	// Path is matched against the templates instead.
	Resource string
	// Path is the request path, still percent-encoded (url.URL.EscapedPath);
	// used only when Resource is empty.
	Path string
	// PathParams are the template's parameters as they appear in the path,
	// still percent-encoded; the Service decodes them.
	PathParams map[string]string
	// Query holds the decoded query parameters.
	Query url.Values
	// Header holds the request headers (canonical keys).
	Header http.Header
	// Body is the raw body, already base64-decoded. An adapter may cut it
	// short just past the size limit: the Service only needs to see that it
	// is too long.
	Body []byte
	// Actor is who makes the request (the IAM caller's ARN); it is recorded
	// in the audit log. Empty means "unknown".
	Actor string
	// RequestID identifies the request in logs.
	RequestID string
}

// Response is what the Service answers: an HTTP status, headers and a body
// (JSON, problem+json, or empty for 204).
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// call is one request on its way through a handler: the Request plus its
// decoded path parameters.
type call struct {
	*Request
	route  string
	params map[string]string
}

// reply is a handler's successful outcome; Handle encodes it.
type reply struct {
	status int
	header http.Header
	body   any // JSON-encoded; nil means no body
}

type handler func(s *Service, ctx context.Context, c *call) (reply, error)

// route is one admin operation.
type route struct {
	name     string // "GET /rules/{id}"
	method   string
	resource string   // "/rules/{id}"
	segments []string // "rules", "{id}"
	function string   // "admin-rules-get"
	body     bool     // takes a JSON body
	handle   handler
}

// routes is the one table of admin routes. Each entry names its Route
// constant (which carries the method and resource template), the Lambda
// function that serves it alone (see RouteInfo.Function), whether it takes
// a JSON body, and its handler. The reference stack (infra/) derives the
// admin API's resources, methods and functions from Routes, and its tests
// fail until functions/<function>/main.go exists and names the constant.
// So a new route is a constant, a handler, a line here and one main (and,
// for the apigw tests, a sample event in events/).
var routes = func() []*route {
	table := []struct {
		name     string
		function string
		body     bool
		h        handler
	}{
		{RouteCreateRule, "admin-rules-create", true, (*Service).createRule},
		{RouteListRules, "admin-rules-list", false, (*Service).listRules},
		{RouteGetRule, "admin-rules-get", false, (*Service).getRule},
		{RouteUpdateRule, "admin-rules-update", true, (*Service).updateRule},
		{RouteDeleteRule, "admin-rules-delete", false, (*Service).deleteRule},
		{RouteRuleHistory, "admin-rules-history", false, (*Service).ruleHistory},
		{RouteCreatePlan, "admin-plans-create", true, (*Service).createPlan},
		{RouteListPlans, "admin-plans-list", false, (*Service).listPlans},
		{RouteGetPlan, "admin-plans-get", false, (*Service).getPlan},
		{RouteUpdatePlan, "admin-plans-update", true, (*Service).updatePlan},
		{RouteDeletePlan, "admin-plans-delete", false, (*Service).deletePlan},
		{RoutePlanHistory, "admin-plans-history", false, (*Service).planHistory},
		{RouteSubjectLimits, "admin-subjects-limits", false, (*Service).subjectLimits},
		{RouteResetSubject, "admin-subjects-reset", false, (*Service).resetSubject},
		{RouteUsage, "admin-usage", true, (*Service).usage},
		{RouteStats, "admin-stats", false, (*Service).stats},
	}
	rs := make([]*route, 0, len(table))
	for _, t := range table {
		method, resource, _ := strings.Cut(t.name, " ")
		rs = append(rs, &route{
			name: t.name, method: method, resource: resource,
			segments: strings.Split(strings.Trim(resource, "/"), "/"),
			function: t.function, body: t.body, handle: t.h,
		})
	}
	return rs
}()

// RouteInfo describes one admin route to the code that deploys it.
type RouteInfo struct {
	// Name is the route's Route constant, such as RouteGetRule
	// ("GET /rules/{id}"): what Service.HandleRoute takes.
	Name string
	// Method is the HTTP method, upper case: "GET".
	Method string
	// Resource is the API Gateway resource template: "/rules/{id}".
	Resource string
	// Function is the full name of the Lambda function that serves this
	// route alone, "admin-" and then the noun and the verb:
	// "admin-rules-get". It is also the function's directory under
	// functions/ and its `make build` name.
	Function string
}

// Routes describes every admin route, always in the same order. The slice
// is the caller's own: changing it changes no route.
func Routes() []RouteInfo {
	infos := make([]RouteInfo, len(routes))
	for i, r := range routes {
		infos[i] = RouteInfo{Name: r.name, Method: r.method, Resource: r.resource, Function: r.function}
	}
	return infos
}

// Handle serves req on whichever admin route its method and resource (or
// path) name. An unknown resource gets 404, a known resource with another
// method 405 with an Allow header. Handle never fails: every error becomes a
// problem response, and server failures are logged.
func (s *Service) Handle(ctx context.Context, req Request) Response {
	return s.serve(ctx, "", &req)
}

// HandleRoute serves req only if it is for the route named (one of the Route
// constants): a Lambda function behind one route uses it so that a
// misrouted event cannot run another operation. The resource the gateway
// reports is not compared, so the API may be mounted under any base path;
// only the method is (405 otherwise). An unknown route name is a
// deployment bug: 500, logged.
func (s *Service) HandleRoute(ctx context.Context, name string, req Request) Response {
	return s.serve(ctx, name, &req)
}

func (s *Service) serve(ctx context.Context, pinned string, req *Request) Response {
	c := &call{Request: req}
	rep, err := s.dispatch(ctx, pinned, c)
	if err != nil {
		return s.problem(ctx, c, err)
	}
	resp, err := encodeReply(rep)
	if err != nil {
		return s.problem(ctx, c, err)
	}
	return resp
}

// dispatch finds the route, checks what every route checks (method, path
// parameters, query text, body size and type) and runs the handler.
func (s *Service) dispatch(ctx context.Context, pinned string, c *call) (reply, error) {
	rt, raw, err := s.find(pinned, c.Request)
	if err != nil {
		return reply{}, err
	}
	c.route = rt.name
	c.params = make(map[string]string, len(raw))
	for _, seg := range rt.segments {
		name, ok := paramName(seg)
		if !ok {
			continue
		}
		v, err := url.PathUnescape(raw[name])
		if err != nil {
			return reply{}, httpapi.BadRequest(httpapi.FieldError(name, "is not valid percent-encoding"))
		}
		if v == "" {
			return reply{}, httpapi.BadRequest(httpapi.FieldError(name, "must not be empty"))
		}
		if reason := badText(v); reason != "" {
			return reply{}, httpapi.BadRequest(httpapi.FieldError(name, reason))
		}
		c.params[name] = v
	}
	for k, vs := range c.Query {
		for _, v := range vs {
			if reason := badText(k + v); reason != "" {
				return reply{}, httpapi.BadRequest(httpapi.FieldError(httpapi.Truncate(k), reason))
			}
		}
	}
	if rt.body {
		if len(c.Body) > s.maxBody {
			return reply{}, &httpapi.Error{Status: http.StatusRequestEntityTooLarge,
				Detail: fmt.Sprintf("The request body is larger than %d bytes.", s.maxBody)}
		}
		if err := checkContentType(c.Header.Get("Content-Type")); err != nil {
			return reply{}, err
		}
	}
	return rt.handle(s, ctx, c)
}

// find returns the route for req and its raw path parameters.
func (s *Service) find(pinned string, req *Request) (*route, map[string]string, error) {
	if pinned != "" {
		rt := routeByName(pinned)
		if rt == nil {
			// A deployment bug, not the client's doing.
			return nil, nil, fmt.Errorf("function pinned to unknown admin route %q", pinned)
		}
		if req.Method != rt.method {
			return nil, nil, methodNotAllowed(rt.method)
		}
		return rt, req.PathParams, nil
	}
	var candidates []*route
	var raw map[string]string
	if req.Resource != "" {
		for _, rt := range routes {
			if rt.resource == req.Resource {
				candidates = append(candidates, rt)
			}
		}
		raw = req.PathParams
	} else {
		candidates, raw = matchPath(req.Path)
	}
	if len(candidates) == 0 {
		return nil, nil, &httpapi.Error{Status: http.StatusNotFound, Detail: "No such admin resource."}
	}
	var allow []string
	for _, rt := range candidates {
		if rt.method == req.Method {
			return rt, raw, nil
		}
		allow = append(allow, rt.method)
	}
	return nil, nil, methodNotAllowed(allow...)
}

func routeByName(name string) *route {
	for _, rt := range routes {
		if rt.name == name {
			return rt
		}
	}
	return nil
}

// matchPath returns the routes whose template matches the escaped path, and
// the raw parameters. All routes of one template share the parameters.
func matchPath(path string) ([]*route, map[string]string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var found []*route
	var params map[string]string
next:
	for _, rt := range routes {
		if len(rt.segments) != len(segs) {
			continue
		}
		p := map[string]string{}
		for i, seg := range rt.segments {
			if name, ok := paramName(seg); ok {
				p[name] = segs[i]
			} else if seg != segs[i] {
				continue next
			}
		}
		found, params = append(found, rt), p
	}
	return found, params
}

func paramName(seg string) (string, bool) {
	if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
		return seg[1 : len(seg)-1], true
	}
	return "", false
}

func methodNotAllowed(allow ...string) *httpapi.Error {
	slices.Sort(allow)
	return &httpapi.Error{
		Status: http.StatusMethodNotAllowed,
		Detail: "This resource accepts only " + strings.Join(allow, ", ") + ".",
		Header: http.Header{"Allow": {strings.Join(allow, ", ")}},
	}
}

// checkContentType accepts application/json and any application/*+json,
// with parameters.
func checkContentType(ct string) error {
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" ||
		strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return &httpapi.Error{Status: http.StatusUnsupportedMediaType,
		Detail: "The request body must be JSON: send Content-Type: application/json.",
		Header: http.Header{"Accept-Post": {"application/json"}}}
}

// maxText bounds path and query values: nothing legitimate is longer, and
// PostgreSQL indexes dislike megabyte keys.
const maxText = 1024

// badText says what is wrong with a path or query value, or "".
func badText(v string) string {
	switch {
	case !utf8.ValidString(v):
		return "must be valid UTF-8"
	case strings.IndexByte(v, 0) >= 0:
		return "must not contain NUL bytes"
	case len(v) > maxText:
		return fmt.Sprintf("must be at most %d bytes", maxText)
	}
	return ""
}

func encodeReply(rep reply) (Response, error) {
	h := rep.header
	if h == nil {
		h = http.Header{}
	}
	h.Set("Cache-Control", "no-store")
	if rep.body == nil {
		return Response{Status: rep.status, Header: h}, nil
	}
	b, err := json.Marshal(rep.body)
	if err != nil {
		return Response{}, fmt.Errorf("encode %T: %w", rep.body, err)
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	return Response{Status: rep.status, Header: h, Body: append(b, '\n')}, nil
}
