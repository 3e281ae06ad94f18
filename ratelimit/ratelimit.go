// Package ratelimit adds Sluice's rate limits to an API Gateway Lambda
// authorizer written in Go, in process: the team's own handler
// authenticates the caller first, then Sluice charges the caller it named
// (its principalId, or a value of its context) against the rules, with the
// same rules, Redis buckets, context values and 429 gateway responses as
// Sluice's own authorizer Lambda. No second Lambda, no extra invoke.
//
//	rl, err := awsenv.FromEnv(ctx) // ratelimit/awsenv: REDIS_URL, SUBJECT_HMAC_KEY_SECRET_ARN, … as the Sluice authorizer reads them
//	if err != nil { … }
//	lambda.Start(rl.WrapREST(myAuthorizer))
//
// The Limiter must hash subjects with the deployment's subject hash key
// (Options.SubjectKey; SUBJECT_HMAC_KEY_SECRET_ARN with awsenv): a subject's
// buckets are named by that hash, and the admin API's reset, usage refund
// and limits view act on the buckets of its own key. The deployment
// records its key's id in Redis, next to the rules snapshot (package
// internal/subjectkey); a Limiter only compares: one whose key differs
// refuses to start (New and FromEnv return the error, which names the
// fix), and refuses requests if the record changes later; it is accepted
// again within a second of the fix. Neither side charges or resets a
// bucket the other cannot see.
//
// It is the in-process sibling of the authorizer's UPSTREAM_AUTHORIZER
// setting, and both run one implementation: the wrapped handler's error
// passes through unchanged, and its Deny is the error "Unauthorized" (401,
// never the 429 of a rate limit); neither reaches Redis;
// an allowed caller over the limit gets a Deny of the method with Sluice's
// context, which the construct's gateway responses (infra/sluice
// AddGatewayResponses) turn into 429 with Retry-After and the RateLimit
// fields; every answer's context is the handler's merged with Sluice's,
// Sluice's keys winning (see WrapREST).
//
// # Real 429s: the middleware and the Lambda integration wrappers
//
// Where Go handles the request itself, the Limiter decides before the
// handler runs, with the authorizer's decision (subject sources and
// hygiene, rules, limiter, failure modes, shadow rules), and answers a
// request over its limit with 429, Retry-After, the RateLimit fields and a
// problem+json body: Handler for net/http (a service on ECS, EKS, EC2),
// LimitHTTPAPI, LimitProxy and LimitALB for the Lambda integrations of an
// HTTP API, a REST API and a load balancer (docs/middleware.md). The
// subject is read by Options.Sources (SUBJECT_SOURCES):
//
//	rl, err := ratelimit.New(ctx, ratelimit.Options{RedisURL: "redis://…", SubjectKey: key, Sources: "header:x-api-key"})
//	if err != nil { … }
//	http.ListenAndServe(":8080", rl.Handler(mux, ratelimit.HandlerOptions{API: "orders"}))
//
// # Stability
//
// Until Sluice's v1, this package follows the module's v0 versions, with
// this promise: the names exported here (Options and its fields, New,
// Limiter and its methods, the handler types, HandlerOptions,
// Observer, Decision, Health, the Outcome and ProblemTypeBase constants,
// ErrUnauthorized, MaxSubjectLen) keep their meaning and signatures across minor versions;
// new Options fields and methods may be added. Its behaviour follows the
// Sluice authorizer's: the environment variables, the rules, the Redis key
// layout, the context keys (docs/authorizer.md) and MaxSubjectLen's value
// may change before v1, and each change is in the release notes. Nothing
// under internal/ is part of the promise, nor are FromDecider and
// CoreObserver, which take or give its types for sluice local and awsenv.
package ratelimit

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/decider"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/envvar"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/subjectkey"
)

// MaxSubjectLen is the longest subject, in bytes, that a Limiter charges:
// the bound of Sluice's authorizer. A longer principalId or context value
// is refused with "Unauthorized", never charged.
const MaxSubjectLen = identity.MaxSubjectLen

