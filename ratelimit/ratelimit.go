// Package ratelimit adds Sluice's rate limits to an API Gateway Lambda
// authorizer written in Go, in process: the team's own handler
// authenticates the caller first, then Sluice charges the caller it named
// (its principalId, or a value of its context) against the rules, with the
// same rules, Redis buckets, context values and 429 gateway responses as
// Sluice's own authorizer Lambda. No second Lambda, no extra invoke.
//
//	rl, err := ratelimit.FromEnv(ctx) // REDIS_URL, DATABASE_URL, SUBJECT_HMAC_KEY_SECRET_ARN, … as the Sluice authorizer reads them
//	if err != nil { … }
//	lambda.Start(rl.WrapREST(myAuthorizer))
//
// The Limiter must hash subjects with the deployment's subject hash key
// (Options.SubjectKeySecretARN, SUBJECT_HMAC_KEY_SECRET_ARN): a subject's
// buckets are named by that hash, and the admin API's reset, usage refund
// and limits view act on the buckets of its own key. The first process to
// name buckets under a key prefix records its key's id in Redis, next to
// the rules snapshot; a Limiter whose key differs refuses to start (New and
// FromEnv return the error), and the admin API refuses to act on buckets
// (409) when the key recorded is not its own. Neither side charges or
// resets a bucket the other cannot see.
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
//	rl, err := ratelimit.FromEnv(ctx) // SUBJECT_SOURCES=header:x-api-key, …
//	if err != nil { … }
//	http.ListenAndServe(":8080", rl.Handler(mux, ratelimit.HandlerOptions{API: "orders"}))
//
// # Stability
//
// Until Sluice's v1, this package follows the module's v0 versions, with
// this promise: the names exported here (Options and its fields, New,
// FromEnv, Limiter and its methods, the handler types, HandlerOptions,
// Observer, Decision, Health, the Outcome and ProblemTypeBase constants,
// ErrUnauthorized, MaxSubjectLen) keep their meaning and signatures across minor versions;
// new Options fields and methods may be added. Its behaviour follows the
// Sluice authorizer's: the environment variables, the rules, the Redis key
// layout, the context keys (docs/authorizer.md) and MaxSubjectLen's value
// may change before v1, and each change is in the release notes. Nothing
// under internal/ is part of the promise.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/authorizer/apigw"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
)

// MaxSubjectLen is the longest subject, in bytes, that a Limiter charges:
// the bound of Sluice's authorizer. A longer principalId or context value
// is refused with "Unauthorized", never charged.
const MaxSubjectLen = identity.MaxSubjectLen

// Options configure a Limiter. Each field maps to the environment
// variable of Sluice's authorizer Lambda it names, and is checked the same
// way (docs/authorizer.md); the zero value of a field is that variable
// unset.
type Options struct {
	// RedisURL is REDIS_URL: the Redis holding the buckets and the rules
	// snapshot, redis://host:port or rediss:// for TLS. Required unless
	// Redis is set.
	RedisURL string
	// Redis, when set, is the client used instead of one built from
	// RedisURL; Close leaves it open.
	Redis redis.UniversalClient
	// DatabaseURL is DATABASE_URL: the PostgreSQL rules database Sluice's
	// admin API writes to. Required: the rules are read from the Redis
	// snapshot the admin API publishes, and from here when it is missing.
	DatabaseURL string
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
	// buckets of its key): set this or SubjectKeySecretARN, not both.
	// Neither is an unkeyed hash, which a keyed deployment's record
	// refuses (see the package documentation). Keep it out of logs.
	SubjectKey string
	// SubjectKeySecretARN is SUBJECT_HMAC_KEY_SECRET_ARN: the ARN of the
	// Secrets Manager secret holding the subject hash key, the one the
	// deployment's functions are given (the stack's "Sluice subject hash
	// key" secret). The Lambda's role must be allowed to read it.
	SubjectKeySecretARN string
	// Timeout is REDIS_TIMEOUT: the budget of one Redis call, after which
	// each rule's failure mode decides (open: allow; closed: deny). 0 is
	// 25ms; at most 10s.
	Timeout time.Duration
	// Out receives the JSON log lines and the CloudWatch EMF metric lines
	// (decisions, fail-opens). nil is os.Stdout, a Lambda's log stream.
	Out io.Writer

	// Sources is SUBJECT_SOURCES of the requests the Limiter answers
	// itself: the net/http middleware (Handler) and the Lambda integration
	// wrappers (LimitHTTPAPI, LimitProxy, LimitALB). A comma list of
	// header:<name>, query:<name>, apikey, ip and jwt:<claim>, the first
	// with a value naming the caller (docs/authorizer.md). "" is
	// header:x-api-key. The authorizer wrappers (WrapREST, …) read
	// ContextKey instead.
	Sources string
	// LeaseMax is LEASE_MAX: the most requests one token lease of a
	// subject this process sees often admits without a Redis call
	// (docs/authorizer.md, token leases). 0 is 64; 1 turns leases off, so
	// every decision is one Redis call.
	LeaseMax int
	// JWTIssuer, JWTAudience (a comma list) and JWTJWKSURL are JWT_ISSUER,
	// JWT_AUDIENCE and JWT_JWKS_URL: how a jwt:<claim> source verifies
	// the bearer token. The issuer and audience are required by one.
	JWTIssuer, JWTAudience, JWTJWKSURL string
}

