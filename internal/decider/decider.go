// Package decider builds Sluice's decision path: the limiter, the rules
// cache, the metrics, the JWT verifier and the core decision
// (internal/authorizer), over a Redis client the caller dialled. It is the
// one constructor of a decider, whoever runs it: the authorizer and check
// Lambdas (through internal/app), sluice local, and the public ratelimit
// package, which must not link the AWS SDK or a database driver: nothing
// here reads the environment, a secret or PostgreSQL. Rules come from the
// Redis snapshot the admin API publishes, and from Options.Store when set.
package decider

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/subjectkey"
)

// InitLoadTimeout bounds the first rules load: a start with the database
// down loads the Redis snapshot, or with Redis down too starts serving the
// default rule, after at most this.
const InitLoadTimeout = 3 * time.Second

// Options configure a decision path. Each field's default is written on it.
type Options struct {
	// Log receives every line; default a JSON logger on Out.
	Log *slog.Logger
	// Out receives the EMF metric lines; default os.Stdout.
	Out io.Writer
	// Function names the Function metric dimension; default "sluice".
	Function string
	// MetricsInterval is the least time between two EMF flushes; default
	// 10s. Negative writes every decision's line (tests).
	MetricsInterval time.Duration
	// Prefix starts every Redis key; default limiter.DefaultPrefix.
	Prefix string
	// Limiter is the limiter's settings; its Prefix, SubjectKey and
	// OnBreakerChange are set from the fields here.
	Limiter limiter.Options
	// SubjectKey is the subject hash key; nil hashes without a key.
	SubjectKey []byte
	// Store, when set, is where rules are read when the Redis snapshot is
	// missing or behind, and at every Refresh (PostgreSQL, built by
	// internal/app). Nil: the snapshot alone.
	Store rulesync.Loader
	// RulesPublicKey, when set, is the rule writers' public key
	// (RULES_PUBLIC_KEY): a snapshot they did not sign is refused, counted
	// (the RulesRefused metric) and logged, and the rules come from the
	// store. Nil: snapshots are read unverified, with a warning at start.
	RulesPublicKey ed25519.PublicKey
	// Default is the rule of a request no rule matches; nil allows it.
	Default *rules.Effective
	// Refresh and Poll are rulesync.CacheOptions'.
	Refresh, Poll time.Duration
	// Sources, Dimensions and ShowSubjects are the core's
	// (authorizer.Options).
	Sources      []identity.Source
	Dimensions   []identity.Dimension
	ShowSubjects []identity.SourceKind
	// JWT, when set, verifies bearer tokens for jwt:<claim> sources; its
	// JWKS is fetched now. Required when a source is jwt:<claim>.
	JWT *identity.JWTOptions
	// Stats, when set, counts every decision (sluice local's GET /stats).
	Stats *stats.Stats
	// FailLogInterval is authorizer.Options.FailLogInterval.
	FailLogInterval time.Duration
	// Denied is authorizer.Options.Denied: the CDN edge's recorder
	// (internal/cdn); nil records nothing.
	Denied func(api string, res *authorizer.Result)
}

// Decider is a built decision path.
type Decider struct {
	Logger  *slog.Logger
	Limiter *limiter.Limiter
	Cache   *rulesync.Cache
	Metrics *metrics.Metrics
	// JWT verifies bearer tokens; nil without a jwt: subject source.
	JWT      *identity.Verifier
	Snapshot *rulesync.Snapshots
	// Core is the decision every edge asks.
	Core *authorizer.Authorizer
	// SubjectKey is the record of which subject hash key names the
	// buckets, on this path's Redis and prefix, with its key (an embedded
	// ratelimit.Limiter checks it).
	SubjectKey *subjectkey.Record

	opts    Options // as New was given them, defaults filled
	closers []func()
}