// Service defaults: a long-running process (a service on ECS, EKS or EC2
// behind Handler, or the integration wrappers outside Lambda) serves many
// requests at once, and when its host is busy its goroutines wait for a
// core: the Lambda's budget (25 ms, 4 connections, one request at a time
// per instance) then fails most decisions open. A Lambda (the
// AWS_LAMBDA_FUNCTION_NAME variable is set) keeps the authorizer's.
const (
	// ServiceTimeout is Options.Timeout's default outside Lambda.
	ServiceTimeout = 250 * time.Millisecond
	// ServicePoolSize is Options.PoolSize's least default outside Lambda
	// (16 a CPU when that is more).
	ServicePoolSize = 64
	// LambdaTimeout and LambdaPoolSize are the defaults in a Lambda, the
	// authorizer's.
	LambdaTimeout  = 25 * time.Millisecond
	LambdaPoolSize = 4
)

// Options configure a Limiter. Each field maps to the environment
// variable of Sluice's authorizer Lambda it names, and is checked the same
// way (docs/authorizer.md); the zero value of a field is that variable
// unset. The rules are read from the Redis snapshot Sluice's admin API
// publishes; package ratelimit/awsenv builds a Limiter from the
// authorizer's own environment instead (Secrets Manager, the PostgreSQL
// fallback), and links the AWS SDK and pgx to do it.
type Options struct {
	// RedisURL is REDIS_URL: the Redis holding the buckets and the rules
	// snapshot, redis://[user:password@]host:port or rediss:// for TLS.
	// Required unless Redis is set.
	RedisURL string
	// Redis, when set, is the client used instead of one built from
	// RedisURL (a cluster or Sentinel client, say); Close leaves it open.
	// Give it ContextTimeoutEnabled, or Timeout cannot bound a call.
	Redis redis.UniversalClient
	// ContextKey is the key of the wrapped handler's context whose value
	// is the subject to limit, such as "tenant" (SUBJECT_SOURCES=context:tenant).
	// "" limits by the handler's principalId (SUBJECT_SOURCES=principal,
	// the default). An HTTP API simple response has no principalId: set it.
	ContextKey string
	// DefaultLimit is DEFAULT_LIMIT: the limit of a request no rule
	// matches, such as "100/1m" (100 a minute) or "100/1m,burst=200". ""
	// allows such requests without a limit.
	DefaultLimit string
	// Headers is RATELIMIT_HEADERS: the rate-limit header dialects whose
	// values the context carries, a comma list of draft11, draft6 and
	// legacy. "" is draft11.
	Headers string
	// Prefix is REDIS_PREFIX: what every Redis key starts with, the same
	// as the Sluice deployment whose rules this Limiter obeys. "" is "sl:".
	Prefix string
	// SubjectKey is SUBJECT_HMAC_KEY: the key of the subject hash that
	// names each subject's buckets, at least 16 bytes. It must be the
	// deployment's own (its admin API resets, refunds and inspects the
	// buckets of its key; ratelimit/awsenv reads it from Secrets
	// Manager). "" is an unkeyed hash, which a keyed deployment's record
	// refuses (see the package documentation). Keep it out of logs.
	SubjectKey string
	// RulesPublicKey is RULES_PUBLIC_KEY: the Sluice deployment's rule
	// writers' Ed25519 public key, 32 bytes in standard base64 (sluice
	// local prints it). A rules snapshot in Redis they did not sign is
	// then refused, so a process holding Redis cannot change the rules.
	// "" reads snapshots unverified, with a warning.
	RulesPublicKey string
	// Timeout is REDIS_TIMEOUT: the budget of one Redis call, after which
	// each rule's failure mode decides (open: allow; closed: deny). 0 is
	// ServiceTimeout (250ms), or LambdaTimeout (25ms) in a Lambda; at most
	// 10s.
	Timeout time.Duration
	// PoolSize is REDIS_POOL_SIZE: the most Redis connections at once,
	// which bounds the decisions waiting on Redis at once. 0 is
	// ServicePoolSize (64) or 16 a CPU, whichever is more, or
	// LambdaPoolSize (4) in a Lambda. Ignored with Redis.
	PoolSize int
	// Out receives the JSON log lines and the CloudWatch EMF metric lines
	// (decisions, fail-opens). nil is os.Stdout, a Lambda's log stream.
	Out io.Writer
	// LogLevel is the least level of the lines written to Out. Nil is
	// slog.LevelInfo in a Lambda (a line per deny, as Sluice's Lambdas
	// write) and slog.LevelWarn elsewhere, where a busy service would
	// write a line per deny: failures, fail-opens (sampled, FailLogEvery)
	// and warnings only. slog.LevelInfo logs every deny.
	LogLevel slog.Leveler
	// EMF says whether decision metrics are written to Out as CloudWatch
	// EMF lines, one a function every 10 s: EMFAuto (the default) in a
	// Lambda only, where CloudWatch reads its log stream; elsewhere count
	// with an Observer (prommetrics, otelmetrics). EMFOn, EMFOff: always,
	// never.
	EMF EMF

	// Sources is SUBJECT_SOURCES of the requests the Limiter answers
	// itself: the net/http middleware (Handler) and the Lambda integration
	// wrappers (LimitHTTPAPI, LimitProxy, LimitALB). A comma list of
	// header:<name>, query:<name>, apikey, ip and jwt:<claim>, the first
	// with a value naming the caller (docs/authorizer.md). "" is
	// header:x-api-key. The authorizer wrappers (WrapREST, …) read
	// ContextKey instead.
	Sources string
	// Dimensions is DIMENSIONS: named dimensions limited beside the
	// subject, such as "ip=ip" (docs/authorizer.md).
	Dimensions string
	// LeaseMax is LEASE_MAX: the most requests one token lease of a
	// subject this process sees often admits without a Redis call
	// (docs/authorizer.md, token leases). 0 is 64; 1 turns leases off, so
	// every decision is one Redis call.
	LeaseMax int
	// JWTIssuer, JWTAudience (a comma list) and JWTJWKSURL are JWT_ISSUER,
	// JWT_AUDIENCE and JWT_JWKS_URL: how a jwt:<claim> source verifies
	// the bearer token. The issuer and audience are required by one.
	JWTIssuer, JWTAudience, JWTJWKSURL string
	// FailLogEvery is how often a storm of fail-open (or fail-closed)
	// decisions writes a log line, each with the count it stands for; 0
	// is 1s.
	FailLogEvery time.Duration
	// Ledger, when set, holds the budgets of global rules, shared with
	// every Region (docs/global.md): awsenv.NewLedger builds one on
	// DynamoDB. Nil decides global rules as regional ones, and links no
	// DynamoDB client.
	Ledger Ledger
	// Regions is GLOBAL_REGIONS's count: the Regions sharing Ledger.
	Regions int
	// Region is this Region's name (AWS_REGION), under which the ledger
	// records what it holds; every Region sharing Ledger needs its own.
	Region string
}

