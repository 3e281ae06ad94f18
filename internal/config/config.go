// Package config reads Sluice's settings from the environment and builds the
// clients every Lambda shares: Redis (go-redis) and PostgreSQL (pgxpool),
// with credentials from AWS Secrets Manager when an ARN is given.
//
// Only mains (functions/*, cmd/*) call it, once at init: FromEnv reports
// every problem at once and never exits; the constructors make clients sized
// for Lambda, where one instance serves one request at a time.
package config

import (
	"cmp"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/envvar"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/rules"
)

// RedisMode says how to reach Redis.
type RedisMode string

// Redis modes.
const (
	// RedisSingle is one endpoint: a standalone Redis or an ElastiCache
	// primary endpoint.
	RedisSingle RedisMode = "single"
	// RedisCluster is a Redis Cluster / ElastiCache cluster-mode
	// configuration endpoint, or ElastiCache Serverless (which the
	// reference stack reaches in cluster mode).
	RedisCluster RedisMode = "cluster"
	// RedisSentinel is a primary and its replicas watched by Redis
	// Sentinel: the client asks the sentinels for the primary and follows
	// their failovers.
	RedisSentinel RedisMode = "sentinel"
)

// Defaults of the settings that have one.
const (
	DefaultRedisTimeout  = 25 * time.Millisecond
	DefaultRedisPoolSize = 4
	// DefaultDBSSLMode verifies the server's certificate and host name
	// against the system roots and the RDS CA bundle (RDSCABundle).
	DefaultDBSSLMode = "verify-full"
	// MinRulesSigningKey is the shortest RULES_SIGNING_KEY accepted, in
	// bytes: the Ed25519 seed is its SHA-256, so 32 random bytes are a
	// full-strength key.
	MinRulesSigningKey = 32
	// MinSubjectHMACKey is the shortest SUBJECT_HMAC_KEY accepted, in
	// bytes.
	MinSubjectHMACKey = 16
	// MinOriginVerify and MaxOriginVerify bound ORIGIN_VERIFY's length,
	// in bytes.
	MinOriginVerify, MaxOriginVerify = 16, 128
)

