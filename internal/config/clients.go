package config

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/identity"
)

// Client sizes for Lambda: an instance handles one request at a time, so a
// couple of connections suffice and more only load the servers when
// hundreds of instances run.
const (
	redisMinIdleConns = 1
	// Socket timeouts are a backstop: callers bound each call with a
	// context deadline (ContextTimeoutEnabled), the limiter's in milliseconds.
	redisDialTimeout = time.Second
	redisIOTimeout   = time.Second

	pgMaxConns = 2
	// pgConnectTimeout bounds one connection to DATABASE_URL (its
	// connect_timeout when shorter or, up to pgRDSConnectTimeout, longer).
	pgConnectTimeout = 5 * time.Second
	// pgRDSConnectTimeout bounds one connection with DBSecretARN (Aurora,
	// RDS Proxy), refused dials retried within it (pgRetryDial): an Aurora
	// Serverless v2 instance paused at 0 ACU takes about 15 s to resume,
	// and an RDS Proxy holds a new client until it has a connection to its
	// target (ConnectionBorrowTimeout, 120 s by default), which after the
	// proxy's creation takes a while. The caller's context bounds it too:
	// the decision path's loads allow far less.
	pgRDSConnectTimeout = 30 * time.Second
	pgMaxIdle           = 5 * time.Minute
)

// Backoff between refused dials of pgRetryDial.
const (
	pgDialBackoff    = 250 * time.Millisecond
	pgDialBackoffMax = 2 * time.Second
)

// pgRetryDial dials addr until it accepts or ctx (which the connect
// timeout bounds) ends, waiting pgDialBackoff after the first failure and
// twice as long after each next one, up to pgDialBackoffMax: a database
// resuming, or not yet reachable behind a proxy just created, refuses or
// drops dials for a while.
func pgRetryDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		wait := pgDialBackoff
		for {
			c, err := dial(ctx, network, addr)
			if err == nil || ctx.Err() != nil {
				return c, err
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, err
			case <-t.C:
			}
			wait = min(2*wait, pgDialBackoffMax)
		}
	}
}

// RDSCABundle is Amazon RDS's global CA bundle (every commercial region's
// root certificates: rds-ca-rsa2048-g1, rds-ca-rsa4096-g1,
// rds-ca-ecc384-g1), as published at RDSCABundleURL, byte for byte: the
// file rdsca/global-bundle.pem, embedded when the build has it (`make
// rds-ca`, which `make deploy` runs, fetches it and checks its digest
// against RDSCABundleDigests). Nil when the build lacked it: verifying
// connections then trust the system roots alone, which hold RDS Proxy's
// CA but not the RDS instances' (see docs/store.md). PostgreSQL
// connections that verify the server trust it beside the system roots,
// unless a root file is named (sslrootcert, DB_SSLROOTCERT).
var RDSCABundle, _ = rdsCA.ReadFile("rdsca/global-bundle.pem")

//go:embed rdsca
var rdsCA embed.FS

// RDSCABundleURL is where AWS publishes the bundle.
const RDSCABundleURL = "https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem"

// RDSCABundleDigests are the SHA-256 digests (hex) of published versions
// of the bundle, each with its number of certificates: the build accepts
// no other file. A new version (AWS adds the roots of each new region) is
// reviewed and added here.
var RDSCABundleDigests = map[string]int{
	"05c6b4a9bf4daa95c888711481e19cc8e2e11aed4de8db759f51f4a6fce64917": 102,
	"e5bb2084ccf45087bda1c9bffdea0eb15ee67f0b91646106e466714f9de3c7e3": 108,
}

// trustedRoots returns the system roots and the RDS CA bundle (when the
// build has it), built once.
var trustedRoots = sync.OnceValues(func() (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // none on this system: the bundle alone
	}
	if RDSCABundle != nil && !pool.AppendCertsFromPEM(RDSCABundle) {
		return nil, errors.New("the built-in RDS CA bundle holds no certificate")
	}
	return pool, nil
})