// Limiter limits the callers an authorizer handler lets through. It is
// safe for concurrent use; build one at init and reuse it across
// invocations.
type Limiter struct {
	app *app.App
	// chain decides behind the authorizer wrappers' handlers; guard
	// decides the requests of the middleware and integration wrappers, by
	// sources.
	chain   *apigw.Authorizer
	guard   *apigw.Guard
	sources []identity.Source
	// headers are the canonical names of the request headers the sources
	// and dimensions read (Authorization with a jwt: source): the only
	// ones a net/http request's single-value map is given.
	headers []string
	// keyOK is set once the subject hash key was found to be the one
	// recorded for the buckets (or was recorded as it); keyErr holds the
	// mismatch once found, and every later call is refused with it.
	keyOK  atomic.Bool
	keyErr atomic.Pointer[error]
	// keyNext is when, in Unix nanoseconds, the key may be checked again
	// after a check Redis did not answer.
	keyNext atomic.Int64
}

// New builds a Limiter from o: it dials Redis, loads the rules (from the
// Redis snapshot, else the database) and checks its subject hash key
// against the one recorded for the buckets before returning, within about
// 4 seconds at most (1 s for Redis, 3 s for the rules, then REDIS_TIMEOUT
// for the key).
// A Redis or database that cannot be reached is not an error: it is
// logged, the rules' failure modes and the default limit apply, and both
// are retried (the key is checked at later requests, at most once a
// second, until Redis answers). New returns an error for settings it
// cannot use, naming each, and for a subject hash key other than the one
// recorded for the buckets.
func New(ctx context.Context, o Options) (*Limiter, error) {
	env := map[string]string{
		"REDIS_URL":         o.RedisURL,
		"DATABASE_URL":      o.DatabaseURL,
		"DEFAULT_LIMIT":     o.DefaultLimit,
		"RATELIMIT_HEADERS": o.Headers,
		"REDIS_PREFIX":      o.Prefix,

		"SUBJECT_HMAC_KEY":            o.SubjectKey,
		"SUBJECT_HMAC_KEY_SECRET_ARN": o.SubjectKeySecretARN,

		"SUBJECT_SOURCES": o.Sources,
		"JWT_ISSUER":      o.JWTIssuer,
		"JWT_AUDIENCE":    o.JWTAudience,
		"JWT_JWKS_URL":    o.JWTJWKSURL,
	}
	var kerr error
	if o.ContextKey != "" && !identity.ValidKey(o.ContextKey) {
		kerr = fmt.Errorf("ContextKey %q: want 1 to 128 printable ASCII characters, no space, comma or semicolon", o.ContextKey)
	}
	if src, err := identity.ParseSources(o.Sources); err == nil && (identity.HasKind(src, identity.SourcePrincipal) || identity.HasKind(src, identity.SourceContext)) {
		//lint:ignore ST1005 it names the field, as the caller spells it
		kerr = errors.Join(kerr, fmt.Errorf("Sources %q: principal and context:<key> read an authorizer's answer: set ContextKey for the authorizer wrappers, and header, query, apikey, ip or jwt sources here", o.Sources))
		env["SUBJECT_SOURCES"] = "" // said here; config would ask for an UPSTREAM_AUTHORIZER
	}
	if o.Timeout != 0 {
		env["REDIS_TIMEOUT"] = o.Timeout.String()
	}
	if o.LeaseMax != 0 {
		env["LEASE_MAX"] = strconv.Itoa(o.LeaseMax)
	}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err := errors.Join(kerr, err); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	return build(ctx, cfg, o.ContextKey, o)
}

