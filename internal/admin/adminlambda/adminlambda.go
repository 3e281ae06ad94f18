// Package adminlambda is the wiring the thirteen admin Lambda functions
// share, so each functions/admin-*/main.go is one line: read the
// configuration, build the PostgreSQL pool, the Redis client, the limiter
// and the admin Service once per cold start, and serve one route.
package adminlambda

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/admin/apigw"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/redisversion"
)

// minRedisTimeout is the least time an admin peek or reset gets from
// Redis: the authorizer's budget (REDIS_TIMEOUT, 25 ms) is tuned for the
// request path, and an admin call can afford to wait longer rather than
// answer 503.
const minRedisTimeout = 500 * time.Millisecond

// Main serves route (an admin.Route constant) as a Lambda function. It
// exits with status 1 when the configuration is invalid or a client cannot
// be built, so the failed init shows in the function's logs.
func Main(route string) {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "admin %s: configuration: %v\n", route, err)
		os.Exit(1)
	}
	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: cfg.LogLevel})).
		With(slog.String("function", os.Getenv("AWS_LAMBDA_FUNCTION_NAME")))
	svc, err := NewService(context.Background(), cfg, log)
	if err != nil {
		log.Error("admin init failed", slog.String("route", route), slog.String("err", err.Error()))
		os.Exit(1)
	}
	lambda.Start(apigw.Handler(svc, route))
}

// NewService builds the admin Service for cfg: the PostgreSQL store, the
// rules version counter and the limiter on Redis (default key prefix, so it
// sees the authorizers' buckets). Neither client connects here: a cold start
// succeeds while a backend is down, and requests then answer 503.
func NewService(ctx context.Context, cfg config.Config, log *slog.Logger) (*admin.Service, error) {
	pool, err := config.Postgres(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rdb, err := config.Redis(ctx, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	lim := limiter.New(rdb, limiter.Options{
		Timeout:          max(cfg.RedisTimeout, minRedisTimeout),
		DenyCacheSize:    -1, // admin never calls Allow
		BreakerThreshold: -1, // nor should one admin's failures trip anything
	})
	return admin.New(postgres.New(pool), redisversion.New(rdb, ""), lim, admin.Options{
		Logger:  log,
		Default: cfg.DefaultLimit,
	}), nil
}