// trustRDS makes every TLS configuration of pc that verifies the server
// and names no roots of its own (no sslrootcert) trust trustedRoots: pgx
// would use the system roots alone, which lack the RDS CAs.
func trustRDS(pc *pgxpool.Config) error {
	configs := []*tls.Config{pc.ConnConfig.TLSConfig}
	for _, fb := range pc.ConnConfig.Fallbacks {
		configs = append(configs, fb.TLSConfig)
	}
	for _, tc := range configs {
		// verify-full verifies through crypto/tls; verify-ca through
		// pgx's VerifyPeerCertificate, which reads RootCAs when called.
		if tc == nil || tc.RootCAs != nil || tc.InsecureSkipVerify && tc.VerifyPeerCertificate == nil {
			continue
		}
		roots, err := trustedRoots()
		if err != nil {
			return err
		}
		tc.RootCAs = roots
	}
	return nil
}

// secretGetter is the one Secrets Manager call this package makes.
type secretGetter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// getSecret reads the secret arn names through sm, or, when sm is nil (a
// main; tests pass a fake), through a Secrets Manager client from the
// default AWS configuration, which honours AWS_REGION and
// AWS_ENDPOINT_URL (LocalStack, tests): a run that names no secret needs
// no AWS configuration at all.
func getSecret(ctx context.Context, sm secretGetter, arn string) (Secret, error) {
	if sm == nil {
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return "", fmt.Errorf("load AWS configuration: %w", err)
		}
		sm = secretsmanager.NewFromConfig(cfg)
	}
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &arn})
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", arn, err)
	}
	if out.SecretString == nil {
		return "", fmt.Errorf("read secret %s: no SecretString (binary secrets are not supported)", arn)
	}
	return Secret(*out.SecretString), nil
}

// A secretSetting is a secret given as its value (the variable Var) or as
// the ARN of a Secrets Manager secret holding it (Var_SECRET_ARN), not
// both, and the check either must pass.
type secretSetting struct {
	Var   string // such as "EDGE_KEY"
	what  string // its name in errors, such as "edge key"
	check func(string) error
}

// The secret settings.
var (
	subjectKeySetting   = secretSetting{"SUBJECT_HMAC_KEY", "subject hash key", atLeast(MinSubjectHMACKey)}
	edgeKeySetting      = secretSetting{"EDGE_KEY", "edge key", atLeast(MinSubjectHMACKey)}
	originVerifySetting = secretSetting{"ORIGIN_VERIFY", "origin verify", checkOriginVerify}
	rulesSigningSetting = secretSetting{"RULES_SIGNING_KEY", "rules signing key", atLeast(MinRulesSigningKey)}
)

// read returns the value v (FromEnv checked it), or else the secret arn
// names, read through sm (getSecret) and refused unless it passes the
// check; nil when neither is set. Its errors never quote the secret.
func (ss secretSetting) read(ctx context.Context, sm secretGetter, v Secret, arn string) ([]byte, error) {
	if v != "" {
		return []byte(v), nil
	}
	if arn == "" {
		return nil, nil
	}
	s, err := getSecret(ctx, sm, arn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ss.what, err)
	}
	if err := ss.check(string(s)); err != nil {
		return nil, fmt.Errorf("%s: secret %s: %w", ss.what, arn, err)
	}
	return []byte(s), nil
}

// SubjectKey returns the key of the subject hash: SubjectHMACKey, or the
// secret SubjectHMACKeySecretARN names (read once, at init); nil when
// neither is set.
func SubjectKey(ctx context.Context, cfg Config) ([]byte, error) {
	return subjectKeySetting.read(ctx, nil, cfg.SubjectHMACKey, cfg.SubjectHMACKeySecretARN)
}

// EdgeKey returns the key the CDN edge hashes subjects with: EdgeKey, or
// the secret EdgeKeySecretARN names (read once, at init); "" when
// neither is set (no edge tier).
func EdgeKey(ctx context.Context, cfg Config) (string, error) {
	k, err := edgeKeySetting.read(ctx, nil, cfg.EdgeKey, cfg.EdgeKeySecretARN)
	return string(k), err
}

