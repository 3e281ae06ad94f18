// Package app builds Sluice's object graphs from a config.Config, one
// constructor per kind of binary: NewDecider (the authorizer and check
// Lambdas), NewAdmin (an admin Lambda of one privilege class), NewMigrator
// (the migrate Lambda). sluice local builds a Decider and a full Admin on
// the same clients, so the laptop runs what Lambda runs (the same limiter
// settings, metrics, breaker log and rules reload log).
//
// Nothing here reads the environment or exits: mains (functions/*,
// cmd/sluice) read the configuration, call a constructor, and decide what
// an error means. Each constructor fails only on configuration it cannot
// use (no Redis URL, a secret it cannot read), and then closes what it had
// built; a backend that cannot be reached is logged and retried.
package app

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
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
	"github.com/sluicehq/sluice/internal/cdn"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decider"
	authapigw "github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/lambdahttp"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/subjectkey"
)

// minAdminRedisTimeout is the least time an admin peek or reset gets from
// Redis: the authorizer's budget (REDIS_TIMEOUT, 25 ms) is tuned for the
// request path, and an admin call can afford to wait rather than answer 503.
const minAdminRedisTimeout = 500 * time.Millisecond

// Options say where a graph writes and what it is given instead of
// building it. Each constructor reads the fields it needs.
type Options struct {
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
	// Stats, when set, counts every decision of a Decider and answers a
	// full Admin's GET /stats: in-process counts of this process's
	// decisions (sluice local gives both the same one). Default none: a
	// Lambda instance sees too few of the decisions for its counts to
	// mean anything; the stack reads Contributor Insights instead.
	Stats *stats.Stats
	// StatsReader answers an AdminStats Admin's GET /stats; nil answers 503.
	// The admin-stats function builds it (internal/stats/insights), so
	// the CloudWatch SDK is linked into that function alone.
	StatsReader admin.StatsReader
}

// clients are what every graph holds: the logger, and the clients it
// built (closed by Close, newest first) or was given.
type clients struct {
	// Log is the JSON logger every part writes to.
	Log *slog.Logger
	// Redis is the Redis client: Options.Redis or one built from the
	// configuration; nil for a graph that needs none.
	Redis redis.UniversalClient
	// Store is the rules store: Options.Store, or PostgreSQL from the
	// configuration; nil for a graph that needs none.
	Store store.Store
	// Snapshots is the copy of the rules in Redis the admin path publishes
	// and the decision path reads first; nil without Redis.
	Snapshots *rulesync.Snapshots
	// signedBy is the public half of the key Snapshots signs with
	// (RULES_SIGNING_KEY or its secret); nil when it publishes unsigned.
	signedBy ed25519.PublicKey

	pool    *pgxpool.Pool // the database's, when one was built
	closers []func()
}

// start fills the defaults of o and returns the graph's clients with
// their logger.
func start(cfg config.Config, o *Options) clients {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Function == "" {
		o.Function = "sluice"
	}
	if o.Prefix == "" {
		o.Prefix = cmp.Or(cfg.RedisPrefix, limiter.DefaultPrefix)
	}
	return clients{Log: NewLogger(o.Out, cfg.LogLevel).With(slog.String("function", o.Function))}
}

// openStore opens the rules store: o.Store, or PostgreSQL.
func (c *clients) openStore(ctx context.Context, cfg config.Config, o *Options) error {
	if c.Store = o.Store; c.Store != nil {
		return nil
	}
	pool, err := config.Postgres(ctx, cfg)
	if err != nil {
		return err
	}
	c.onClose(pool.Close)
	c.pool = pool
	c.Store = postgres.NewWithOptions(pool, store.Options{MaxRules: cfg.MaxRules})
	return nil
}

// openRedis opens Redis (o.Redis, or a client of the configuration) and
// the rules snapshot on it: signed with the rule writers' key when the
// configuration holds it (RULES_SIGNING_KEY or its secret: the
// admin-write and migrate functions, sluice local), verified with
// RULES_PUBLIC_KEY, else with the key's public half.
func (c *clients) openRedis(ctx context.Context, cfg config.Config, o *Options) error {
	secret, err := config.RulesSigningSecret(ctx, cfg)
	if err != nil {
		return err
	}
	so := rulesync.SnapshotsOptions{Prefix: o.Prefix, PublicKey: cfg.RulesPublicKey}
	if secret != nil {
		so.SigningKey = rulesync.NewSigningKey(secret)
		pub := so.SigningKey.Public().(ed25519.PublicKey)
		if so.PublicKey != nil && !bytes.Equal(pub, so.PublicKey) {
			return fmt.Errorf("rules signing key: RULES_PUBLIC_KEY %s is not its public half (%s): the deciders would refuse every snapshot",
				rulesync.FormatPublicKey(so.PublicKey), rulesync.FormatPublicKey(pub))
		}
		c.signedBy = pub
	}
	rdb := o.Redis
	if rdb == nil {
		if rdb, err = config.Redis(ctx, cfg); err != nil {
			return err
		}
		c.onClose(func() { rdb.Close() })
	}
	c.Redis = rdb
	c.Snapshots = rulesync.NewSnapshots(rdb, so)
	return nil
}