// Config is every setting Sluice reads from the environment. The zero value
// of a field means "not set" unless its comment gives a default.
type Config struct {
	// LogLevel is LOG_LEVEL: debug, info, warn or error (slog syntax, so
	// "info+2" works too). Default info.
	LogLevel slog.Level

	// RedisURL is REDIS_URL: redis://[user:password@]host:port[/db] or
	// rediss:// for TLS (ElastiCache in-transit encryption). In cluster
	// mode ?addr=host:port adds seed nodes. In sentinel mode host:port is a
	// sentinel, ?addr=host:port adds more, ?master_name= (required) names
	// the monitored primary, and user:password authenticates to the
	// sentinels and the data nodes alike (?password= to the data nodes
	// only). Empty: Redis is not configured, and Redis returns an error.
	RedisURL Secret
	// RedisMode is REDIS_MODE: single (default), cluster or sentinel.
	RedisMode RedisMode
	// RedisAuthSecretARN is REDIS_AUTH_SECRET_ARN: a Secrets Manager secret
	// holding the Redis AUTH token, either the bare token or JSON with
	// "password" (or "authToken") and optionally "username". It overrides
	// any password in RedisURL.
	RedisAuthSecretARN string
	// RedisTimeout is REDIS_TIMEOUT: the limiter's budget for one Redis
	// call. Default 25ms; at most 10s.
	RedisTimeout time.Duration
	// RedisPoolSize is REDIS_POOL_SIZE: the most connections the client
	// keeps per Redis node. Default 4, for a Lambda that serves one
	// request at a time; 1 to 1024. `sluice local`, which serves many at
	// once, defaults to 64.
	RedisPoolSize int
	// RedisPrefix is REDIS_PREFIX: what every Redis key starts with (the
	// buckets, and the rules snapshot and version the admin path
	// publishes). Empty means "sl:". Deployments sharing one Redis must
	// each have their own, or their authorizers load each other's rules.
	// At most 64 printable ASCII characters, no space, '{' or '}' (the
	// keys' hash tags follow it).
	RedisPrefix string

	// DatabaseURL is DATABASE_URL: a PostgreSQL URL or keyword/value
	// connection string, used as given. Set it or DBSecretARN, not both.
	DatabaseURL Secret
	// DBSecretARN is DB_SECRET_ARN: a Secrets Manager secret in the RDS
	// format, JSON {"username","password","host","port","dbname"}.
	DBSecretARN string
	// DBHost is DB_HOST: replaces the secret's host, typically with an RDS
	// Proxy endpoint. Only with DBSecretARN.
	DBHost string
	// DBReaderSecretARN is DB_READER_SECRET_ARN, read by the migrate
	// function alone: a Secrets Manager secret with the "username" and
	// "password" of the read-only role (migration 00007, sluice_reader),
	// which migrate gives LOGIN and that password after migrating. The
	// read-only admin functions connect with it as their DB_SECRET_ARN.
	DBReaderSecretARN string
	// DBSSLMode is DB_SSLMODE: the sslmode used with DBSecretARN. Default
	// verify-full: the server's certificate must chain to the system roots
	// (RDS Proxy's, from Amazon Trust Services) or to the RDS CA bundle
	// built in (RDSCABundle), or to DBSSLRootCert when set, and name the
	// host. "require" encrypts without verifying anything: an explicit
	// opt-out.
	DBSSLMode string
	// DBSSLRootCert is DB_SSLROOTCERT: a PEM file of the CA certificates
	// to trust instead (libpq's sslrootcert), such as a newer RDS bundle
	// for a region opened after this build. Only with DBSecretARN.
	DBSSLRootCert string
	// MaxRules is MAX_RULES: the most rules the store holds; a create
	// beyond it is refused (409). 0, when unset, means the store's default
	// (store.DefaultMaxRules, 10,000); at most 1,000,000.
	MaxRules int

	// SubjectSources is SUBJECT_SOURCES parsed (identity.ParseSources), such
	// as "header:x-api-key,query:api_key,apikey,ip": where the authorizer
	// reads the subject, in order. Never empty: unset means
	// identity.DefaultSources (the x-api-key header).
	SubjectSources []identity.Source
	// Dimensions is DIMENSIONS parsed (identity.ParseDimensions), such as
	// "ip=ip;tenant=jwt:custom:tenant": subjects limited beside the
	// default one, each by the rules of its name (a rule's "dimension").
	// Empty: none.
	Dimensions []identity.Dimension
	// SubjectShow is SUBJECT_SHOW parsed (parseSubjectShow): the kinds of
	// source whose subjects the decision log and the stats show as sent.
	// Identities only (jwt, context, principal, ip); empty: none.
	SubjectShow []identity.SourceKind
	// UpstreamAuthorizer is UPSTREAM_AUTHORIZER: a Lambda function name or
	// ARN of an existing authorizer invoked first with the same event
	// (required by the principal and context:<key> sources).
	UpstreamAuthorizer string
	// UpstreamCacheTTL is UPSTREAM_CACHE_TTL: how long an upstream answer
	// is reused; 0s to 1h, 0 disables. Default 300s when
	// UpstreamIdentitySources is set, else 0: the cache is off until the
	// operator names what the upstream reads, and a TTL above 0 without
	// them is an error.
	UpstreamCacheTTL time.Duration
	// UpstreamIdentitySources is UPSTREAM_IDENTITY_SOURCES parsed
	// (identity.ParseUpstreamSources): every header, query value, route or
	// stage variable the upstream authorizer reads, whose values key its
	// cached answers. Empty: none named, no cache.
	UpstreamIdentitySources []identity.UpstreamSource
	// JWTIssuer is JWT_ISSUER: the "iss" of the bearer tokens the
	// jwt:<claim> subject sources read (required by them), such as
	// https://cognito-idp.<region>.amazonaws.com/<user pool id>.
	JWTIssuer string
	// JWTAudience is JWT_AUDIENCE, a comma list: a token's "aud" (or a
	// Cognito access token's "client_id") must be one of them. Required
	// with JWTIssuer.
	JWTAudience []string
	// JWTTokenUse is JWT_TOKEN_USE: when set, the "token_use" a token must
	// carry (Cognito: id or access).
	JWTTokenUse string
	// JWTJWKSURL is JWT_JWKS_URL: where the signing keys are; default
	// <JWT_ISSUER>/.well-known/jwks.json.
	JWTJWKSURL string
	// SubjectHMACKey is SUBJECT_HMAC_KEY: the per-deployment key of the
	// subject hash (limiter.Options.SubjectKey), at least 16 bytes. Set it
	// or SubjectHMACKeySecretARN (production), not both. Neither: the
	// unkeyed hash, which anyone can recompute from a guessed subject
	// (sluice local generates and keeps one instead).
	SubjectHMACKey Secret
	// SubjectHMACKeySecretARN is SUBJECT_HMAC_KEY_SECRET_ARN: a Secrets
	// Manager secret whose SecretString is the key (the stack creates
	// one).
	SubjectHMACKeySecretARN string
	// EdgeKey is EDGE_KEY: the key the CDN edge hashes subjects with
	// (internal/cdn), at least MinSubjectHMACKey bytes. Set it or
	// EdgeKeySecretARN, not both. Neither: no edge tier.
	EdgeKey Secret
	// EdgeKeySecretARN is EDGE_KEY_SECRET_ARN: a Secrets Manager secret
	// whose SecretString is the edge key.
	EdgeKeySecretARN string
	// EdgeStoreARN is EDGE_STORE_ARN: the CloudFront KeyValueStore the
	// edge publisher writes.
	EdgeStoreARN string
	// OriginVerify is ORIGIN_VERIFY: the value the edge's distribution
	// sends in X-Origin-Verify, which the authorizer then requires
	// (MinOriginVerify to MaxOriginVerify visible ASCII bytes, no comma).
	// Set it or OriginVerifySecretARN, not both. Neither: no check.
	OriginVerify Secret
	// OriginVerifySecretARN is ORIGIN_VERIFY_SECRET_ARN: a Secrets
	// Manager secret whose SecretString is that value.
	OriginVerifySecretARN string
	// RulesSigningKey is RULES_SIGNING_KEY: the secret the rule writers'
	// Ed25519 key is derived from (rulesync.NewSigningKey), at least
	// MinRulesSigningKey bytes. Set it or RulesSigningKeySecretARN
	// (production), not both. Neither: rules snapshots are published
	// unsigned, which deciders with a RulesPublicKey refuse.
	RulesSigningKey Secret
	// RulesSigningKeySecretARN is RULES_SIGNING_KEY_SECRET_ARN: a Secrets
	// Manager secret whose SecretString is that secret, for the rule
	// writers alone (admin-write, migrate).
	RulesSigningKeySecretARN string
	// RulesPublicKey is RULES_PUBLIC_KEY decoded (standard base64 of 32
	// bytes): the rule writers' public key. Deciders refuse the rules
	// snapshots it does not verify. Nil: snapshots are read unverified.
	RulesPublicKey ed25519.PublicKey
	// DefaultLimit is DEFAULT_LIMIT, the limit applied when no rule
	// matches: "100/1m" (100 per minute) or "100/1m,burst=200". Nil (the
	// variable unset or empty) allows such requests without limit. Only
	// Limit, Period and Burst are set; rules.NewSnapshot fills the rest.
	DefaultLimit *rules.Effective
	// RulesRefresh is RULES_REFRESH: the full reload period of the rules
	// snapshot, the backstop behind the version poll. Default 5m.
	RulesRefresh time.Duration
	// RulesVersionPoll is RULES_VERSION_POLL: the oldest the authorizer's
	// last rules version check may be when it decides; a request finding
	// it older waits for a new one. So a version read a poll, at most.
	// Default 1s.
	RulesVersionPoll time.Duration
	// RateLimitHeaders is RATELIMIT_HEADERS parsed (headers.Parse), such as
	// "draft11,legacy": the dialects of the rate-limit fields in the
	// authorizer context and the check API's response. Default
	// headers.Default (draft11).
	RateLimitHeaders headers.Dialects

	// LeaseMax is LEASE_MAX: the most requests one token lease admits
	// without a Redis call (limiter.Options.LeaseMax). Leases are automatic:
	// a subject an instance sees often, with tokens to spare, is served
	// from them, for every rule but shadow ones. Default 64; 1 switches
	// leasing off; at most 10000. The zero value (a Config not read by
	// FromEnv) means off.
	LeaseMax int
	// LeaseTTL is LEASE_TTL: how long a lease that is not refilled admits
	// before its unused tokens go back to Redis; it also bounds how long
	// another instance's leases outlive an admin reset. Default 250ms;
	// 100ms to 1s.
	LeaseTTL time.Duration
	// DenyCacheMaxAge is DENY_CACHE_MAX_AGE: how long an authorizer
	// keeps a denial in its local deny cache at most, whatever its
	// retry-after (limiter.Options.DenyCacheMaxAge): an admin reset or a
	// usage refund lifts a long deny (an exhausted monthly quota) on every
	// warm instance within it. Default 1s; 100ms to 1m.
	DenyCacheMaxAge time.Duration

	// LedgerTable is LEDGER_TABLE: the DynamoDB table of global budgets;
	// empty decides global rules as regional ones.
	LedgerTable string
	// GlobalRegions is GLOBAL_REGIONS: the Regions sharing the ledger.
	GlobalRegions []string
	// Region is AWS_REGION: this process's Region, its name in the
	// ledger's record of what each Region holds.
	Region string
	// LedgerEndpoint is LEDGER_ENDPOINT: a DynamoDB endpoint URL (dynalite).
	LedgerEndpoint string
	// LedgerTimeout is LEDGER_TIMEOUT: the budget of one ledger call.
	LedgerTimeout time.Duration
	// GlobalOpenShare is GLOBAL_OPEN_SHARE: a cut-off Region's fail-open
	// allowance per window, as a share of the limit; 0 means 1/Regions.
	GlobalOpenShare float64

	// InsightsRulePrefix is INSIGHTS_RULE_PREFIX: the admin API's GET
	// /stats reads the CloudWatch Contributor Insights rules named
	// <prefix>-denied-subjects, -limiting-rules and -fail-open-rules (the
	// reference stack sets it on the admin-stats function). Empty: GET
	// /stats answers from in-process counters where there are some
	// (sluice local), else 503.
	InsightsRulePrefix string
}

