// Package wiring builds the authorizer and check Lambdas' object graph from
// their configuration: Redis client, PostgreSQL pool and store, rules
// cache, limiter, decision, event handlers, logger and metrics. Both mains
// call New once at init, so connections are made once and reused across
// invocations.
package wiring

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/authorizer/apigw"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/redisversion"
)

// InitLoadTimeout bounds the first rules load at init: a cold start with
// the database down starts serving the default rule after at most this.
const InitLoadTimeout = 3 * time.Second

// Options say where the wiring writes.
type Options struct {
	// Out receives the JSON log lines and the EMF metric lines (os.Stdout
	// in a Lambda).
	Out io.Writer
	// Function names the Function metric dimension (the Lambda's name).
	Function string
	// MetricsInterval is the least time between two EMF flushes; default
	// 10s (see apigw.MetricsOptions.Interval).
	MetricsInterval time.Duration
}

// App is a wired authorizer: the handlers and what they stand on.
type App struct {
	Authorizer *apigw.Authorizer
	Check      *apigw.Check
	Decider    *authorizer.Authorizer
	Cache      *rules.Cache
	Limiter    *limiter.Limiter
	Metrics    *apigw.Metrics
	Log        *slog.Logger
	close      []func()
}

// Close releases the clients.
func (a *App) Close() {
	for _, f := range a.close {
		f()
	}
}

// New wires an App from cfg. A database that cannot be reached is not an
// error: it is logged, and the rules cache serves the default rule and
// retries in the background of later invocations. Redis is not dialled
// until the first decision. New fails only on configuration it cannot use.
func New(ctx context.Context, cfg config.Config, o Options) (*App, error) {
	log := apigw.NewLogger(o.Out, cfg.LogLevel)
	sources, err := authorizer.ParseSources(strings.Join(cfg.SubjectSources, ","))
	if err != nil {
		return nil, fmt.Errorf("SUBJECT_SOURCES: %w", err)
	}
	rdb, err := config.Redis(ctx, cfg)
	if err != nil {
		return nil, err
	}
	app := &App{Log: log}
	app.close = append(app.close, func() { rdb.Close() })
	pool, err := config.Postgres(ctx, cfg)
	if err != nil {
		app.Close()
		return nil, err
	}
	app.close = append(app.close, pool.Close)

	app.Limiter = limiter.New(rdb, limiter.Options{
		Timeout: cfg.RedisTimeout,
		OnBreakerChange: func(from, to limiter.BreakerState) {
			log.Warn("redis circuit breaker", slog.String("from", from.String()), slog.String("to", to.String()))
		},
	})

	ictx, cancel := context.WithTimeout(ctx, InitLoadTimeout)
	defer cancel()
	// Dial Redis and load the script now, at init, so the first request
	// does not spend its few milliseconds on a TCP (or TLS) handshake.
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	defer pcancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		log.Error("redis unreachable at init", slog.Any("error", err))
	} else if _, err := app.Limiter.Peek(pctx, "sluice:warmup", []limiter.Bucket{{ID: "warmup", Limit: 1, Period: time.Second}}); err != nil {
		log.Warn("limiter warm-up failed", slog.Any("error", err))
	}
	cache, err := rules.NewCache(ictx, postgres.New(pool), redisversion.New(rdb, ""), rules.CacheOptions{
		Default:     cfg.DefaultLimit,
		Refresh:     cfg.RulesRefresh,
		Poll:        cfg.RulesVersionPoll,
		LoadTimeout: InitLoadTimeout,
		OnError: func(err error) {
			log.Error("rules refresh failed", slog.Any("error", err))
		},
		OnReload: LogReload(log),
	})
	if err != nil {
		// The cache works regardless, on the default rule.
		log.Error("initial rules load failed; serving the default rule", slog.Any("error", err))
	}
	app.Cache = cache

	app.Metrics = apigw.NewMetrics(apigw.MetricsOptions{
		W:        o.Out,
		Function: o.Function,
		Interval: o.MetricsInterval,
		Gauges: func() (bool, time.Duration) {
			return app.Limiter.Stats().Breaker != limiter.BreakerClosed, cache.Age()
		},
	})
	app.Decider = authorizer.New(cache, app.Limiter, authorizer.Options{Sources: sources})
	ho := apigw.Options{Logger: log, Metrics: app.Metrics}
	app.Authorizer = apigw.NewAuthorizer(app.Decider, ho)
	app.Check = apigw.NewCheck(app.Decider, ho)
	log.Info("authorizer ready", slog.Any("config", cfg), slog.String("sources", fmt.Sprint(sources)))
	return app, nil
}

// LogReload returns a rules.CacheOptions.OnReload that logs each load, and
// at warn each rule, plan or default the snapshot left out (invalid, or
// naming an unknown plan): a skipped rule can loosen a limit unnoticed.
func LogReload(log *slog.Logger) func(version int64, snap *rules.Snapshot) {
	return func(version int64, snap *rules.Snapshot) {
		skipped := snap.Skipped()
		log.Info("rules loaded", slog.Int64("version", version), slog.Int("rules", snap.Len()), slog.Int("skipped", len(skipped)))
		for _, sk := range skipped {
			log.Warn("rule skipped", slog.String("kind", sk.Kind), slog.String("id", sk.ID), slog.String("reason", sk.Reason))
		}
	}
}
