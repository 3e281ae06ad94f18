// Package app is the one place Sluice's object graphs are built, from a
// config.Config: the authorizer and check Lambdas, the admin Lambdas and
// `sluice local` all call New, so the laptop runs what Lambda runs (the
// same limiter settings, metrics, breaker log and rules reload log).
//
// New reads no environment and never exits: mains (functions/*, cmd/sluice)
// read the configuration, call New, and decide what an error means.
package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/authorizer"
	authapigw "github.com/sluicehq/sluice/internal/authorizer/apigw"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decider"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/lambdahttp"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/postgres"
)

// InitLoadTimeout is decider.InitLoadTimeout.
const InitLoadTimeout = decider.InitLoadTimeout

// minAdminRedisTimeout is the least time an admin peek or reset gets from
// Redis: the authorizer's budget (REDIS_TIMEOUT, 25 ms) is tuned for the
// request path, and an admin call can afford to wait rather than answer 503.
const minAdminRedisTimeout = 500 * time.Millisecond

// Parts selects what New builds. A Lambda builds only what it serves: an
// admin function never loads the rules or dials Redis at init.
type Parts uint8

const (
	// Decide builds the decision path: the limiter with the request path's
	// budget and breaker, the rules cache (loaded at once), the authorizer
	// and check handlers and their metrics. Redis is dialled and the
	// script loaded at init.
	Decide Parts = 1 << iota
	// Administer builds the admin Service, with a limiter of its own (a
	// longer timeout, no deny cache, no breaker). Nothing is dialled.
	Administer
	// Migrate builds the Migrator on the configured database (no Redis).
	Migrate
	// Stats builds an admin Service that answers only GET /stats, from
	// Options.StatsReader (the admin-stats function passes the
	// Contributor Insights reader), and POST /subjects/find when the
	// subject hash key is configured (the admin-stats function serves both):
	// no Redis, no database.
	Stats
	// Read builds an admin Service over the store alone, for the admin
	// functions whose routes only read rules and plans (GET /rules,
	// /plans and their history): no Redis is dialled, no subject hash key
	// read, nothing published. Those functions connect as the database's
	// read-only role, so they could not write the rules if they tried.
	Read
)

// Options say what New builds and where it writes. The zero value builds
// nothing but the clients.
type Options struct {
	// Parts is what to build.
	Parts Parts
	// Out receives the JSON log lines and the EMF metric lines; default
	// os.Stdout (a Lambda's CloudWatch stream).
	Out io.Writer
	// Function names the Function metric dimension and is added to every
	// log line; default "sluice".
	Function string
	// MetricsInterval is the least time between two EMF flushes; default
	// 10s (see metrics.Options.Interval).
	MetricsInterval time.Duration
	// Redis, when set, is used instead of a client built from the
	// configuration (sluice local's embedded Redis, tests). The App does
	// not close it.
	Redis redis.UniversalClient
	// Store, when set, is the rules store instead of PostgreSQL built from
	// the configuration (sluice local's memory store).
	Store store.Store
	// Prefix starts every Redis key: buckets, and the rules snapshot and
	// version (<Prefix>{rules}:snapshot, <Prefix>{rules}:version); default
	// the configuration's REDIS_PREFIX, else limiter.DefaultPrefix ("sl:").
	Prefix string
	// Stats, when set, counts every decision of the Decide part and
	// answers the Administer part's GET /stats: in-process counts of this
	// process's decisions. Default: a new one when both parts are built
	// (sluice local: one process decides and administers), else none (a
	// Lambda instance sees too few of the decisions for its counts to
	// mean anything; the stack reads Contributor Insights instead).
	Stats *stats.Stats
	// StatsReader answers the Stats part's GET /stats; nil answers 503.
	// The admin-stats function builds it (internal/stats/insights), so
	// the CloudWatch SDK is linked into that function alone.
	StatsReader admin.StatsReader
}

// App is a built object graph. The fields of a part not built are nil.
type App struct {
	// Log is the JSON logger every part writes to.
	Log *slog.Logger
	// Redis is the Redis client (Decide, Administer): Options.Redis or
	// one built from the configuration.
	Redis redis.UniversalClient
	// Store is the rules store: Options.Store, or PostgreSQL from the
	// configuration (every part).
	Store store.Store
	// Snapshots is the copy of the rules in Redis the admin path publishes
	// and the decision path reads first (Decide, Administer).
	Snapshots *rulesync.Snapshots

	// The decision path (Decide).
	Authorizer *authapigw.Authorizer
	Check      *authapigw.Check
	Decider    *authorizer.Authorizer
	// JWT verifies bearer tokens; nil without a jwt: subject source.
	JWT     *identity.Verifier
	Cache   *rulesync.Cache
	Limiter *limiter.Limiter
	Metrics *metrics.Metrics
	// Dec is the decision path all of the above belong to.
	Dec *decider.Decider

	// Admin is the admin Service (Administer).
	Admin *admin.Service

	// Migrator applies the database migrations (Migrate).
	Migrator *Migrator

	// pool is the database's, when New built one.
	pool *pgxpool.Pool

	closers []func()
}