// EMF says where a Limiter writes CloudWatch EMF metric lines
// (Options.EMF).
type EMF uint8

// The EMF settings.
const (
	EMFAuto EMF = iota // in a Lambda only
	EMFOn              // always, to Options.Out
	EMFOff             // never
)

// Ledger holds global budgets per window: what every Region took. It is
// internal/limiter's Ledger, declared here so that a Limiter without one
// links no DynamoDB client.
type Ledger interface {
	Take(ctx context.Context, key string, want, limit int64, expires time.Time, region string, held int64) (int64, error)
	Give(ctx context.Context, key string, n int64, region string, held int64) error
	Used(ctx context.Context, key string) (int64, error)
	Reset(ctx context.Context, key string) (int64, error)
}

// Limiter limits the callers an authorizer handler lets through. It is
// safe for concurrent use; build one at init and reuse it across
// invocations.
type Limiter struct {
	dec   *decider.Decider
	close func()
	// chain decides behind the authorizer wrappers' handlers; core decides
	// the requests of the middleware and integration wrappers, by sources.
	chain   *apigw.Handler
	core    *authorizer.Authorizer
	dialect headers.Dialects
	sources []identity.Source
	// headers are the canonical names of the request headers the sources
	// and dimensions read (Authorization with a jwt: source): the only
	// ones a net/http request's single-value map is given.
	headers []string
	// keyErr holds the refusal the last check of the subject hash key
	// found (nil: none), which every call returns until a later check
	// finds the record fixed; keyNext is when, in Unix nanoseconds, the
	// key is checked next.
	keyErr  atomic.Pointer[error]
	keyNext atomic.Int64
}