// Secret is a setting that must not reach a log. Its String, GoString and
// LogValue methods print "[redacted]"; string(s) is the value.
type Secret string

const redacted = "[redacted]"

func (Secret) String() string { return redacted }

// GoString keeps %#v from printing the value.
func (Secret) GoString() string { return redacted }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// defaultMaxRules is store.DefaultMaxRules, what a MaxRules of 0 means,
// for the log line (config does not import the store).
const defaultMaxRules = 10_000

// LogValue implements slog.LogValuer: the settings with secrets redacted,
// for a start-up log line.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("logLevel", c.LogLevel.String()),
		slog.Bool("redisUrlSet", c.RedisURL != ""),
		slog.String("redisMode", string(c.RedisMode)),
		slog.String("redisAuthSecretArn", c.RedisAuthSecretARN),
		slog.Duration("redisTimeout", c.RedisTimeout),
		slog.Int("redisPoolSize", c.RedisPoolSize),
		slog.String("redisPrefix", c.RedisPrefix),
		slog.Int("maxRules", cmp.Or(c.MaxRules, defaultMaxRules)), // the effective value, not 0
		slog.Bool("databaseUrlSet", c.DatabaseURL != ""),
		slog.String("dbSecretArn", c.DBSecretARN),
		slog.String("dbHost", c.DBHost),
		slog.String("dbReaderSecretArn", c.DBReaderSecretARN),
		slog.String("dbSslMode", c.DBSSLMode),
		slog.String("dbSslRootCert", c.DBSSLRootCert),
		slog.String("subjectSources", identity.FormatSources(c.SubjectSources)),
		slog.String("dimensions", identity.FormatDimensions(c.Dimensions)),
		slog.Bool("subjectHmacKeySet", c.SubjectHMACKey != ""),
		slog.String("upstreamAuthorizer", c.UpstreamAuthorizer),
		slog.Duration("upstreamCacheTtl", c.UpstreamCacheTTL),
		slog.String("upstreamIdentitySources", identity.FormatUpstreamSources(c.UpstreamIdentitySources)),
		slog.String("jwtIssuer", c.JWTIssuer),
		slog.Any("jwtAudience", c.JWTAudience),
		slog.String("jwtTokenUse", c.JWTTokenUse),
		slog.String("jwtJwksUrl", c.JWTJWKSURL),
		slog.String("subjectHmacKeySecretArn", c.SubjectHMACKeySecretARN),
		slog.Bool("edgeKeySet", c.EdgeKey != ""),
		slog.String("edgeKeySecretArn", c.EdgeKeySecretARN),
		slog.Bool("originVerifySet", c.OriginVerify != ""),
		slog.String("originVerifySecretArn", c.OriginVerifySecretARN),
		slog.String("edgeStoreArn", c.EdgeStoreARN),
		slog.Bool("rulesSigningKeySet", c.RulesSigningKey != ""),
		slog.String("rulesSigningKeySecretArn", c.RulesSigningKeySecretARN),
		slog.String("rulesPublicKey", base64.StdEncoding.EncodeToString(c.RulesPublicKey)),
		slog.Duration("rulesRefresh", c.RulesRefresh),
		slog.Duration("rulesVersionPoll", c.RulesVersionPoll),
		slog.String("rateLimitHeaders", c.RateLimitHeaders.String()),
		slog.Int("leaseMax", c.LeaseMax),
		slog.Duration("leaseTtl", c.LeaseTTL),
		slog.Duration("denyCacheMaxAge", c.DenyCacheMaxAge),
		slog.String("insightsRulePrefix", c.InsightsRulePrefix),
		slog.String("ledgerTable", c.LedgerTable),
		slog.String("globalRegions", strings.Join(c.GlobalRegions, ",")),
		slog.String("ledgerEndpoint", c.LedgerEndpoint),
		slog.Duration("ledgerTimeout", c.LedgerTimeout),
	}
	if c.DefaultLimit != nil {
		attrs = append(attrs, slog.String("defaultLimit", formatLimit(c.DefaultLimit)))
	}
	return slog.GroupValue(attrs...)
}