// openLimiter opens what the decision path and the full admin API share:
// the store, Redis and its rules snapshot, the subject hash key, and the
// limiter's options of global budgets (the ledger LEDGER_TABLE names, nil
// without one, and this Region among GLOBAL_REGIONS).
func (c *clients) openLimiter(ctx context.Context, cfg config.Config, o *Options) ([]byte, limiter.Options, error) {
	if err := c.openStore(ctx, cfg, o); err != nil {
		return nil, limiter.Options{}, err
	}
	if err := c.openRedis(ctx, cfg, o); err != nil {
		return nil, limiter.Options{}, err
	}
	key, err := config.SubjectKey(ctx, cfg)
	if err != nil {
		return nil, limiter.Options{}, err
	}
	led, err := NewLedger(ctx, cfg)
	return key, limiter.Options{Ledger: led, Regions: len(cfg.GlobalRegions), Region: cfg.Region, LedgerTimeout: cfg.LedgerTimeout}, err
}

// Close stops the background work and closes the clients the graph built,
// newest first. It is safe on a nil graph and more than once.
func (c *clients) Close() {
	if c == nil {
		return
	}
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}

func (c *clients) onClose(f func()) { c.closers = append(c.closers, f) }

// closeOnError closes c when *err is set: the constructors' deferred
// clean-up.
func (c *clients) closeOnError(err *error) {
	if *err != nil {
		c.Close()
	}
}

// PublishRules reads every rule and plan from the store and publishes them
// to Redis, as the admin path does after each write; it reports whether
// Redis took them (false when it held a newer set). `sluice local` calls it
// after seeding.
func (c *clients) PublishRules(ctx context.Context) (bool, error) {
	set, err := c.Store.LoadAll(ctx)
	if err != nil {
		return false, fmt.Errorf("publish rules: %w", err)
	}
	return c.Snapshots.Publish(ctx, set)
}

// Decider is the graph of the authorizer and check Lambdas: the decision
// path (a decider.Decider, whose Core, Limiter, Cache, JWT and Metrics it
// promotes) over Redis and the rules store, and its two handlers.
type Decider struct {
	clients
	*decider.Decider
	// Authorizer answers API Gateway authorizer events; Check answers
	// POST /check, both asking Core.
	Authorizer *authapigw.Handler
	Check      *authapigw.Check
	// Edge records the long denials the CDN edge repeats (internal/cdn);
	// nil without an edge key (EDGE_KEY, EDGE_KEY_SECRET_ARN).
	Edge *cdn.Recorder
}