// inLambda reports whether the process is a Lambda function's.
func inLambda() bool { return os.Getenv("AWS_LAMBDA_FUNCTION_NAME") != "" }

// New builds a Limiter from o: it dials Redis, loads the rules from the
// Redis snapshot and checks its subject hash key against the one recorded
// for the buckets before returning, within about 4 seconds at most (1 s
// for Redis, 3 s for the rules, then the Redis timeout for the key).
// A Redis that cannot be reached is not an error: it is logged, the rules'
// failure modes and the default limit apply, and both are retried (the key
// is checked at later requests, at most once a second, until Redis
// answers). New returns an error for settings it cannot use, naming each,
// and for a subject hash key other than the one recorded for the buckets
// (a record nobody wrote yet accepts any key).
func New(ctx context.Context, o Options) (*Limiter, error) {
	var errs []error
	bad := func(field string, err error) { errs = append(errs, fmt.Errorf("%s: %w", field, err)) }
	if o.ContextKey != "" && !identity.ValidKey(o.ContextKey) {
		errs = append(errs, fmt.Errorf("ContextKey %q: want 1 to 128 printable ASCII characters, no space, comma or semicolon", o.ContextKey))
	}
	src, err := identity.ParseSources(o.Sources)
	switch {
	case err != nil:
		bad("Sources (SUBJECT_SOURCES)", err)
	case identity.HasKind(src, identity.SourcePrincipal) || identity.HasKind(src, identity.SourceContext):
		//lint:ignore ST1005 it names the field, as the caller spells it
		errs = append(errs, fmt.Errorf("Sources (SUBJECT_SOURCES) %q: principal and context:<key> read an authorizer's answer: set ContextKey for the authorizer wrappers, and header, query, apikey, ip or jwt sources here", o.Sources))
	}
	dims, err := identity.ParseDimensions(o.Dimensions)
	if err != nil {
		bad("Dimensions (DIMENSIONS)", err)
	}
	var def *rules.Effective
	if o.DefaultLimit != "" {
		if def, err = rules.ParseLimit(o.DefaultLimit); err != nil {
			bad("DefaultLimit (DEFAULT_LIMIT)", err)
		}
	}
	dialect, err := headers.Parse(o.Headers)
	if err != nil {
		bad("Headers (RATELIMIT_HEADERS)", err)
	}
	if o.SubjectKey != "" && len(o.SubjectKey) < 16 {
		bad("SubjectKey (SUBJECT_HMAC_KEY)", errors.New("must be at least 16 bytes"))
	}
	var rulesKey ed25519.PublicKey
	if o.RulesPublicKey != "" {
		if k, err := base64.StdEncoding.DecodeString(o.RulesPublicKey); err != nil || len(k) != ed25519.PublicKeySize {
			bad("RulesPublicKey (RULES_PUBLIC_KEY)", fmt.Errorf("want %d bytes in standard base64", ed25519.PublicKeySize))
		} else {
			rulesKey = k
		}
	}
	if o.Timeout < 0 || o.Timeout > envvar.RedisTimeout.Max {
		bad("Timeout (REDIS_TIMEOUT)", fmt.Errorf("%s: want 0 (the default) up to %s", o.Timeout, envvar.RedisTimeout.Max))
	}
	var jwt *identity.JWTOptions
	if needsJWT(src, dims) {
		if o.JWTIssuer == "" || o.JWTAudience == "" {
			bad("JWTIssuer (JWT_ISSUER)", errors.New("a jwt:<claim> source needs JWTIssuer (JWT_ISSUER) and JWTAudience (JWT_AUDIENCE)"))
		}
		jwt = &identity.JWTOptions{Issuer: o.JWTIssuer, Audience: envvar.List(o.JWTAudience), JWKSURL: o.JWTJWKSURL}
	}
	timeout, pool := o.Timeout, o.PoolSize
	if inLambda() {
		timeout, pool = cmp.Or(timeout, LambdaTimeout), cmp.Or(pool, LambdaPoolSize)
	} else {
		timeout, pool = cmp.Or(timeout, ServiceTimeout), cmp.Or(pool, max(ServicePoolSize, 16*runtime.GOMAXPROCS(0)))
	}
	rdb := o.Redis
	var closeRedis func()
	if rdb == nil {
		if o.RedisURL == "" {
			errs = append(errs, errors.New("RedisURL (REDIS_URL): required unless Redis is set"))
		} else if ro, err := redis.ParseURL(o.RedisURL); err != nil {
			bad("RedisURL (REDIS_URL)", errors.New("not a redis:// or rediss:// URL"))
		} else {
			ro.ContextTimeoutEnabled = true
			ro.Protocol = 2 // RESP3 checks every connection for pushes around every command
			ro.PoolSize, ro.MinIdleConns = pool, 1
			// A connection waits for a free one no longer than a call may take.
			ro.PoolTimeout = timeout
			ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = time.Second, time.Second, time.Second
			ro.MaxRetries = 1
			ro.PipelinePoolSize = -1
			rdb = redis.NewClient(ro)
			closeRedis = func() { rdb.Close() }
		}
	}
	if err := errors.Join(errs...); err != nil {
		if closeRedis != nil {
			closeRedis()
		}
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	fn := cmp.Or(os.Getenv("AWS_LAMBDA_FUNCTION_NAME"), "ratelimit")
	var key []byte
	if o.SubjectKey != "" {
		key = []byte(o.SubjectKey)
	}
	out := o.Out
	if out == nil {
		out = os.Stdout
	}
	level, emf := o.LogLevel, out
	if level == nil {
		level = slog.LevelWarn
		if inLambda() {
			level = slog.LevelInfo
		}
	}
	if o.EMF == EMFOff || (o.EMF == EMFAuto && !inLambda()) {
		emf = io.Discard // the decider's metrics, counted, written nowhere
	}
	d := decider.New(ctx, rdb, decider.Options{
		Log: slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level})).With(slog.String("function", fn)), Out: emf, Function: fn,
		Prefix:     o.Prefix,
		Limiter:    limiter.Options{Timeout: timeout, LeaseMax: o.LeaseMax, Ledger: o.Ledger, Regions: o.Regions, Region: o.Region},
		SubjectKey: key, RulesPublicKey: rulesKey, Default: def, Sources: src, Dimensions: dims, JWT: jwt, FailLogInterval: o.FailLogEvery,
	})
	l := FromDecider(d, decider.EmbedOptions{ContextKey: o.ContextKey, Headers: dialect, Close: func() {
		d.Close()
		if closeRedis != nil {
			closeRedis()
		}
	}})
	if err := l.checkKey(ctx); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// needsJWT reports whether a source or dimension reads a verified claim.
