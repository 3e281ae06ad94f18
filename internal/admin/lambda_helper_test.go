package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/lambdahttp"
)

// lambdaHandler is the Lambda handler serving every admin route of svc,
// wired as internal/app.Admin.Handler("") wires it.
func lambdaHandler(svc *admin.Service) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return pinnedHandler(svc, "")
}

// pinnedHandler is the Lambda handler of one admin route, wired as
// internal/app.Admin.Handler(route) wires it, its answers checked against
// openapi.yaml.
func pinnedHandler(svc *admin.Service, route string) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	o := admin.HandlerOptions{Actor: lambdahttp.Caller, RequestID: lambdahttp.RequestID}
	var resource string
	if route != "" {
		o.Routes = []string{route}
		_, resource, _ = strings.Cut(route, " ")
	}
	return lambdahttp.New(contract.wrap(svc.Handler(o)), lambdahttp.Options{Resource: resource}).Proxy
}

// benchHandler is lambdaHandler without the contract check, for
// benchmarks.
func benchHandler(svc *admin.Service) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	o := admin.HandlerOptions{Actor: lambdahttp.Caller, RequestID: lambdahttp.RequestID}
	return lambdahttp.New(svc.Handler(o), lambdahttp.Options{}).Proxy
}

// response is what the admin handler answered.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// serve sends one request to svc's handler, in process, its answer
// checked against openapi.yaml. path is the
// escaped path and query, such as "/subjects/a%2Fb/limits?api=x".
func serve(svc *admin.Service, method, path string, header http.Header, body string) response {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	contract.wrap(svc.Handler(admin.HandlerOptions{})).ServeHTTP(w, r)
	return response{Status: w.Code, Header: w.Header(), Body: w.Body.Bytes()}
}