// FromEnv reads the configuration through getenv (os.Getenv in mains, a
// map in tests); an empty value counts as unset. It reads only the
// variables of Vars, with their defaults from there. It checks every
// variable and returns all the problems joined (errors.Join), each naming
// its variable, along with the settings that did parse.
func FromEnv(getenv func(string) string) (Config, error) {
	var c Config
	r := &envReader{getenv: getenv}
	c.LogLevel = slog.LevelInfo
	if v := r.value("LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			r.fail("LOG_LEVEL", "%q is not one of debug, info, warn, error", v)
		}
	}

	c.RedisMode = RedisSingle
	switch v := RedisMode(strings.ToLower(r.value("REDIS_MODE"))); v {
	case RedisSingle, RedisCluster, RedisSentinel:
		c.RedisMode = v
	default:
		r.fail("REDIS_MODE", "%q is not single, cluster or sentinel", string(v))
	}
	if v := r.get("REDIS_URL"); v != "" {
		c.RedisURL = Secret(v)
		var err error
		switch c.RedisMode {
		case RedisCluster:
			_, err = redis.ParseClusterURL(v)
		case RedisSentinel:
			var o *redis.FailoverOptions
			if o, err = redis.ParseFailoverURL(v); err == nil && o.MasterName == "" {
				r.fail("REDIS_URL", "sentinel mode needs the primary's name: add ?master_name=<name>")
			}
		default:
			_, err = redis.ParseURL(v)
		}
		if err != nil {
			// The parser's message may quote the URL, password included.
			r.fail("REDIS_URL", "not a redis:// or rediss:// URL (%s)", redactIn(err.Error(), v))
		}
	}
	c.RedisAuthSecretARN = r.arn("REDIS_AUTH_SECRET_ARN")
	c.RedisTimeout = r.duration(envvar.RedisTimeout.Name, envvar.RedisTimeout.Min, envvar.RedisTimeout.Max)
	c.RedisPoolSize = r.whole(envvar.RedisPoolSize)

	if v := r.get("REDIS_PREFIX"); v != "" {
		if len(v) > 64 || strings.ContainsFunc(v, func(c rune) bool { return c <= ' ' || c > '~' || c == '{' || c == '}' }) {
			r.fail("REDIS_PREFIX", "%q must be 1 to 64 printable ASCII characters without space, '{' or '}'", v)
		} else {
			c.RedisPrefix = v
		}
	}
	c.MaxRules = r.whole(envvar.Int{Name: "MAX_RULES", Min: 1, Max: 1_000_000})

	if v := r.get("DATABASE_URL"); v != "" {
		c.DatabaseURL = Secret(v)
		if _, err := pgxpool.ParseConfig(v); err != nil {
			r.fail("DATABASE_URL", "not a PostgreSQL connection string (%s)", parseError(err, v))
		}
	}
	c.DBSecretARN = r.arn("DB_SECRET_ARN")
	if c.DatabaseURL != "" && c.DBSecretARN != "" {
		r.fail("DB_SECRET_ARN", "set DATABASE_URL or DB_SECRET_ARN, not both")
	}
	c.DBHost = r.get("DB_HOST")
	c.DBReaderSecretARN = r.arn("DB_READER_SECRET_ARN")
	if c.DBHost != "" && c.DBSecretARN == "" {
		r.fail("DB_HOST", "only applies with DB_SECRET_ARN")
	}
	c.DBSSLRootCert = r.get("DB_SSLROOTCERT")
	if c.DBSSLRootCert != "" && c.DBSecretARN == "" {
		r.fail("DB_SSLROOTCERT", "only applies with DB_SECRET_ARN (with DATABASE_URL, put sslrootcert in the URL)")
	}
	if v := r.value("DB_SSLMODE"); v != "" {
		switch v {
		case "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
			c.DBSSLMode = v
		default:
			r.fail("DB_SSLMODE", "%q is not a libpq sslmode", v)
		}
	}

	c.SubjectSources = parsed(r, "SUBJECT_SOURCES", identity.ParseSources)
	c.Dimensions = parsed(r, "DIMENSIONS", identity.ParseDimensions)
	c.SubjectShow = parsed(r, "SUBJECT_SHOW", parseSubjectShow)
	c.UpstreamAuthorizer = r.get("UPSTREAM_AUTHORIZER")
	if v := c.UpstreamAuthorizer; v != "" && (len(v) > 170 || strings.ContainsAny(v, " \t/")) {
		r.fail("UPSTREAM_AUTHORIZER", "%q is not a Lambda function name or ARN", v)
	}
	c.UpstreamIdentitySources = parsed(r, "UPSTREAM_IDENTITY_SOURCES", identity.ParseUpstreamSources)
	// No cache until the sources are named (the row has no default).
	upSources := r.get("UPSTREAM_IDENTITY_SOURCES") != ""
	c.UpstreamCacheTTL = r.duration("UPSTREAM_CACHE_TTL", 0, identity.MaxUpstreamTTL)
	if r.get("UPSTREAM_CACHE_TTL") == "" && upSources {
		c.UpstreamCacheTTL = identity.DefaultUpstreamTTL
	}
	if c.UpstreamCacheTTL > 0 && !upSources {
		r.fail("UPSTREAM_CACHE_TTL", "%s caches the upstream authorizer's answers, which needs UPSTREAM_IDENTITY_SOURCES: "+
			"an answer is reused for every request with the same values of the sources named there, so they must be every "+
			"header, query value, route or stage variable the upstream reads (such as header:authorization,route), "+
			"or one caller's answer reaches another; set them, or leave UPSTREAM_CACHE_TTL unset or 0", c.UpstreamCacheTTL)
	}
	if c.UpstreamAuthorizer == "" && (c.HasSource(identity.SourceContext) || c.HasSource(identity.SourcePrincipal)) {
		r.fail("UPSTREAM_AUTHORIZER", "required by the context:<key> and principal subject sources, which read the upstream authorizer's answer")
	}
	c.JWTIssuer = r.httpURL("JWT_ISSUER")
	c.JWTAudience = envvar.List(r.get("JWT_AUDIENCE"))
	c.JWTTokenUse = r.get("JWT_TOKEN_USE")
	c.JWTJWKSURL = r.httpURL("JWT_JWKS_URL")
	if c.HasSource(identity.SourceJWT) {
		if c.JWTIssuer == "" {
			r.fail("JWT_ISSUER", "required by the jwt: subject source in SUBJECT_SOURCES (%s)", identity.FormatSources(c.SubjectSources))
		}
		if len(c.JWTAudience) == 0 {
			r.fail("JWT_AUDIENCE", "required by the jwt: subject source in SUBJECT_SOURCES: the app client ids or audiences a token may be for")
		}
	}
	c.SubjectHMACKey, c.SubjectHMACKeySecretARN = r.secret(subjectKeySetting)
	c.EdgeKey, c.EdgeKeySecretARN = r.secret(edgeKeySetting)
	c.EdgeStoreARN = r.get("EDGE_STORE_ARN")
	if v := c.EdgeStoreARN; v != "" && !strings.HasPrefix(v, "arn:aws:cloudfront::") {
		r.fail("EDGE_STORE_ARN", "%q is not a KeyValueStore ARN (arn:aws:cloudfront::<account>:key-value-store/<id>)", v)
	}
	c.OriginVerify, c.OriginVerifySecretARN = r.secret(originVerifySetting)
	c.RulesSigningKey, c.RulesSigningKeySecretARN = r.secret(rulesSigningSetting)
	if v := r.get("RULES_PUBLIC_KEY"); v != "" {
		k, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(k) != ed25519.PublicKeySize {
			r.fail("RULES_PUBLIC_KEY", "%q is not an Ed25519 public key: want %d bytes in standard base64 (%d characters)", v, ed25519.PublicKeySize, base64.StdEncoding.EncodedLen(ed25519.PublicKeySize))
		} else {
			c.RulesPublicKey = k
		}
	}
	c.DefaultLimit = parsed(r, "DEFAULT_LIMIT", rules.ParseLimit)
	c.RateLimitHeaders = parsed(r, "RATELIMIT_HEADERS", headers.Parse)
	c.RulesRefresh = r.duration("RULES_REFRESH", time.Second, 24*time.Hour)
	c.RulesVersionPoll = r.duration("RULES_VERSION_POLL", 10*time.Millisecond, time.Hour)
	c.LeaseMax = r.whole(envvar.LeaseMax)
	c.LeaseTTL = r.duration("LEASE_TTL", 100*time.Millisecond, time.Second)
	c.DenyCacheMaxAge = r.duration("DENY_CACHE_MAX_AGE", 100*time.Millisecond, time.Minute)
	c.LedgerTable = r.get("LEDGER_TABLE")
	if v := c.LedgerTable; v != "" && (len(v) < 3 || len(v) > 255 || !isName(v)) {
		r.fail("LEDGER_TABLE", "%q is not a DynamoDB table name: 3 to 255 letters, digits, '_', '-' or '.'", v)
	}
	if v := r.get("GLOBAL_REGIONS"); v != "" {
		for _, region := range strings.Split(v, ",") {
			region = strings.TrimSpace(region)
			if !validRegion(region) {
				r.fail("GLOBAL_REGIONS", "%q is not a Region name such as us-east-1", region)
				continue
			}
			if slices.Contains(c.GlobalRegions, region) {
				r.fail("GLOBAL_REGIONS", "names %s twice", region)
				continue
			}
			c.GlobalRegions = append(c.GlobalRegions, region)
		}
	}
	c.Region = r.get("AWS_REGION")
	c.LedgerEndpoint = r.httpURL("LEDGER_ENDPOINT")
	c.LedgerTimeout = r.duration("LEDGER_TIMEOUT", 10*time.Millisecond, 5*time.Second)
	if v := r.get("GLOBAL_OPEN_SHARE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			r.fail("GLOBAL_OPEN_SHARE", "%q is not a share above 0 and at most 1, such as 0.5", v)
		} else {
			c.GlobalOpenShare = f
		}
	}
	c.InsightsRulePrefix = r.get("INSIGHTS_RULE_PREFIX")
	if v := c.InsightsRulePrefix; v != "" && (len(v) > 100 || !isName(v)) {
		r.fail("INSIGHTS_RULE_PREFIX", "%q must be at most 100 letters, digits, '-', '_' or '.'", v)
	}

	return c, errors.Join(r.errs...)
}