func needsJWT(src []identity.Source, dims []identity.Dimension) bool {
	return identity.HasKind(src, identity.SourceJWT) ||
		slices.ContainsFunc(dims, func(d identity.Dimension) bool { return identity.HasKind(d.Sources, identity.SourceJWT) })
}

// FromDecider returns the Limiter over d, a decision path this module
// built: sluice local's, whose REST gateway shares it, and
// ratelimit/awsenv's, built from the Lambda's environment with what
// package ratelimit must not link (the AWS SDK, pgx). Code outside this
// module cannot name a decider.Decider: it calls New, which builds the
// path itself. FromDecider does not check the subject hash key (CheckKey).
func FromDecider(d *decider.Decider, o decider.EmbedOptions) *Limiter {
	// The authorizer wrappers' handler is the upstream authorizer, run in
	// process: the subject is read of its answer by the sources the
	// Lambda's UPSTREAM_AUTHORIZER chaining reads it with (one path,
	// apigw's), over the same rules cache, limiter and metrics.
	up := []identity.Source{{Kind: identity.SourcePrincipal}}
	if o.ContextKey != "" {
		up = []identity.Source{{Kind: identity.SourceContext, Name: o.ContextKey}}
	}
	ho := apigw.Options{Logger: d.Logger, Metrics: d.Metrics, Headers: o.Headers}
	closer := o.Close
	if closer == nil {
		closer = func() {}
	}
	return &Limiter{
		dec:     d,
		close:   closer,
		chain:   apigw.NewHandler(authorizer.New(d.Cache, d.Limiter, d.CoreOptions(up)), ho),
		core:    d.Core,
		dialect: cmp.Or(o.Headers, headers.Default),
		sources: d.Core.Sources(),
		headers: headerNames(d.Core.Sources(), d.Dimensions()),
	}
}