// FromEnv builds a Limiter from the environment variables Sluice's
// authorizer Lambda reads (REDIS_URL, REDIS_MODE, REDIS_AUTH_SECRET_ARN,
// DATABASE_URL or DB_SECRET_ARN, SUBJECT_HMAC_KEY or
// SUBJECT_HMAC_KEY_SECRET_ARN, DEFAULT_LIMIT, RATELIMIT_HEADERS,
// REDIS_PREFIX, REDIS_TIMEOUT, LOG_LEVEL, …), as New does from Options.
// SUBJECT_SOURCES is either whom the authorizer wrappers limit, "principal"
// (the default: the handler's principalId) or "context:<key>"
// (Options.ContextKey), or the sources of the middleware and integration
// wrappers (Options.Sources: header:<name>, query:<name>, apikey, ip,
// jwt:<claim>, with JWT_ISSUER, JWT_AUDIENCE, JWT_JWKS_URL). Every problem
// is reported at once.
func FromEnv(ctx context.Context) (*Limiter, error) {
	sources := os.Getenv("SUBJECT_SOURCES")
	key, kerr := parseSubject(sources)
	if kerr == nil {
		sources = "" // the authorizer wrappers' subject; the middleware's default
	} else if src, err := identity.ParseSources(sources); err == nil && !identity.HasKind(src, identity.SourcePrincipal) && !identity.HasKind(src, identity.SourceContext) {
		kerr = nil // the middleware's sources
	}
	cfg, err := config.FromEnv(func(k string) string {
		if k == "SUBJECT_SOURCES" {
			return sources
		}
		return os.Getenv(k)
	})
	if err := errors.Join(kerr, err); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	return build(ctx, cfg, key, Options{})
}

// parseSubject reads SUBJECT_SOURCES for an embedded Limiter: principal, or
// context:<key>.
func parseSubject(s string) (string, error) {
	s = strings.TrimSpace(s)
	kind, key, _ := strings.Cut(s, ":")
	switch kind = strings.ToLower(strings.TrimSpace(kind)); {
	case s == "" || kind == "principal" && key == "":
		return "", nil
	case kind == "context" && identity.ValidKey(strings.TrimSpace(key)):
		return strings.TrimSpace(key), nil
	}
	return "", fmt.Errorf("SUBJECT_SOURCES: %q: want principal or context:<key> (whom a wrapped authorizer names; a key of 1 to 128 printable ASCII characters, no space, comma or semicolon), "+
		"or header:<name>, query:<name>, apikey, ip and jwt:<claim> sources (the middleware's), not both", s)
}