// OriginVerify returns the value the edge's distribution sends in
// X-Origin-Verify and the authorizer requires: OriginVerify, or the
// secret OriginVerifySecretARN names (read once, at init); "" when
// neither is set (no check).
func OriginVerify(ctx context.Context, cfg Config) (string, error) {
	v, err := originVerifySetting.read(ctx, nil, cfg.OriginVerify, cfg.OriginVerifySecretARN)
	return string(v), err
}

// RulesSigningSecret returns the secret the rule writers' signing key is
// derived from: RulesSigningKey, or the secret RulesSigningKeySecretARN
// names (read once, at init); nil when neither is set.
func RulesSigningSecret(ctx context.Context, cfg Config) ([]byte, error) {
	return rulesSigningSetting.read(ctx, nil, cfg.RulesSigningKey, cfg.RulesSigningKeySecretARN)
}

// checkOriginVerify says what is wrong with v as an origin-verify value:
// MinOriginVerify to MaxOriginVerify visible ASCII bytes without a comma,
// so that it is one header value, sent as is. It never names v's bytes.
func checkOriginVerify(v string) error {
	if len(v) < MinOriginVerify || len(v) > MaxOriginVerify {
		return fmt.Errorf("%d bytes: want %d to %d", len(v), MinOriginVerify, MaxOriginVerify)
	}
	if i := strings.IndexFunc(v, func(c rune) bool { return c <= ' ' || c > '~' || c == ',' }); i >= 0 {
		return fmt.Errorf("byte %d is not visible ASCII other than a comma", i)
	}
	return nil
}

// lambdaInvoker is the one Lambda call the upstream authorizer needs.
type lambdaInvoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// upstreamTimeout bounds one upstream invocation inside the caller's
// deadline (API Gateway waits 10 s at most for the whole authorizer).
const upstreamTimeout = 5 * time.Second

// Upstream returns the invoker of the UPSTREAM_AUTHORIZER function through
// the AWS SDK (the default configuration: AWS_REGION, and
// AWS_ENDPOINT_URL_LAMBDA for the Lambda Runtime Interface Emulator in
// tests); nil when it is not set.
func Upstream(ctx context.Context, cfg Config) (identity.Invoker, error) {
	if cfg.UpstreamAuthorizer == "" {
		return nil, nil
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("upstream authorizer: load AWS configuration: %w", err)
	}
	return &upstreamInvoker{c: lambda.NewFromConfig(ac), fn: cfg.UpstreamAuthorizer}, nil
}

type upstreamInvoker struct {
	c  lambdaInvoker
	fn string
}

// Invoke calls the function synchronously with event. A function error
// whose message is "Unauthorized" is identity.ErrUpstreamUnauthorized.
func (u *upstreamInvoker) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, upstreamTimeout)
	defer cancel()
	out, err := u.c.Invoke(ctx, &lambda.InvokeInput{FunctionName: &u.fn, Payload: event})
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", u.fn, err)
	}
	// A function error is flagged by X-Amz-Function-Error; the Runtime
	// Interface Emulator leaves that out, so an error-shaped payload
	// ({"errorMessage", "errorType"}) counts too: no authorizer answer has
	// those fields.
	var fe struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	_ = json.Unmarshal(out.Payload, &fe)
	if out.FunctionError != nil || fe.ErrorMessage != "" && fe.ErrorType != "" {
		if fe.ErrorMessage == "Unauthorized" {
			return nil, identity.ErrUpstreamUnauthorized
		}
		return nil, fmt.Errorf("invoke %s: function error %s: %.200s", u.fn, fe.ErrorType, fe.ErrorMessage)
	}
	return out.Payload, nil
}

// Redis returns a Redis client for cfg: a single-endpoint client, a
// cluster client when RedisMode is cluster, or a Sentinel failover client
// when it is sentinel. It does not connect: go-redis dials on first use, so
// a Lambda starts even while Redis is down (the limiter's failure mode then
// applies). It reads the AUTH token from Secrets Manager when
// RedisAuthSecretARN is set; rediss:// URLs use TLS.
func Redis(ctx context.Context, cfg Config) (redis.UniversalClient, error) {
	redisLogOnce.Do(func() { redis.SetLogger(redisLog{}) })
	return newRedis(ctx, cfg, nil)
}

