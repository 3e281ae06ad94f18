package e2e

import (
	"context"
	"io"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	sluiceapp "github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rulesync"
)

// app is what TestHandlers drives: the handlers of the authorizer, check
// and admin functions. Only wire knows how they are built.
type app struct {
	rest       func(context.Context, events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error)
	http       func(context.Context, events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error)
	checkProxy func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
	checkURL   func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)
	// admin serves every admin route (the route comes from the event).
	admin func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
	// rules reports the authorizer's rules cache.
	rules func() rulesync.CacheStats
}

// wire builds the handlers from the environment env as their functions'
// mains do (internal/app), logging to out; t.Cleanup closes the clients.
func wire(t *testing.T, env map[string]string, out io.Writer) app {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config.FromEnv: %v", err)
	}
	a, err := sluiceapp.NewLocal(context.Background(), cfg, sluiceapp.Options{Out: out, Function: "e2e-test"})
	if err != nil {
		t.Fatalf("app.NewLocal: %v", err)
	}
	t.Cleanup(a.Close)
	return app{
		rest:       a.Authorizer.REST,
		http:       a.Authorizer.HTTP,
		checkProxy: a.Check.Proxy,
		checkURL:   a.Check.URL,
		admin:      a.Admin.Handler(""),
		rules:      a.Cache.Stats,
	}
}
