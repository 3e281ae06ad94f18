package e2e

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/admin/apigw"
	"github.com/sluicehq/sluice/internal/authorizer/wiring"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/redisversion"
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
	rules func() rules.CacheStats
}

// wire builds the handlers from the environment env, the authorizer's as
// its function's main does, logging to out; t.Cleanup closes the clients.
func wire(t *testing.T, env map[string]string, out io.Writer) app {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config.FromEnv: %v", err)
	}
	ctx := context.Background()
	w, err := wiring.New(ctx, cfg, wiring.Options{Out: out, Function: "e2e-test"})
	if err != nil {
		t.Fatalf("wiring.New: %v", err)
	}
	t.Cleanup(w.Close)

	pool, err := config.Postgres(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rdb, err := config.Redis(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	svc := admin.New(postgres.New(pool), redisversion.New(rdb, ""), limiter.New(rdb, limiter.Options{Timeout: time.Second}), admin.Options{})

	return app{
		rest:       w.Authorizer.REST,
		http:       w.Authorizer.HTTP,
		checkProxy: w.Check.Proxy,
		checkURL:   w.Check.URL,
		admin:      apigw.Handler(svc, ""),
		rules:      w.Cache.Stats,
	}
}