// NewDecider builds the decision path from cfg: the limiter with the
// request path's budget and breaker, the rules cache (loaded at once:
// the Redis snapshot, else the store), the authorizer and check handlers
// and their metrics. Redis is dialled and the script loaded at init.
func NewDecider(ctx context.Context, cfg config.Config, o Options) (d *Decider, err error) {
	d = &Decider{clients: start(cfg, &o)}
	defer d.closeOnError(&err)
	key, lo, err := d.openLimiter(ctx, cfg, &o)
	if err != nil {
		return nil, err
	}
	up, err := config.Upstream(ctx, cfg)
	if err != nil {
		return nil, err
	}
	lo.Timeout = cfg.RedisTimeout
	lo.LeaseMax = cfg.LeaseMax
	lo.LeaseTTL = cfg.LeaseTTL
	lo.DenyCacheMaxAge = cfg.DenyCacheMaxAge
	lo.OpenShare = cfg.GlobalOpenShare
	do := decider.Options{
		Log: d.clients.Log, Out: o.Out, Function: o.Function, MetricsInterval: o.MetricsInterval, Prefix: o.Prefix,
		Limiter: lo, SubjectKey: key, Store: d.Store, RulesPublicKey: cfg.RulesPublicKey,
		Default: cfg.DefaultLimit, Refresh: cfg.RulesRefresh, Poll: cfg.RulesVersionPoll,
		Sources: cfg.SubjectSources, Dimensions: cfg.Dimensions, ShowSubjects: cfg.SubjectShow, Stats: o.Stats,
	}
	if cfg.HasSource(identity.SourceJWT) {
		do.JWT = &identity.JWTOptions{Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, TokenUse: cfg.JWTTokenUse, JWKSURL: cfg.JWTJWKSURL}
	}
	if d.Edge, err = d.newEdgeRecorder(ctx, cfg, o.Prefix); err != nil {
		return nil, err
	}
	if d.Edge != nil {
		do.Denied = d.Edge.Denied
	}
	p := decider.New(ctx, d.Redis, do)
	d.onClose(p.Close)
	d.Decider = p
	ho := authapigw.Options{Logger: d.clients.Log, Metrics: d.Metrics, Headers: cfg.RateLimitHeaders}
	d.Check = authapigw.NewCheck(d.Core, ho)
	if up != nil {
		ho.Upstream = identity.NewUpstream(up, identity.UpstreamOptions{TTL: cfg.UpstreamCacheTTL, Sources: cfg.UpstreamIdentitySources})
	}
	if ho.OriginVerify, err = config.OriginVerify(ctx, cfg); err != nil {
		return nil, err
	}
	d.Authorizer = authapigw.NewHandler(d.Core, ho)
	d.clients.Log.Info("sluice ready", slog.Any("config", cfg), slog.Bool("decide", true))
	return d, nil
}

// Close closes the decision path and the clients; safe to call more than
// once.
func (d *Decider) Close() { d.clients.Close() }

// AdminClass is the privilege class of an admin graph: what its routes
// may reach.
type AdminClass uint8

const (
	// AdminFull serves every route: the store, Redis (each write
	// publishes the snapshot; buckets are read, reset, charged) and the
	// subject hash key. The admin-write and admin-subjects functions, and
	// sluice local.
	AdminFull AdminClass = iota + 1
	// AdminRead serves the routes that only read rules and plans, over the
	// store alone: no Redis is dialled, no subject hash key read, nothing
	// published. The admin-read function connects as the database's
	// read-only role, so it could not write the rules if it tried.
	AdminRead
	// AdminStats serves GET /stats from Options.StatsReader (the
	// Contributor Insights reader the admin-stats function passes) and,
	// with the subject hash key configured, POST /subjects/find: no Redis,
	// no database.
	AdminStats
)

// Admin is the graph of an admin Lambda of one class, or of sluice
// local's admin API.
type Admin struct {
	clients
	// Service is the admin API.
	Service *admin.Service
	// SubjectKey is the record of the subject hash key, which the
	// deployment writes (AdminFull only; nil otherwise).
	SubjectKey *subjectkey.Record
}

// NewAdmin builds the admin API of class from cfg. Nothing is dialled: a
// database or Redis that cannot be reached answers 503 until it is back.
func NewAdmin(ctx context.Context, cfg config.Config, class AdminClass, o Options) (a *Admin, err error) {
	a = &Admin{clients: start(cfg, &o)}
	defer a.closeOnError(&err)
	switch class {
	case AdminStats:
		ao := admin.Options{Logger: a.Log, Stats: o.StatsReader}
		if cfg.SubjectHMACKey != "" || cfg.SubjectHMACKeySecretARN != "" {
			key, err := config.SubjectKey(ctx, cfg)
			if err != nil {
				return nil, err
			}
			ao.SubjectHash = limiter.NewHasher(key).SubjectHash
		}
		// No store: the Service is only ever asked these routes.
		a.Service = admin.New(nil, nil, nil, ao)
		a.Log.Info("sluice ready", slog.Any("config", cfg), slog.Bool("stats", o.StatsReader != nil), slog.Bool("subjectHash", ao.SubjectHash != nil))
		return a, nil
	case AdminRead:
		if err := a.openStore(ctx, cfg, &o); err != nil {
			return nil, err
		}
		a.Service = admin.New(a.Store, nil, nil, admin.Options{Logger: a.Log, Default: cfg.DefaultLimit})
		a.Log.Info("sluice ready", slog.Any("config", cfg), slog.Bool("readOnly", true))
		return a, nil
	case AdminFull:
	default:
		return nil, fmt.Errorf("app: admin class %d", class)
	}
	key, lo, err := a.openLimiter(ctx, cfg, &o) // the subject view reads global budgets
	if err != nil {
		return nil, err
	}
	lo.Prefix = o.Prefix
	lo.Timeout = max(cfg.RedisTimeout, minAdminRedisTimeout)
	lo.DenyCacheSize = -1    // admin never calls Allow
	lo.BreakerThreshold = -1 // nor should one admin's failures trip anything
	lo.SubjectKey = key
	lo.LedgerTimeout = max(cfg.LedgerTimeout, time.Second)
	lim := limiter.New(a.Redis, lo)
	a.SubjectKey = subjectkey.New(a.Redis, o.Prefix, key, max(cfg.RedisTimeout, minAdminRedisTimeout))
	rec, err := a.newEdgeRecorder(ctx, cfg, o.Prefix)
	if err != nil {
		return nil, err
	}
	a.Service = admin.New(a.Store, a.Snapshots, edgeResets{lim, rec}, admin.Options{Logger: a.Log, Default: cfg.DefaultLimit, Stats: o.Stats, SubjectKey: a.SubjectKey})
	a.Log.Info("sluice ready", slog.Any("config", cfg), slog.Bool("admin", true))
	return a, nil
}