// New builds the decision path on rdb. Nothing here fails for a backend
// that is down: Redis and the store are logged and retried, and the rules'
// failure modes and the default rule apply meanwhile. The first rules load
// is waited for, at most InitLoadTimeout.
func New(ctx context.Context, rdb redis.UniversalClient, o Options) *Decider {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	o.Function = cmp.Or(o.Function, "sluice")
	o.Prefix = cmp.Or(o.Prefix, limiter.DefaultPrefix)
	log := o.Log
	if log == nil {
		log = slog.New(slog.NewJSONHandler(o.Out, nil))
	}
	d := &Decider{Logger: log}
	if o.JWT != nil {
		// The JWKS is fetched now, within the init budget; an issuer that
		// is down leaves a verifier that refuses tokens (401) and fetches
		// again on the next one, at most every 5s.
		jctx, cancel := context.WithTimeout(ctx, identity.DefaultJWKSTimeout)
		v, err := identity.NewVerifier(jctx, *o.JWT)
		cancel()
		if err != nil {
			log.Error("JWKS fetch failed at init: bearer tokens are refused until it succeeds", slog.String("jwksUrl", v.JWKSURL()), slog.Any("error", err))
		}
		d.JWT = v
	}
	if o.SubjectKey == nil {
		log.Warn("no subject hash key: subject hashes are unkeyed, and an IP address can be recovered from its principalId")
	}
	lo := o.Limiter
	lo.Prefix, lo.SubjectKey = o.Prefix, o.SubjectKey
	lo.OnBreakerChange = func(from, to limiter.BreakerState) {
		log.Warn("redis circuit breaker", slog.String("from", from.String()), slog.String("to", to.String()))
	}
	d.Limiter = limiter.New(rdb, lo)
	d.SubjectKey = subjectkey.New(rdb, o.Prefix, o.SubjectKey, lo.Timeout)
	// Closed before the Redis client (closers run newest first): the
	// leases' unused tokens go back while it still works.
	d.closers = append(d.closers, d.closeLeases)

	// Dial Redis and load the script now, at init, so the first request
	// does not spend its few milliseconds on a TCP (or TLS) handshake.
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	if err := rdb.Ping(pctx).Err(); err != nil {
		log.Error("redis unreachable at init", slog.Any("error", err))
	} else if _, err := d.Limiter.Peek(pctx, "sluice:warmup", []limiter.Bucket{{ID: "warmup", Limit: 1, Period: time.Second}}); err != nil {
		log.Warn("limiter warm-up failed", slog.Any("error", err))
	}
	pcancel()

	d.Snapshot = rulesync.NewSnapshots(rdb, rulesync.SnapshotsOptions{Prefix: o.Prefix, PublicKey: o.RulesPublicKey})
	if o.RulesPublicKey == nil {
		log.Warn("no rules public key (RULES_PUBLIC_KEY): rules snapshots are not verified, and any process holding Redis can publish rules")
	}
	var st rulesync.Loader = d.Snapshot
	if o.Store != nil {
		st = o.Store
	}
	ictx, cancel := context.WithTimeout(ctx, InitLoadTimeout)
	defer cancel()
	cache, err := rulesync.NewCache(ictx, st, d.Snapshot, rulesync.CacheOptions{
		Snapshots: d.Snapshot,
		Default:   o.Default,
		Refresh:   o.Refresh,
		Poll:      o.Poll,
		// A request may wait for the version read: the Redis budget of
		// one request bounds it, as it bounds the limiter's call.
		VersionTimeout: lo.Timeout,
		LoadTimeout:    InitLoadTimeout,
		OnError: func(err error) {
			if errors.Is(err, rulesync.ErrRefused) {
				log.Error("rules refused: a process holding Redis wrote a rules version or snapshot the rule writers did not sign; "+
					"the rules held, or the database's, apply", slog.Any("error", err))
				return
			}
			log.Error("rules refresh failed", slog.Any("error", err))
		},
		OnReload: LogReload(log),
	})
	if err != nil {
		// Neither the Redis snapshot nor the store answered. The cache
		// works regardless, on the default rule alone, and retries with
		// backoff: say plainly what that means.
		def := "none: every request is allowed, rules with failure_mode closed included"
		if o.Default != nil {
			def = fmt.Sprintf("%d per %s (burst %d) for every subject", o.Default.Limit, o.Default.Period, o.Default.Burst)
		}
		log.Error("no rules loaded: the Redis snapshot and the database are both unavailable; serving only the default rule (DEFAULT_LIMIT) until one answers",
			slog.String("defaultLimit", def), slog.Any("error", err))
	}
	d.Cache = cache
	d.closers = append(d.closers, cache.Wait)

	lim := d.Limiter
	d.Metrics = metrics.New(metrics.Options{
		W:        o.Out,
		Function: o.Function,
		Interval: o.MetricsInterval,
		Gauges: func() (bool, time.Duration) {
			return lim.Stats().Breaker != limiter.BreakerClosed, cache.Age()
		},
		Leases: func() metrics.LeaseCounts {
			s := lim.Stats()
			return metrics.LeaseCounts{Leased: s.Leased, Taken: s.Leases, Returned: s.LeaseReturned}
		},
		RulesRefused: func() uint64 { return cache.Stats().Refused },
	})
	d.opts = o
	d.Core = authorizer.New(cache, lim, d.CoreOptions(o.Sources))
	log.Info("decision path ready", slog.String("sources", identity.FormatSources(d.Core.Sources())),
		slog.String("dimensions", identity.FormatDimensions(o.Dimensions)))
	return d
}