// envReader reads FromEnv's variables and keeps the problems it finds.
type envReader struct {
	getenv func(string) string
	errs   []error
}

// fail records a problem with the variable name.
func (r *envReader) fail(name, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: "+format, append([]any{name}, args...)...))
}

// get is the variable's value, "" when unset. A name without a row in
// Vars is a programming error every test of FromEnv reports, so the
// documented table cannot miss a variable the loader reads.
func (r *envReader) get(name string) string {
	if lookupVar(name) == nil {
		r.fail(name, "read by config.FromEnv but missing from config.Vars (a bug: add its row)")
	}
	return strings.TrimSpace(r.getenv(name))
}

// value is get, or the row's default when unset.
func (r *envReader) value(name string) string {
	if v := r.get(name); v != "" {
		return v
	}
	if row := lookupVar(name); row != nil {
		return row.Default
	}
	return ""
}

// duration reads a duration from lo to hi; unset, the row's default (0
// when it has none).
func (r *envReader) duration(name string, lo, hi time.Duration) time.Duration {
	var def time.Duration
	if row := lookupVar(name); row != nil && row.Default != "" {
		var err error
		if def, err = time.ParseDuration(row.Default); err != nil {
			r.fail(name, "config.Vars default %q is not a duration (a bug)", row.Default)
		}
	}
	v := r.get(name)
	if v == "" {
		return def
	}
	d, err := envvar.Duration{Name: name, Min: lo, Max: hi, Example: def.String()}.Parse(v)
	if err != nil {
		r.errs = append(r.errs, err)
		return def
	}
	return d
}