func newRedis(ctx context.Context, cfg Config, sm secretGetter) (redis.UniversalClient, error) {
	if cfg.RedisURL == "" {
		return nil, errors.New("redis: REDIS_URL is not set")
	}
	var user, password string
	var haveAuth bool
	if cfg.RedisAuthSecretARN != "" {
		s, err := getSecret(ctx, sm, cfg.RedisAuthSecretARN)
		if err != nil {
			return nil, fmt.Errorf("redis auth: %w", err)
		}
		user, password = redisAuth(string(s))
		haveAuth = true
	}
	switch cfg.RedisMode {
	case RedisCluster:
		o, err := redis.ParseClusterURL(string(cfg.RedisURL))
		if err != nil {
			return nil, fmt.Errorf("redis: REDIS_URL: %s", redactIn(err.Error(), string(cfg.RedisURL)))
		}
		if haveAuth {
			o.Username, o.Password = user, password
		}
		o.ContextTimeoutEnabled = true
		o.Protocol = redisProtocol(o.Protocol)
		o.PoolSize, o.MinIdleConns = cmp.Or(cfg.RedisPoolSize, DefaultRedisPoolSize), redisMinIdleConns
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = redisDialTimeout, redisIOTimeout, redisIOTimeout
		o.MaxRetries = 1
		o.DialerRetries = 1 // as for a single node: a dead node costs one dial, not five
		// A two-bucket script that meets its slot half migrated gets
		// TRYAGAIN until the slot's last keys have moved (milliseconds).
		// go-redis's cluster default waits 10-30ms before retrying, past
		// the limiter's whole budget, so every such call failed open;
		// retrying after 1-4ms, up to 8 times, rides it out within the
		// budget (measured in internal/app TestFailoverClusterReshard).
		// MOVED and ASK are followed at once whatever these say.
		o.MinRetryBackoff, o.MaxRetryBackoff, o.MaxRedirects = time.Millisecond, 4*time.Millisecond, 8
		return redis.NewClusterClient(o), nil
	case RedisSentinel:
		o, err := failoverOptions(cfg, user, password, haveAuth)
		if err != nil {
			return nil, err
		}
		// NewFailoverClient, not NewFailoverClusterClient: every limiter call
		// is a write (the script), so all traffic belongs on the primary;
		// the cluster variant only adds routing of reads to replicas, which
		// would serve the rules version stale. It returns a *redis.Client
		// whose dialer asks the sentinels for the primary and which drops
		// its connections to the old one on +switch-master.
		return redis.NewFailoverClient(o), nil
	default:
		o, err := redis.ParseURL(string(cfg.RedisURL))
		if err != nil {
			return nil, fmt.Errorf("redis: REDIS_URL: %s", redactIn(err.Error(), string(cfg.RedisURL)))
		}
		if haveAuth {
			o.Username, o.Password = user, password
		}
		o.ContextTimeoutEnabled = true
		o.Protocol = redisProtocol(o.Protocol)
		o.PoolSize, o.MinIdleConns = cmp.Or(cfg.RedisPoolSize, DefaultRedisPoolSize), redisMinIdleConns
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = redisDialTimeout, redisIOTimeout, redisIOTimeout
		o.MaxRetries = 1
		o.DialerRetries = 1
		// One request at a time: pipelines share the main pool.
		o.PipelinePoolSize = -1
		return redis.NewClient(o), nil
	}
}

