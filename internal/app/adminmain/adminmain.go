// Package adminmain is every admin Lambda's main: the configuration from
// the environment, the object graph of one app part, and the Lambda
// runtime on the handlers of the function's routes. Each
// functions/admin-*/main.go is one call of Run, naming its function and
// its part (what infra's TestAccessMatchesMains reads); its routes are the
// ones internal/admin's table assigns to the function.
package adminmain

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
)

// Reader builds the stats reader of a function whose routes read
// Contributor Insights, from the deployment's rule prefix. Only that
// function's main passes one (insights.Load), so that no other function
// links the CloudWatch SDK.
type Reader func(ctx context.Context, prefix string) (admin.StatsReader, error)

// Run is the main of the admin Lambda function name: it builds the admin
// API of class and serves the function's routes with Handler. reader is nil but for
// the function whose routes read Contributor Insights. A configuration or
// build failure exits 1 with a line naming the function, which the Lambda
// console shows as the init error.
func Run(name string, class app.AdminClass, reader Reader) {
	ctx := context.Background()
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		fail(name, fmt.Errorf("configuration: %w", err))
	}
	o := app.Options{Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}
	if reader != nil && cfg.InsightsRulePrefix != "" {
		if o.StatsReader, err = reader(ctx, cfg.InsightsRulePrefix); err != nil {
			fail(name, err)
		}
	}
	a, err := app.NewAdmin(ctx, cfg, class, o)
	if err != nil {
		fail(name, err)
	}
	lambda.Start(Handler(a, name))
}

// ProxyHandler is the handler lambda.Start runs for an API Gateway REST
// API proxy integration.
type ProxyHandler = func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// Handler is the Lambda handler of the admin function name serving, from
// a, the routes admin.Routes assigns to name. An event is answered by the handler of the route its method and
// resource name ("GET" and "/rules/{id}": API Gateway's resource template,
// whatever the base path), which is a's Handler for that route alone.
// An event for any other route, another class's included, runs no route's
// code: it gets a 404 problem naming the function, and an error line in
// the log, since only a misconfigured API sends one.
func Handler(a *app.Admin, name string) ProxyHandler {
	byRoute := map[string]ProxyHandler{}
	var routes []string
	for _, r := range admin.Routes() {
		if r.Function == name {
			byRoute[r.Name] = a.Handler(r.Name)
			routes = append(routes, r.Name)
		}
	}
	log := a.Log
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		route := strings.ToUpper(ev.HTTPMethod) + " " + ev.Resource
		if h, ok := byRoute[route]; ok {
			return h(ctx, ev)
		}
		log.ErrorContext(ctx, "event for a route this function does not serve: check the API's integrations",
			slog.String("route", route), slog.String("path", ev.Path), slog.Any("routes", routes),
			slog.String("requestId", ev.RequestContext.RequestID))
		return notServed(name, route), nil
	}
}

// notServed is the 404 problem of an event for a route the function name
// does not serve.
func notServed(name, route string) events.APIGatewayProxyResponse {
	status, header, body := httpapi.Render(httpapi.TypeBase, &httpapi.Error{
		Status: http.StatusNotFound,
		Detail: fmt.Sprintf("The admin function %s does not serve %s: the API routed the request to the wrong function.", name, route),
	})
	flat := make(map[string]string, len(header))
	for k, v := range header {
		flat[k] = strings.Join(v, ", ")
	}
	return events.APIGatewayProxyResponse{StatusCode: status, Headers: flat, Body: string(body)}
}

func fail(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(1)
}
