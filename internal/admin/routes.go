package admin

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/httpapi"
)

// The admin routes, as "METHOD /resource/{param}": the way API Gateway
// names them, and a net/http.ServeMux pattern. Pass some in
// HandlerOptions.Routes to serve only those operations.
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
	RouteFindSubject   = "POST /subjects/find"
	RouteUsage         = "POST /usage"
	RouteStats         = "GET /stats"
	// RouteBatch applies a store.Batch of rule and plan writes all or
	// nothing (sluice apply).
	RouteBatch = "POST /batch"
	// RouteOpenAPI serves the admin API's OpenAPI document (OpenAPI).
	RouteOpenAPI = "GET /openapi.json"
)

// The admin Lambda functions, one per privilege class: each serves the
// routes whose code uses the same grants, and holds those alone.
const (
	// FunctionRead serves the rule and plan reads (GET /rules, /plans,
	// one of them, their history) and GET /openapi.json: the database's
	// read-only role, no Redis.
	FunctionRead = "admin-read"
	// FunctionWrite serves the rule and plan writes (POST, PUT, DELETE):
	// the database's owner login, and Redis to publish the snapshot.
	FunctionWrite = "admin-write"
	// FunctionSubjects serves the bucket routes (GET
	// /subjects/{subject}/limits, DELETE /subjects/{subject}/buckets,
	// POST /usage): the read-only role to read rules, Redis for buckets.
	FunctionSubjects = "admin-subjects"
	// FunctionStats serves GET /stats and POST /subjects/find: CloudWatch
	// Contributor Insights and the subject hash key, no database, no
	// Redis.
	FunctionStats = "admin-stats"
)

// call is one request on its way through a handler: what the handlers
// read of the *http.Request, its decoded path parameters, and who makes it.
type call struct {
	route     string // the Route constant
	Method    string
	req       *http.Request // its PathValue holds the decoded path parameters, checked by badText
	Query     url.Values    // nil without a query string
	Header    http.Header
	Body      []byte // nil for a route that takes no body
	Actor     string // recorded in the audit log; "" is "unknown"
	RequestID string // identifies the request in logs
}

// param is the decoded path parameter name ("id").
func (c *call) param(name string) string { return c.req.PathValue(name) }

// reply is a handler's successful outcome; Handle encodes it.
type reply struct {
	status int
	header http.Header
	// version, when > 0, is sent as the ETag ("<version>").
	version int64
	body    any // JSON-encoded; nil means no body
}

type handler func(s *Service, ctx context.Context, c *call) (reply, error)

// route is one admin operation.
type route struct {
	name     string // "GET /rules/{id}"
	method   string
	resource string   // "/rules/{id}"
	params   []string // "id": the resource's path parameters
	function string   // the Lambda function serving it: FunctionRead …
	body     bool     // takes a JSON body
	handle   handler
}

// routes is the one table of admin routes. Each entry names its Route
// constant (which carries the method and resource template), the Lambda
// function that serves it (see RouteInfo.Function), whether it takes a
// JSON body, and its handler. The reference stack (infra/) derives the
// admin API's resources, methods and functions from Routes, and its tests
// fail until functions/<function>/main.go exists and names the constant.
// So a new route is a constant, a handler, a line here, the constant in
// its function's main (and, for the apigw tests, a sample event in
// events/).
//
// The functions are privilege classes: a route joins the function whose
// grants are exactly what its code uses (infra's adminAccess), so that
// no function holds a grant one of its routes does not need.
var routes = func() []*route {
	table := []struct {
		name     string
		function string
		body     bool
		h        handler
	}{
		{RouteCreateRule, FunctionWrite, true, ruleRoutes.createOne},
		{RouteListRules, FunctionRead, false, (*Service).listRules},
		{RouteGetRule, FunctionRead, false, ruleRoutes.getOne},
		{RouteUpdateRule, FunctionWrite, true, ruleRoutes.updateOne},
		{RouteDeleteRule, FunctionWrite, false, ruleRoutes.deleteOne},
		{RouteRuleHistory, FunctionRead, false, ruleRoutes.historyOf},
		{RouteCreatePlan, FunctionWrite, true, planRoutes.createOne},
		{RouteListPlans, FunctionRead, false, (*Service).listPlans},
		{RouteGetPlan, FunctionRead, false, planRoutes.getOne},
		{RouteUpdatePlan, FunctionWrite, true, planRoutes.updateOne},
		{RouteDeletePlan, FunctionWrite, false, planRoutes.deleteOne},
		{RoutePlanHistory, FunctionRead, false, planRoutes.historyOf},
		{RouteSubjectLimits, FunctionSubjects, false, (*Service).subjectLimits},
		{RouteResetSubject, FunctionSubjects, false, (*Service).resetSubject},
		{RouteFindSubject, FunctionStats, true, (*Service).findSubject},
		{RouteUsage, FunctionSubjects, true, (*Service).usage},
		{RouteStats, FunctionStats, false, (*Service).stats},
		{RouteBatch, FunctionWrite, true, (*Service).batch},
		{RouteOpenAPI, FunctionRead, false, (*Service).openAPI},
	}
	rs := make([]*route, 0, len(table))
	for _, t := range table {
		method, resource, _ := strings.Cut(t.name, " ")
		rs = append(rs, &route{
			name: t.name, method: method, resource: resource,
			params:   paramNames(resource),
			function: t.function, body: t.body, handle: t.h,
		})
	}
	return rs
}()

// RouteInfo describes one admin route to the code that deploys it.
type RouteInfo struct {
	// Name is the route's Route constant, such as RouteGetRule
	// ("GET /rules/{id}"): what HandlerOptions.Routes takes.
	Name string
	// Method is the HTTP method, upper case: "GET".
	Method string
	// Resource is the API Gateway resource template: "/rules/{id}".
	Resource string
	// Function is the name of the Lambda function that serves this route,
	// with the other routes of its privilege class: FunctionRead,
	// FunctionWrite, FunctionSubjects or FunctionStats. It is also the
	// function's directory under functions/ and its `make build` name.
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

// ReadRoutes describes the admin routes that only read: every GET. A
// read-only operator (sluice local's read token, the stack's GrantRead)
// may call these and nothing else.
func ReadRoutes() []RouteInfo {
	return slices.DeleteFunc(Routes(), func(r RouteInfo) bool { return r.Method != http.MethodGet })
}

// paramNames lists the {parameters} of a resource template.
func paramNames(resource string) []string {
	var names []string
	for _, seg := range strings.Split(resource, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			names = append(names, strings.TrimSuffix(name, "}"))
		}
	}
	return names
}

// methodNotAllowed is the 405 of a resource served with the methods allow
// (sorted).
func methodNotAllowed(allow []string) *httpapi.Error {
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
// PostgreSQL indexes dislike megabyte keys. A list cursor is longer: it
// holds a rule's api, route and subject (up to 1,408 bytes) in base64.
const (
	maxText   = 1024
	maxCursor = 4096
)

// badText says what is wrong with a path or query value, or "": text of at
// most max bytes.
func badText(v string, max int) string {
	switch {
	case !utf8.ValidString(v):
		return "must be valid UTF-8"
	case strings.IndexByte(v, 0) >= 0:
		return "must not contain NUL bytes"
	case len(v) > max:
		return fmt.Sprintf("must be at most %d bytes", max)
	}
	return ""
}