// failoverOptions are the Sentinel client's options for cfg, sized and
// bounded like the other modes' clients. user and password, when haveAuth,
// come from the AUTH secret.
func failoverOptions(cfg Config, user, password string, haveAuth bool) (*redis.FailoverOptions, error) {
	o, err := redis.ParseFailoverURL(string(cfg.RedisURL))
	if err != nil {
		return nil, fmt.Errorf("redis: REDIS_URL: %s", redactIn(err.Error(), string(cfg.RedisURL)))
	}
	if o.MasterName == "" {
		return nil, errors.New("redis: REDIS_URL: sentinel mode needs ?master_name=<name>")
	}
	// go-redis gives the URL's user:password to the sentinels only. Here it
	// authenticates to the primary and replicas too, as in the other modes
	// (one password for the whole deployment, the usual secured Sentinel
	// set-up), unless ?username= or ?password= set the data nodes' own. The
	// AUTH secret replaces both.
	if o.Username == "" && o.Password == "" {
		o.Username, o.Password = o.SentinelUsername, o.SentinelPassword
	}
	if haveAuth {
		o.Username, o.Password = user, password
		o.SentinelUsername, o.SentinelPassword = user, password
	}
	o.ContextTimeoutEnabled = true
	o.Protocol = redisProtocol(o.Protocol)
	o.PoolSize, o.MinIdleConns = cmp.Or(cfg.RedisPoolSize, DefaultRedisPoolSize), redisMinIdleConns
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = redisDialTimeout, redisIOTimeout, redisIOTimeout
	o.MaxRetries = 1
	o.DialerRetries = 1
	o.PipelinePoolSize = -1
	return o, nil
}

// redisProtocol is the RESP version to speak: the URL's ?protocol= when it
// names one, else RESP2. Over RESP3 go-redis checks every connection for
// push notifications around every command (an extra read syscall, ~15 % of
// the client's CPU in the limiter's benchmark), and nothing here uses what
// RESP3 adds (client-side caching, push notifications).
func redisProtocol(fromURL int) int { return cmp.Or(fromURL, 2) }

// redisAuth reads a Redis AUTH secret: a bare token, or JSON with
// "password" (or "authToken"/"token") and an optional "username" (an
// ElastiCache RBAC user).
func redisAuth(s string) (user, password string) {
	var v struct {
		Username  string `json:"username"`
		Password  string `json:"password"`
		AuthToken string `json:"authToken"`
		Token     string `json:"token"`
	}
	if strings.HasPrefix(strings.TrimSpace(s), "{") && json.Unmarshal([]byte(s), &v) == nil {
		if p := cmp.Or(v.Password, v.AuthToken, v.Token); p != "" {
			return v.Username, p
		}
	}
	return "", s
}

// rdsSecret is the JSON of an RDS-managed or CDK-generated database secret.
type rdsSecret struct {
	Username string          `json:"username"`
	Password Secret          `json:"password"`
	Host     string          `json:"host"`
	Port     json.RawMessage `json:"port"` // a number, or a string in some secrets
	DBName   string          `json:"dbname"`
}

// Credentials are a database user and its password.
type Credentials struct {
	Username string
	Password Secret
}

// ReaderCredentials returns the read-only role's user and password from
// the secret DBReaderSecretARN names (JSON "username", "password", as an
// RDS secret); nil when it is not set.
func ReaderCredentials(ctx context.Context, cfg Config) (*Credentials, error) {
	if cfg.DBReaderSecretARN == "" {
		return nil, nil
	}
	return readerCredentials(ctx, nil, cfg.DBReaderSecretARN)
}

func readerCredentials(ctx context.Context, sm secretGetter, arn string) (*Credentials, error) {
	s, err := getSecret(ctx, sm, arn)
	if err != nil {
		return nil, fmt.Errorf("reader credentials: %w", err)
	}
	var sec rdsSecret
	if err := json.Unmarshal([]byte(s), &sec); err != nil || sec.Username == "" || sec.Password == "" {
		// The error may quote the secret: say only where it failed.
		return nil, fmt.Errorf("reader credentials: secret %s is not JSON with a username and a password", arn)
	}
	return &Credentials{Username: sec.Username, Password: sec.Password}, nil
}