// whole reads a whole number with v's range; unset, the row's default.
func (r *envReader) whole(v envvar.Int) (n int) {
	if s := r.value(v.Name); s != "" {
		var err error
		if n, err = v.Parse(s); err != nil {
			r.errs = append(r.errs, err)
		}
	}
	return n
}

// arn reads the ARN of a Secrets Manager secret.
func (r *envReader) arn(name string) string {
	v := r.get(name)
	if v != "" && !strings.HasPrefix(v, "arn:") {
		r.fail(name, "%q is not an ARN", v)
	}
	return v
}

// httpURL reads an http(s) URL.
func (r *envReader) httpURL(name string) string {
	v := r.get(name)
	if u, err := url.Parse(v); v != "" && (err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http") {
		r.fail(name, "%q is not an http(s) URL", Redact(v))
	}
	return v
}

// secret reads a secret setting: its value, checked, or its secret's ARN,
// not both.
func (r *envReader) secret(ss secretSetting) (Secret, string) {
	name := ss.Var
	v, arn := r.get(name), r.arn(name+"_SECRET_ARN")
	if v != "" {
		if err := ss.check(v); err != nil {
			r.fail(name, "%v", err)
		}
	}
	if v != "" && arn != "" {
		r.fail(name+"_SECRET_ARN", "set %s or %s_SECRET_ARN, not both", name, name)
	}
	return Secret(v), arn
}