// New builds the parts o asks for from cfg. A database or Redis that cannot
// be reached is not an error: it is logged, the rules cache serves the
// default rule and retries in the background of later invocations, and
// admin requests answer 503 until the backend is back. New fails only on
// configuration it cannot use (no Redis URL, a secret it cannot read); it
// then closes what it had built.
func New(ctx context.Context, cfg config.Config, o Options) (a *App, err error) {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Function == "" {
		o.Function = "sluice"
	}
	if o.Prefix == "" {
		o.Prefix = cmp.Or(cfg.RedisPrefix, limiter.DefaultPrefix)
	}
	if o.Stats == nil && o.Parts&(Decide|Administer) == Decide|Administer {
		o.Stats = stats.New(stats.Options{})
	}
	a = &App{Log: NewLogger(o.Out, cfg.LogLevel).With(slog.String("function", o.Function))}
	defer func() {
		if err != nil {
			a.Close()
			a = nil
		}
	}()

	var pool *pgxpool.Pool
	if o.Parts&Migrate != 0 || o.Store == nil && o.Parts&(Decide|Administer|Read) != 0 {
		if pool, err = config.Postgres(ctx, cfg); err != nil {
			return nil, err
		}
		a.onClose(pool.Close)
		a.pool = pool
	}
	a.Store = o.Store
	if a.Store == nil && pool != nil {
		a.Store = postgres.NewWithOptions(pool, store.Options{MaxRules: cfg.MaxRules})
	}
	if o.Parts&Migrate != 0 {
		db := stdlib.OpenDBFromPool(pool)
		a.onClose(func() { db.Close() })
		a.Migrator = &Migrator{db: db, log: a.Log}
		if a.Migrator.reader, err = config.ReaderCredentials(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if o.Parts&Stats != 0 && o.Parts&Administer == 0 {
		if err := a.statsOnly(ctx, cfg, o.StatsReader); err != nil {
			return nil, err
		}
	}
	if o.Parts&Read != 0 && o.Parts&Administer == 0 {
		a.Admin = admin.New(a.Store, nil, nil, admin.Options{Logger: a.Log, Default: cfg.DefaultLimit})
		a.Log.Info("sluice ready", slog.Any("config", cfg), slog.Bool("readOnly", true))
	}
	if o.Parts&(Decide|Administer) == 0 {
		return a, nil
	}

	rdb := o.Redis
	if rdb == nil {
		if rdb, err = config.Redis(ctx, cfg); err != nil {
			return nil, err
		}
		a.onClose(func() { rdb.Close() })
	}
	a.Redis = rdb
	st := a.Store
	key, err := config.SubjectKey(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var up identity.Invoker
	if o.Parts&Decide != 0 {
		if up, err = config.Upstream(ctx, cfg); err != nil {
			return nil, err
		}
	}
	a.Snapshots = rulesync.NewSnapshots(rdb, rulesync.SnapshotsOptions{Prefix: o.Prefix})

	if o.Parts&Decide != 0 {
		a.decide(ctx, cfg, o, rdb, st, key, up)
	}
	if o.Parts&Administer != 0 {
		lim := limiter.New(rdb, limiter.Options{
			Prefix:           o.Prefix,
			Timeout:          max(cfg.RedisTimeout, minAdminRedisTimeout),
			DenyCacheSize:    -1, // admin never calls Allow
			BreakerThreshold: -1, // nor should one admin's failures trip anything
			SubjectKey:       key,
		})
		ao := admin.Options{Logger: a.Log, Default: cfg.DefaultLimit}
		if o.Stats != nil {
			ao.Stats = o.Stats
		}
		a.Admin = admin.New(st, a.Snapshots, lim, ao)
	}
	a.Log.Info("sluice ready", slog.Any("config", cfg), slog.Bool("decide", a.Decider != nil), slog.Bool("admin", a.Admin != nil))
	return a, nil
}

// decide builds the decision path. Nothing here fails: a backend that is
// down is logged and retried.
func (a *App) decide(ctx context.Context, cfg config.Config, o Options, rdb redis.UniversalClient, st store.Store, key []byte, up identity.Invoker) {
	do := decider.Options{
		Log: a.Log, Out: o.Out, Function: o.Function, MetricsInterval: o.MetricsInterval, Prefix: o.Prefix,
		Limiter: limiter.Options{
			Timeout:         cfg.RedisTimeout,
			LeaseMax:        cfg.LeaseMax,
			LeaseTTL:        cfg.LeaseTTL,
			DenyCacheMaxAge: cfg.DenyCacheMaxAge,
		},
		SubjectKey: key, Default: cfg.DefaultLimit, Refresh: cfg.RulesRefresh, Poll: cfg.RulesVersionPoll,
		Sources: cfg.SubjectSources, Dimensions: cfg.Dimensions, ShowSubjects: cfg.SubjectShow, Stats: o.Stats,
	}
	if st != nil {
		do.Store = st
	}
	if cfg.HasSource(identity.SourceJWT) {
		do.JWT = &identity.JWTOptions{Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, TokenUse: cfg.JWTTokenUse, JWKSURL: cfg.JWTJWKSURL}
	}
	d := decider.New(ctx, rdb, do)
	a.onClose(d.Close)
	a.Dec = d
	a.JWT, a.Limiter, a.Cache, a.Metrics, a.Decider = d.JWT, d.Limiter, d.Cache, d.Metrics, d.Core
	ho := authapigw.Options{Logger: a.Log, Metrics: a.Metrics, Headers: cfg.RateLimitHeaders}
	a.Check = authapigw.NewCheck(a.Decider, ho)
	if up != nil {
		ho.Upstream = identity.NewUpstream(up, identity.UpstreamOptions{TTL: cfg.UpstreamCacheTTL, Sources: cfg.UpstreamIdentitySources})
	}
	a.Authorizer = authapigw.NewAuthorizer(a.Decider, ho)
}

// statsOnly builds the Stats part: an admin Service over no store, whose
// routes are GET /stats and, with the subject hash key configured
// (SUBJECT_HMAC_KEY or its secret), POST /subjects/find.
func (a *App) statsOnly(ctx context.Context, cfg config.Config, src admin.StatsReader) error {
	// No store: the Service is only ever asked these routes (each
	// function is pinned to its route).
	ao := admin.Options{Logger: a.Log, Stats: src}
	if cfg.SubjectHMACKey != "" || cfg.SubjectHMACKeySecretARN != "" {
		key, err := config.SubjectKey(ctx, cfg)
		if err != nil {
			return err
		}
		ao.SubjectHash = limiter.NewHasher(key).SubjectHash
	}
	a.Admin = admin.New(nil, nil, nil, ao)
	a.Log.Info("sluice ready", slog.Any("config", cfg), slog.Bool("stats", src != nil), slog.Bool("subjectHash", ao.SubjectHash != nil))
	return nil
}

// AdminHandler is the Lambda handler of one admin route (an admin.Route
// constant) for lambda.Start: the admin http.Handler serving that route
// alone, run through internal/lambdahttp. The path is built from the
// route's own resource template and the event's path parameters, so the
// function answers under any base path or resource name, and any other
// method gets 405. The audit log names the IAM caller. route "" serves
// every route from one function, routing on the event's resource. It
// needs the Administer part.
func (a *App) AdminHandler(route string) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	if a.Admin == nil {
		// A main that forgot Administer: a bug, found at its first cold start.
		panic("app: AdminHandler needs the Administer part")
	}
	o := admin.HandlerOptions{Actor: lambdahttp.Caller, RequestID: lambdahttp.RequestID}
	var resource string
	if route != "" {
		o.Routes = []string{route}
		_, resource, _ = strings.Cut(route, " ")
	}
	proxy := lambdahttp.New(a.Admin.Handler(o), lambdahttp.Options{Resource: resource}).Proxy
	pool := a.pool
	if pool == nil {
		return proxy
	}
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		resp, err := proxy(ctx, ev)
		// An admin function holds no database connection between
		// invocations: Lambda freezes the process with the connection
		// open for as long as it keeps the environment, which keeps an
		// Aurora Serverless cluster at 0 ACU from pausing and, with no
		// RDS Proxy, counts against its connection limit. The next call
		// connects again (tens of ms; an admin call can afford them).
		pool.Reset()
		return resp, err
	}
}

// Close stops the rules cache's background work and closes the clients the
// App built, newest first. It is safe on a nil App.
func (a *App) Close() {
	if a == nil {
		return
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

func (a *App) onClose(f func()) { a.closers = append(a.closers, f) }

// Shutdown is what a decision Lambda runs on SIGTERM, and `sluice local`
// on its way out: the leases' unused tokens go back to Redis, then the
// metrics aggregated since the last EMF line are written (the tokens
// returned included). It needs the Decide part and leaves the clients
// open; safe to call more than once.
func (a *App) Shutdown() { a.Dec.Shutdown() }

// PublishRules reads every rule and plan from the store and publishes them
// to Redis, as the admin path does after each write; it reports whether
// Redis took them (false when it held a newer set). `sluice local` calls it
// after seeding. It needs the Decide or Administer part.
func (a *App) PublishRules(ctx context.Context) (bool, error) {
	set, err := a.Store.LoadAll(ctx)
	if err != nil {
		return false, fmt.Errorf("publish rules: %w", err)
	}
	return a.Snapshots.Publish(ctx, set)
}

// LogReload is decider.LogReload.
var LogReload = decider.LogReload