// Postgres returns a connection pool for cfg, from DatabaseURL (with
// sslmode verify-full when it names none) or from the RDS secret
// DBSecretARN (DBHost replacing its host, DBSSLMode its sslmode,
// DBSSLRootCert its sslrootcert). A connection that verifies
// the server and names no root file trusts the system roots and
// RDSCABundle. The pool holds at most 2 connections and does not connect
// until first used, so a Lambda starts while the database is down. With
// DBSecretARN (a deployment on AWS) it waits for a database that is
// resuming or not yet reachable (pgRDSConnectTimeout) and closes each
// connection when it is released, so none stays open while Lambda
// freezes the process.
func Postgres(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	pc, err := postgresConfig(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return pool, nil
}

func postgresConfig(ctx context.Context, cfg Config, sm secretGetter) (*pgxpool.Config, error) {
	var conn string
	switch {
	case cfg.DBSecretARN != "":
		s, err := getSecret(ctx, sm, cfg.DBSecretARN)
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if conn, err = rdsURL(s, cfg); err != nil {
			return nil, fmt.Errorf("postgres: secret %s: %w", cfg.DBSecretARN, err)
		}
	case cfg.DatabaseURL != "":
		// Without an sslmode of its own, verify-full, as from a secret:
		// pgx's default (prefer) takes any certificate, and no TLS at all
		// from a server that offers none.
		conn = WithSSLMode(string(cfg.DatabaseURL), DefaultDBSSLMode)
	default:
		return nil, errors.New("postgres: neither DATABASE_URL nor DB_SECRET_ARN is set")
	}
	pc, err := pgxpool.ParseConfig(conn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err) // pgx redacts the password
	}
	if err := trustRDS(pc); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pc.MaxConns = pgMaxConns
	pc.MinConns = 0
	pc.MaxConnIdleTime = pgMaxIdle
	if cfg.DBSecretARN != "" {
		pc.ConnConfig.ConnectTimeout = pgRDSConnectTimeout
		pc.ConnConfig.DialFunc = pgRetryDial(pc.ConnConfig.DialFunc)
		// No connection outlives its use: Lambda freezes a process with
		// its idle connections open for as long as it keeps the
		// environment, which keeps an Aurora Serverless v2 cluster from
		// pausing at 0 ACU (up to 43.80 USD a month at 0.5 ACU) and, with
		// no RDS Proxy, counts against its connection limit. A decision
		// function touches the database only to load the rules (a cold
		// start without a snapshot, a full reload), an admin call a few
		// times: connecting again costs tens of milliseconds there.
		pc.AfterRelease = func(*pgx.Conn) bool { return false }
	} else if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = pgConnectTimeout
	} else if pc.ConnConfig.ConnectTimeout > pgRDSConnectTimeout {
		pc.ConnConfig.ConnectTimeout = pgRDSConnectTimeout
	}
	if cfg.DBHost != "" {
		// RDS Proxy pins a client to one database connection for the
		// session when it sees named prepared statements; the exec mode
		// sends each query with its parameters in one round trip instead.
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	return pc, nil
}

// rdsURL builds a connection URL from an RDS secret; url.URL escapes the
// user and password.
func rdsURL(s Secret, cfg Config) (string, error) {
	var sec rdsSecret
	if err := json.Unmarshal([]byte(s), &sec); err != nil {
		// The error may quote the secret: say only where it failed.
		return "", errors.New("not RDS secret JSON {username, password, host, port, dbname}")
	}
	host := cmp.Or(cfg.DBHost, sec.Host)
	port := 5432
	if p := strings.Trim(string(sec.Port), `" `); p != "" && p != "null" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %s is not a TCP port", sec.Port)
		}
		port = n
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"username", sec.Username}, {"password", string(sec.Password)}, {"host", host}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if missing != nil {
		return "", fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	q := url.Values{"sslmode": {cmp.Or(cfg.DBSSLMode, DefaultDBSSLMode)}}
	if cfg.DBSSLRootCert != "" {
		q.Set("sslrootcert", cfg.DBSSLRootCert)
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(sec.Username, string(sec.Password)),
		Host:     net.JoinHostPort(host, strconv.Itoa(port)),
		Path:     "/" + cmp.Or(sec.DBName, "postgres"),
		RawQuery: q.Encode(),
	}
	return u.String(), nil
}

var redisLogOnce sync.Once

// redisLog sends go-redis's own messages (dial failures, pool notices) to
// slog's default logger at warn, so a Lambda's log stays one JSON object a
// line instead of mixing in go-redis's plain-text stderr lines.
type redisLog struct{}

func (redisLog) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