func build(ctx context.Context, cfg config.Config, key string, o Options) (*Limiter, error) {
	// The app's decision reads cfg.SubjectSources: the requests the
	// middleware and the integration wrappers answer.
	fn := os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	if fn == "" {
		fn = "ratelimit"
	}
	a, err := app.New(ctx, cfg, app.Options{Parts: app.Decide, Out: o.Out, Function: fn, Redis: o.Redis})
	if err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	l := fromApp(a, cfg, key, apigw.Options{Logger: a.Log, Metrics: a.Metrics, Headers: cfg.RateLimitHeaders})
	if err := l.checkKey(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return l, nil
}

func init() {
	// sluice local's Limiter, over the App it built (see app.RateLimit).
	app.RateLimit = func(a *app.App, cfg config.Config, o apigw.Options) any { return fromApp(a, cfg, "", o) }
	// Its REST gateway's decisions, told to an Observer as ours are.
	app.Observing = func(obs any) apigw.Observe {
		o := obs.(Observer)
		return func(req *authorizer.Request, res *authorizer.Result, err error, took time.Duration) {
			o.ObserveDecision(decision(req, res, err, took))
		}
	}
}

// fromApp is the Limiter over a, an App built with the Decide part from
// cfg; key is the authorizer wrappers' context key ("": the principalId)
// and ho the options of their handler and of the guard.
func fromApp(a *app.App, cfg config.Config, key string, ho apigw.Options) *Limiter {
	// The authorizer wrappers' handler is the upstream authorizer, run in
	// process: the subject is read of its answer by the sources the
	// Lambda's UPSTREAM_AUTHORIZER chaining reads it with (one path,
	// apigw's), over the same rules cache, limiter and metrics.
	up := []identity.Source{{Kind: identity.SourcePrincipal}}
	if key != "" {
		up = []identity.Source{{Kind: identity.SourceContext, Name: key}}
	}
	var jwt *identity.Verifier
	for _, d := range cfg.Dimensions {
		if identity.HasKind(d.Sources, identity.SourceJWT) {
			jwt = a.JWT // a dimension reads a verified claim
		}
	}
	return &Limiter{
		app:     a,
		chain:   apigw.NewAuthorizer(authorizer.New(a.Cache, a.Limiter, authorizer.Options{Sources: up, Dimensions: cfg.Dimensions, JWT: jwt}), ho),
		guard:   apigw.NewGuard(a.Decider, ho),
		sources: a.Decider.Sources(),
		headers: headerNames(cfg),
	}
}

// headerNames are the canonical names of the headers cfg's subject
// sources and dimensions read.
func headerNames(cfg config.Config) []string {
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
	add(cfg.SubjectSources)
	for _, d := range cfg.Dimensions {
		add(d.Sources)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// keyRetry is the least time between two checks of the subject hash key
// that Redis did not answer.
const keyRetry = time.Second

// checkKey checks the Limiter's subject hash key against the one recorded
// for the buckets (limiter.ClaimSubjectKey), once: it returns the mismatch,
// now and on every later call. A check Redis does not answer is logged and
// tried again at a later call, at most once a keyRetry; until then the
// Limiter decides as its rules' failure modes and Redis allow.
func (l *Limiter) checkKey(ctx context.Context) error {
	if l.keyOK.Load() {
		return nil
	}
	if p := l.keyErr.Load(); p != nil {
		return *p
	}
	now := time.Now().UnixNano()
	next := l.keyNext.Load()
	if now < next || !l.keyNext.CompareAndSwap(next, now+int64(keyRetry)) {
		return nil // checked lately, or being checked
	}
	err := l.app.Limiter.ClaimSubjectKey(ctx)
	switch {
	case err == nil:
		l.keyOK.Store(true)
		return nil
	case errors.Is(err, limiter.ErrSubjectKeyMismatch):
		err = fmt.Errorf("ratelimit: %w: its admin API's resets, refunds and limits would act on other buckets than this Limiter charges; "+
			"give it the deployment's key (Options.SubjectKeySecretARN or SubjectKey; SUBJECT_HMAC_KEY_SECRET_ARN or SUBJECT_HMAC_KEY)", err)
		l.keyErr.Store(&err)
		l.app.Log.ErrorContext(ctx, "subject hash key refused: every request is refused until it is fixed", slog.Any("error", err))
		return err
	}
	l.app.Log.WarnContext(ctx, "subject hash key not checked yet: Redis did not answer; checked again at a later request", slog.Any("error", err))
	return nil
}

// Close writes the metrics aggregated since the last EMF line and closes
// the clients New built. Give it to lambda.WithEnableSIGTERM so the last
// metrics are written when Lambda shuts the environment down. The Limiter
// must not be used after.
func (l *Limiter) Close() {
	l.app.Metrics.Flush()
	l.app.Close()
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

// wrap returns h followed by chain (an apigw.Authorizer Chain method):
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