// headerNames are the canonical names of the headers the subject sources
// and dimensions read.
func headerNames(sources []identity.Source, dims []identity.Dimension) []string {
	var names []string
	add := func(src []identity.Source) {
		for _, s := range src {
			switch s.Kind {
			case identity.SourceHeader:
				names = append(names, http.CanonicalHeaderKey(s.Name))
			case identity.SourceJWT:
				names = append(names, "Authorization")
			}
		}
	}
	add(sources)
	for _, d := range dims {
		add(d.Sources)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// keyRetry is the time between two checks of the subject hash key while
// it is refused or Redis does not answer, and keyRecheck while it is
// accepted: a fix, or a rotation away from this Limiter's key, is seen
// within them.
var (
	keyRetry   = time.Second
	keyRecheck = 10 * time.Second
)

// checkKey compares the Limiter's subject hash key with the one the
// deployment recorded for the buckets (subjectkey.Record.Check, one Redis
// GET; it never writes), at most once a keyRecheck while they agree or
// nothing is recorded, once a keyRetry otherwise, and returns the refusal
// the last check found. A check Redis does not answer is logged and
// changes nothing; meanwhile the Limiter decides as its rules' failure
// modes and Redis allow.
func (l *Limiter) checkKey(ctx context.Context) error {
	now := time.Now().UnixNano()
	if next := l.keyNext.Load(); now >= next && l.keyNext.CompareAndSwap(next, now+int64(keyRetry)) {
		refused := l.keyErr.Load() != nil
		switch err := l.dec.SubjectKey.Check(ctx); {
		case err == nil:
			l.keyErr.Store(nil)
			l.keyNext.Store(now + int64(keyRecheck))
			if refused {
				l.dec.Logger.InfoContext(ctx, "subject hash key accepted: the record names it now")
			}
		case errors.Is(err, subjectkey.ErrMismatch):
			err = fmt.Errorf("ratelimit: %w (ratelimit: Options.SubjectKey, or ratelimit/awsenv); "+
				"until then its admin API's resets, refunds and limits would act on other buckets than this Limiter charges", err)
			l.keyErr.Store(&err)
			if !refused {
				l.dec.Logger.ErrorContext(ctx, "subject hash key refused: every request is refused until it is fixed", slog.Any("error", err))
			}
		default:
			l.dec.Logger.WarnContext(ctx, "subject hash key not checked: Redis did not answer; checked again at a later request", slog.Any("error", err))
		}
	}
	if p := l.keyErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Close writes the metrics aggregated since the last EMF line and closes
// the clients New built. Give it to lambda.WithEnableSIGTERM so the last
// metrics are written when Lambda shuts the environment down. The Limiter
// must not be used after.
func (l *Limiter) Close() {
	l.dec.Metrics.Flush()
	l.close()
}

// RESTHandler is a REST API REQUEST authorizer handler, as lambda.Start
// takes it.
type RESTHandler func(context.Context, events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error)

// HTTPHandler is an HTTP API (payload format 2.0) authorizer handler with
// simple responses (enableSimpleResponses).
type HTTPHandler func(context.Context, events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error)

// HTTPIAMHandler is an HTTP API (payload format 2.0) authorizer handler
// with IAM policy responses.
type HTTPIAMHandler func(context.Context, events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerIAMPolicyResponse, error)

// WrapREST returns h with Sluice's limits after it. For each event:
//
//   - h's error is returned unchanged; an answer whose policy does not
//     allow the event's methodArn is the error "Unauthorized" (API Gateway
//     answers 401: a client must never read an authorization failure as
//     the 429 of a rate limit, with its Retry-After); nothing reaches
//     Redis.
//   - Otherwise the subject is h's principalId, or its context value under
//     Options.ContextKey (a string, number or boolean; white space
//     trimmed). A missing or empty one, one longer than MaxSubjectLen
//     bytes or not valid UTF-8, is the error "Unauthorized" (API Gateway
//     answers 401).
//   - Within the limit, the answer is an Allow of the methodArn with h's
//     principalId and usage plan key, and Sluice's context values (limit,
//     remaining, reset, retryAfter, rateLimitPolicy, rateLimit, rule,
//     failOpen; docs/authorizer.md) merged into h's context. Over it, the
//     same with a Deny of the methodArn: the gateway's ACCESS_DENIED
//     response, which AddGatewayResponses maps to 429 with Retry-After and
//     the RateLimit fields.
//
// A Limiter whose subject hash key turned out to differ from the one
// recorded for the buckets (New could not reach Redis to check) answers
// every event h allows with that error (API Gateway answers 500) instead
// of charging buckets the admin API cannot see.
//
// In the merged context Sluice's keys win: h's values under those keys
// are dropped (no handler can change what a 429 says); every other key of
// h's reaches the backend unchanged, but for a value API Gateway refuses in
// a context (an object, an array, nil), which is dropped. h's principalId
// (the subject's hash when it has none) and usage plan key are kept. The authorizer's result cache must be off (TTL 0), as for
// Sluice's own authorizer: a cached Allow spends no tokens.
func (l *Limiter) WrapREST(h RESTHandler) RESTHandler {
	return wrap(l, h, l.chain.ChainREST)
}

// WrapHTTP returns h with Sluice's limits after it, as WrapREST does, for
// an HTTP API with simple responses: h's error passes through, and
// isAuthorized false is "Unauthorized" (401); over the limit the answer is isAuthorized false with
// Sluice's context, which an HTTP API always answers with 403 (its
// responses cannot be customised to 429). A simple response has no
// principalId: Options.ContextKey must name the subject, or every request
// h allows is "Unauthorized".
func (l *Limiter) WrapHTTP(h HTTPHandler) HTTPHandler {
	return wrap(l, h, l.chain.ChainHTTP)
}

// WrapHTTPIAM returns h with Sluice's limits after it, as WrapREST does,
// for an HTTP API with IAM policy responses: the policy is evaluated for
// the event's routeArn, and over the limit replaced by a Deny of it (403).
func (l *Limiter) WrapHTTPIAM(h HTTPIAMHandler) HTTPIAMHandler {
	return wrap(l, h, l.chain.ChainHTTPIAM)
}

// wrap returns h followed by chain (an apigw.Handler Chain method):
// h's error passes through unchanged, else chain answers behind h's answer.
// A subject hash key found to differ from the recorded one (checkKey)
// fails every request h allowed with that error: API Gateway answers 500.
func wrap[E, R any](l *Limiter, h func(context.Context, E) (R, error), chain func(context.Context, E, R) (R, error)) func(context.Context, E) (R, error) {
	return func(ctx context.Context, ev E) (R, error) {
		up, err := h(ctx, ev)
		if err != nil {
			return up, err
		}
		if err := l.checkKey(ctx); err != nil {
			var zero R
			return zero, err
		}
		return chain(ctx, ev, up)
	}
}

// ErrUnauthorized is the error a wrapped handler returns when the caller
// its handler allowed names no usable subject (see WrapREST). Its message,
// "Unauthorized", makes API Gateway answer 401; a team's handler may return
// it too.
var ErrUnauthorized = apigw.ErrUnauthorized

// CheckKey checks the Limiter's subject hash key against the one recorded
// for the buckets, as New does and every request does again (at most once
// a second while refused, every 10 s while accepted), and returns the
// refusal found, if any. For ratelimit/awsenv, which builds a Limiter
// another way.
func (l *Limiter) CheckKey(ctx context.Context) error { return l.checkKey(ctx) }

// FromEnv builds a Limiter from the environment variables of Options'
// fields (REDIS_URL, SUBJECT_HMAC_KEY, SUBJECT_SOURCES, DIMENSIONS,
// DEFAULT_LIMIT, RATELIMIT_HEADERS, REDIS_PREFIX, REDIS_TIMEOUT,
// REDIS_POOL_SIZE, LEASE_MAX, JWT_ISSUER, JWT_AUDIENCE, JWT_JWKS_URL), as
// New does. SUBJECT_SOURCES=principal or context:<key> names whom the
// authorizer wrappers limit (Options.ContextKey); any other list is the
// middleware's Sources. The variables that need the AWS SDK or a database
// (REDIS_AUTH_SECRET_ARN, SUBJECT_HMAC_KEY_SECRET_ARN, DB_SECRET_ARN,
// REDIS_MODE) are refused with a pointer to ratelimit/awsenv, which reads
// them; DATABASE_URL is not read (the rules come from the Redis snapshot).
func FromEnv(ctx context.Context) (*Limiter, error) {
	var errs []error
	for _, k := range []string{"REDIS_AUTH_SECRET_ARN", "SUBJECT_HMAC_KEY_SECRET_ARN", "DB_SECRET_ARN", "REDIS_MODE"} {
		if os.Getenv(k) != "" {
			errs = append(errs, fmt.Errorf("%s: read by package ratelimit/awsenv (awsenv.FromEnv), which links the AWS SDK; ratelimit.FromEnv does not", k))
		}
	}
	o := Options{
		RedisURL: os.Getenv("REDIS_URL"), SubjectKey: os.Getenv("SUBJECT_HMAC_KEY"), Dimensions: os.Getenv("DIMENSIONS"),
		DefaultLimit: os.Getenv("DEFAULT_LIMIT"), Headers: os.Getenv("RATELIMIT_HEADERS"), Prefix: os.Getenv("REDIS_PREFIX"),
		JWTIssuer: os.Getenv("JWT_ISSUER"), JWTAudience: os.Getenv("JWT_AUDIENCE"), JWTJWKSURL: os.Getenv("JWT_JWKS_URL"),
	}
	src := strings.TrimSpace(os.Getenv("SUBJECT_SOURCES"))
	switch key, ok, err := identity.ParseUpstreamSubject(src); {
	case err != nil:
		errs = append(errs, fmt.Errorf("SUBJECT_SOURCES: %w", err))
	case ok:
		o.ContextKey = key
	default:
		o.Sources = src
	}
	// Unset, each stays 0: New's default, which depends on Lambda.
	var err error
	if v := os.Getenv(envvar.RedisTimeout.Name); v != "" {
		o.Timeout, err = envvar.RedisTimeout.Parse(v)
		errs = append(errs, err)
	}
	for _, iv := range []struct {
		v   envvar.Int
		dst *int
	}{{envvar.RedisPoolSize, &o.PoolSize}, {envvar.LeaseMax, &o.LeaseMax}} {
		if v := os.Getenv(iv.v.Name); v != "" {
			*iv.dst, err = iv.v.Parse(v)
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	return New(ctx, o)
}