// parsed reads name (unset: its row's default) with parse, whose error is
// a problem with name; the zero T when unset without a default.
func parsed[T any](r *envReader, name string, parse func(string) (T, error)) T {
	var v T
	if s := r.value(name); s != "" {
		var err error
		if v, err = parse(s); err != nil {
			r.fail(name, "%v", err)
		}
	}
	return v
}

// showKinds are the source kinds SUBJECT_SHOW may name: identities, which
// name a caller. credentialKinds are refused: their value lets a caller
// in, so it is only ever hashed.
var (
	showKinds = map[string]identity.SourceKind{
		"jwt": identity.SourceJWT, "context": identity.SourceContext,
		"principal": identity.SourcePrincipal, "ip": identity.SourceIP,
	}
	credentialKinds = []string{"header", "query", "apikey"}
)

// parseSubjectShow reads SUBJECT_SHOW, a comma list of source kinds such
// as "jwt,principal": whose subjects may be shown as sent. A credential
// kind (header, query, apikey) is refused with the reason; every problem
// is reported. "" is none.
func parseSubjectShow(s string) ([]identity.SourceKind, error) {
	var (
		out  []identity.SourceKind
		errs []error
	)
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		kind, _, hasName := strings.Cut(item, ":")
		switch k, ok := showKinds[kind]; {
		case slices.Contains(credentialKinds, kind):
			errs = append(errs, fmt.Errorf("%q is a credential source: its subjects stay hashed (only jwt, context, principal and ip may be shown)", item))
		case ok && hasName:
			errs = append(errs, fmt.Errorf("%q: name the kind only (%s), every %s: source is shown", item, kind, kind))
		case ok:
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		case item == "":
			errs = append(errs, errors.New("empty item"))
		default:
			errs = append(errs, fmt.Errorf("%q is not a source kind that may be shown (jwt, context, principal, ip)", item))
		}
	}
	return out, errors.Join(errs...)
}