// Handler is the Lambda handler of one admin route (an admin.Route
// constant) for lambda.Start: the admin http.Handler serving that route
// alone, run through internal/lambdahttp. The path is built from the
// route's own resource template and the event's path parameters, so the
// function answers under any base path or resource name, and any other
// method gets 405. The audit log names the IAM caller. route "" serves
// every route, routing on the event's resource.
func (a *Admin) Handler(route string) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	o := admin.HandlerOptions{Actor: lambdahttp.Caller, RequestID: lambdahttp.RequestID}
	var resource string
	if route != "" {
		o.Routes = []string{route}
		_, resource, _ = strings.Cut(route, " ")
	}
	proxy := lambdahttp.New(a.Service.Handler(o), lambdahttp.Options{Resource: resource}).Proxy
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

// Migration is the migrate Lambda's graph: the database and its Migrator.
type Migration struct {
	clients
	// Migrator applies the database migrations.
	Migrator *Migrator
}

// NewMigrator builds the Migrator on the configured database (no Redis).
func NewMigrator(ctx context.Context, cfg config.Config, o Options) (m *Migration, err error) {
	m = &Migration{clients: start(cfg, &o)}
	defer m.closeOnError(&err)
	o.Store = nil // the migrator needs the pool itself
	if err := m.openStore(ctx, cfg, &o); err != nil {
		return nil, err
	}
	db := stdlib.OpenDBFromPool(m.pool)
	m.onClose(func() { db.Close() })
	m.Migrator = &Migrator{db: db, log: m.Log, store: m.Store}
	if m.Migrator.reader, err = config.ReaderCredentials(ctx, cfg); err != nil {
		return nil, err
	}
	return m, nil
}

// Local is the graph of one process that decides and administers: sluice
// local, and the harnesses that run a whole deployment in one process (the
// fault harness, end-to-end tests). Its Decider and its full Admin share
// the clients and the stats.
type Local struct {
	*Decider
	// Admin is the admin API, on the Decider's Redis and store.
	Admin *Admin
}

// NewLocal builds a Decider and a full Admin from cfg on the same clients;
// o.Stats defaults to a new one, which both use (GET /stats answers with
// the process's own decisions).
func NewLocal(ctx context.Context, cfg config.Config, o Options) (*Local, error) {
	if o.Stats == nil {
		o.Stats = stats.New(stats.Options{})
	}
	d, err := NewDecider(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	ao := o
	ao.Redis, ao.Store = d.Redis, d.Store
	adm, err := NewAdmin(ctx, cfg, AdminFull, ao)
	if err != nil {
		d.Close()
		return nil, err
	}
	d.onClose(adm.Close)
	return &Local{Decider: d, Admin: adm}, nil
}

// NewLedger returns the ledger of global budgets LEDGER_TABLE names (at
// LEDGER_ENDPOINT when set), or nil without one: global rules are then
// decided as regional ones.
func NewLedger(ctx context.Context, cfg config.Config) (limiter.Ledger, error) {
	if cfg.LedgerTable == "" {
		return nil, nil
	}
	region := "" // the Lambda's own (AWS_REGION)
	if cfg.LedgerEndpoint != "" {
		region = "us-east-1" // dynalite takes any
	}
	c, err := ledger.NewClient(ctx, cfg.LedgerEndpoint, region)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return ledger.New(c, ledger.Options{Table: cfg.LedgerTable, Timeout: cfg.LedgerTimeout}), nil
}