// CoreOptions are the options of a core on d's path reading the subject
// from sources: d's dimensions, JWT verifier and recording (log, metrics,
// stats, shown subjects, fail-storm sampling). A second core on the same
// path (the ratelimit package's authorizer wrappers read an upstream's
// answer) so decides and records as the first does.
func (d *Decider) CoreOptions(sources []identity.Source) authorizer.Options {
	o := &d.opts
	return authorizer.Options{Sources: sources, Dimensions: o.Dimensions, JWT: d.JWT, Logger: d.Logger, Metrics: d.Metrics,
		Stats: o.Stats, ShowSubjects: o.ShowSubjects, FailLogInterval: o.FailLogInterval, Denied: o.Denied}
}

// Dimensions are the named dimensions d's core limits.
func (d *Decider) Dimensions() []identity.Dimension { return d.opts.Dimensions }

// leaseReturnTimeout bounds the return of the leases' unused tokens at
// shutdown: Lambda gives a SIGTERM hook about 500 ms.
const leaseReturnTimeout = 300 * time.Millisecond

// closeLeases gives the unused leased tokens back to Redis and stops
// leasing (the limiter keeps deciding, one call a request).
func (d *Decider) closeLeases() {
	ctx, cancel := context.WithTimeout(context.Background(), leaseReturnTimeout)
	defer cancel()
	if err := d.Limiter.Close(ctx); err != nil {
		d.Logger.Warn("leased tokens not all given back: they are lost until they refill", slog.Any("error", err))
	}
}

// Shutdown gives the leases' unused tokens back to Redis and writes the
// metrics aggregated since the last EMF line. Safe to call more than once.
func (d *Decider) Shutdown() {
	d.closeLeases()
	d.Metrics.Flush()
}

// Close stops the rules cache's background work and returns the leases;
// the Redis client is the caller's to close, after.
func (d *Decider) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
}

// LogReload returns a rulesync.CacheOptions.OnReload that logs each load, and
// at warn each rule, plan or default the snapshot left out (invalid, or
// naming an unknown plan): a skipped rule can loosen a limit unnoticed.
func LogReload(log *slog.Logger) func(version int64, from rulesync.Origin, snap *rules.Snapshot) {
	return func(version int64, from rulesync.Origin, snap *rules.Snapshot) {
		skipped := snap.Skipped()
		log.Info("rules loaded", slog.Int64("version", version), slog.String("from", string(from)),
			slog.Int("rules", snap.Len()), slog.Int("skipped", len(skipped)))
		for _, sk := range skipped {
			log.Warn("rule skipped", slog.String("kind", sk.Kind), slog.String("id", sk.ID), slog.String("reason", sk.Reason))
		}
	}
}

// EmbedOptions are what the public ratelimit package's Limiter needs
// beside a Decider (ratelimit.FromDecider): whom its authorizer wrappers
// limit, how its answers are rendered, and what its Close closes.
type EmbedOptions struct {
	// ContextKey is the key of a wrapped authorizer's context naming the
	// subject; "" its principalId.
	ContextKey string
	// Headers are the rate-limit header dialects.
	Headers headers.Dialects
	// Close, when set, is called by the Limiter's Close: it closes what
	// was built for it (the Decider, the clients).
	Close func()
}