// HasSource reports whether SUBJECT_SOURCES or a dimension reads a source
// of kind.
func (c *Config) HasSource(kind identity.SourceKind) bool {
	return identity.HasKind(c.SubjectSources, kind) ||
		slices.ContainsFunc(c.Dimensions, func(d identity.Dimension) bool { return identity.HasKind(d.Sources, kind) })
}

func formatLimit(e *rules.Effective) string {
	s := strconv.FormatInt(e.Limit, 10) + "/" + rules.Period(e.Period).String()
	if e.Burst != e.Limit {
		s += ",burst=" + strconv.FormatInt(e.Burst, 10)
	}
	return s
}

var (
	// isScheme reports whether s is a URL scheme (RFC 3986: a letter,
	// then letters, digits, +, - or .).
	isScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`).MatchString
	// validRegion reports whether s has an AWS Region name's form, such as
	// us-east-1 or ap-southeast-2.
	validRegion = regexp.MustCompile(`^[a-z]+(-[a-z]+)+-[0-9]+$`).MatchString
	// isName reports whether s is letters, digits, '_', '-' or '.' alone:
	// a DynamoDB table's characters, and a Contributor Insights rule's.
	isName = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`).MatchString
)

// atLeast is a secret's check: at least n bytes.
func atLeast(n int) func(string) error {
	return func(v string) error {
		if len(v) < n {
			return fmt.Errorf("%d bytes is too short: at least %d", len(v), n)
		}
		return nil
	}
}
