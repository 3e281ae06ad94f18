package config

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/rules"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func defaults() Config {
	return Config{
		LogLevel:         slog.LevelInfo,
		RedisMode:        RedisSingle,
		RedisTimeout:     25 * time.Millisecond,
		RedisPoolSize:    4,
		DBSSLMode:        "verify-full",
		RulesRefresh:     5 * time.Minute,
		RulesVersionPoll: time.Second,
		SubjectSources:   identity.DefaultSources,
		RateLimitHeaders: headers.Draft11,
		LeaseMax:         64,
		LeaseTTL:         250 * time.Millisecond,
		DenyCacheMaxAge:  time.Second,
		LedgerTimeout:    200 * time.Millisecond,
	}
}

// sameSource compares subject sources by what they read.
var sameSource = cmp.Comparer(func(a, b identity.Source) bool { return a.String() == b.String() })

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want func(c *Config)
	}{
		{"defaults", nil, func(c *Config) {}},
		{"everything set", map[string]string{
			"LOG_LEVEL":             "debug",
			"REDIS_URL":             "rediss://user:pw@cache.example:6379/0",
			"REDIS_MODE":            "cluster",
			"REDIS_AUTH_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:redis-auth",
			"REDIS_TIMEOUT":         "40ms",
			"REDIS_POOL_SIZE":       "16",
			"DB_SECRET_ARN":         "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db",
			"DB_HOST":               "proxy.proxy-abc.eu-west-1.rds.amazonaws.com",
			"DB_SSLMODE":            "require",
			"DB_SSLROOTCERT":        "/etc/ssl/rds-2031.pem",
			"SUBJECT_SOURCES":       " header:x-api-key , query:api_key,apikey,ip",
			"DEFAULT_LIMIT":         "100/1m,burst=200",
			"RULES_REFRESH":         "10m",
			"RULES_VERSION_POLL":    "500ms",
			"REDIS_PREFIX":          "prod-eu:",
			"MAX_RULES":             "2500",
			"RATELIMIT_HEADERS":     "draft11, Legacy",
			"LEASE_MAX":             "1",
			"LEASE_TTL":             "1s",
			"DENY_CACHE_MAX_AGE":    "30s",
			"LEDGER_TABLE":          "sluice-ledger",
			"GLOBAL_REGIONS":        "us-east-1, us-east-2,us-west-2",
			"LEDGER_ENDPOINT":       "http://127.0.0.1:4567",
			"LEDGER_TIMEOUT":        "300ms",
			"GLOBAL_OPEN_SHARE":     "0.25",
		}, func(c *Config) {
			c.LedgerTable = "sluice-ledger"
			c.GlobalRegions = []string{"us-east-1", "us-east-2", "us-west-2"}
			c.LedgerEndpoint = "http://127.0.0.1:4567"
			c.LedgerTimeout = 300 * time.Millisecond
			c.GlobalOpenShare = 0.25
			c.RateLimitHeaders = headers.Draft11 | headers.Legacy
			c.LeaseMax = 1
			c.LeaseTTL = time.Second
			c.DenyCacheMaxAge = 30 * time.Second
			c.RedisPrefix = "prod-eu:"
			c.MaxRules = 2500
			c.LogLevel = slog.LevelDebug
			c.RedisURL = "rediss://user:pw@cache.example:6379/0"
			c.RedisMode = RedisCluster
			c.RedisAuthSecretARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:redis-auth"
			c.RedisTimeout = 40 * time.Millisecond
			c.RedisPoolSize = 16
			c.DBSecretARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db"
			c.DBHost = "proxy.proxy-abc.eu-west-1.rds.amazonaws.com"
			c.DBSSLMode = "require"
			c.DBSSLRootCert = "/etc/ssl/rds-2031.pem"
			c.SubjectSources = []identity.Source{identity.HeaderSource("x-api-key"),
				{Kind: identity.SourceQuery, Name: "api_key"}, {Kind: identity.SourceAPIKey}, {Kind: identity.SourceIP}}
			c.DefaultLimit = &rules.Effective{Limit: 100, Period: time.Minute, Burst: 200}
			c.RulesRefresh = 10 * time.Minute
			c.RulesVersionPoll = 500 * time.Millisecond
		}},
		{"database url", map[string]string{
			"DATABASE_URL": "postgres://sluice:secret@localhost:5432/sluice?sslmode=disable",
			"REDIS_URL":    "redis://localhost:6379",
			"REDIS_MODE":   "SINGLE",
			"LOG_LEVEL":    "WARN",
		}, func(c *Config) {
			c.DatabaseURL = "postgres://sluice:secret@localhost:5432/sluice?sslmode=disable"
			c.RedisURL = "redis://localhost:6379"
			c.LogLevel = slog.LevelWarn
		}},
		{"sentinel", map[string]string{
			"REDIS_URL":  "redis://:pw@sentinel-1:26379/0?master_name=sluice&addr=sentinel-2:26379&addr=sentinel-3:26379",
			"REDIS_MODE": "Sentinel",
		}, func(c *Config) {
			c.RedisURL = "redis://:pw@sentinel-1:26379/0?master_name=sluice&addr=sentinel-2:26379&addr=sentinel-3:26379"
			c.RedisMode = RedisSentinel
		}},
		{"blocking default", map[string]string{"DEFAULT_LIMIT": "0/1s"}, func(c *Config) {
			c.DefaultLimit = &rules.Effective{Limit: 0, Period: time.Second, Burst: 0}
		}},
		{"default without burst", map[string]string{"DEFAULT_LIMIT": " 5 / 1d "}, func(c *Config) {
			c.DefaultLimit = &rules.Effective{Limit: 5, Period: 24 * time.Hour, Burst: 5}
		}},
		{"upstream identity sources: the cache at 300s", map[string]string{
			"UPSTREAM_IDENTITY_SOURCES": "header:Authorization, query:tenant,route,stagevar:env,apikey,ip",
		}, func(c *Config) {
			c.UpstreamCacheTTL = identity.DefaultUpstreamTTL
			c.UpstreamIdentitySources = []identity.UpstreamSource{{Source: identity.HeaderSource("Authorization")},
				{Source: identity.Source{Kind: identity.SourceQuery, Name: "tenant"}}, {Route: true}, {StageVariable: "env"},
				{Source: identity.Source{Kind: identity.SourceAPIKey}}, {Source: identity.Source{Kind: identity.SourceIP}}}
		}},
		{"upstream identity sources and a TTL", map[string]string{"UPSTREAM_IDENTITY_SOURCES": "header:x-api-key", "UPSTREAM_CACHE_TTL": "30s"}, func(c *Config) {
			c.UpstreamCacheTTL = 30 * time.Second
			c.UpstreamIdentitySources = []identity.UpstreamSource{{Source: identity.HeaderSource("x-api-key")}}
		}},
		{"upstream cache off", map[string]string{"UPSTREAM_IDENTITY_SOURCES": "header:x-api-key", "UPSTREAM_CACHE_TTL": "0"}, func(c *Config) {
			c.UpstreamIdentitySources = []identity.UpstreamSource{{Source: identity.HeaderSource("x-api-key")}}
		}},
		{"upstream ttl 0 without sources", map[string]string{"UPSTREAM_CACHE_TTL": "0s"}, func(c *Config) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromEnv(env(tc.env))
			if err != nil {
				t.Fatalf("FromEnv() error = %v", err)
			}
			want := defaults()
			tc.want(&want)
			if diff := cmp.Diff(want, got, sameSource); diff != "" {
				t.Errorf("FromEnv() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromEnvErrors(t *testing.T) {
	tests := []struct {
		name, key, value string
		extra            map[string]string
	}{
		{"log level", "LOG_LEVEL", "loud", nil},
		{"ledger table", "LEDGER_TABLE", "a b", nil},
		{"global regions", "GLOBAL_REGIONS", "us-east-1,mars", nil},
		{"global regions twice", "GLOBAL_REGIONS", "us-east-1,us-east-1", nil},
		{"ledger endpoint", "LEDGER_ENDPOINT", "localhost:4567", nil},
		{"ledger timeout", "LEDGER_TIMEOUT", "1h", nil},
		{"open share", "GLOBAL_OPEN_SHARE", "1.5", nil},
		{"edge key too short", "EDGE_KEY", "short", nil},
		{"edge key twice", "EDGE_KEY_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:1:secret:k", map[string]string{"EDGE_KEY": "0123456789abcdef"}},
		{"edge key secret", "EDGE_KEY_SECRET_ARN", "my-secret", nil},
		{"edge store", "EDGE_STORE_ARN", "arn:aws:s3:::bucket", nil},
		{"origin verify too short", "ORIGIN_VERIFY", "short", nil},
		{"origin verify too long", "ORIGIN_VERIFY", strings.Repeat("a", 129), nil},
		{"origin verify comma", "ORIGIN_VERIFY", "0123456789abcdef,0123", nil},
		{"origin verify space", "ORIGIN_VERIFY", "0123456789 abcdef", nil},
		{"origin verify non-ASCII", "ORIGIN_VERIFY", "0123456789abcdéf", nil},
		{"origin verify twice", "ORIGIN_VERIFY_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:1:secret:o", map[string]string{"ORIGIN_VERIFY": "0123456789abcdef"}},
		{"origin verify secret", "ORIGIN_VERIFY_SECRET_ARN", "my-secret", nil},
		{"redis mode", "REDIS_MODE", "replica", nil},
		{"sentinel without master", "REDIS_URL", "redis://sentinel:26379?addr=sentinel-2:26379", map[string]string{"REDIS_MODE": "sentinel"}},
		{"sentinel url option", "REDIS_URL", "redis://sentinel:26379?master_name=m&colour=red", map[string]string{"REDIS_MODE": "sentinel"}},
		{"redis url scheme", "REDIS_URL", "http://cache:6379", nil},
		{"redis url garbage", "REDIS_URL", "::::", nil},
		{"redis secret", "REDIS_AUTH_SECRET_ARN", "redis-auth", nil},
		{"redis timeout syntax", "REDIS_TIMEOUT", "25", nil},
		{"redis timeout range", "REDIS_TIMEOUT", "1m", nil},
		{"redis timeout negative", "REDIS_TIMEOUT", "-5ms", nil},
		{"redis pool size zero", "REDIS_POOL_SIZE", "0", nil},
		{"redis pool size word", "REDIS_POOL_SIZE", "many", nil},
		{"redis prefix hash tag", "REDIS_PREFIX", "sl:{x}:", nil},
		{"redis prefix space", "REDIS_PREFIX", "my prefix", nil},
		{"max rules zero", "MAX_RULES", "0", nil},
		{"max rules word", "MAX_RULES", "lots", nil},
		{"database url", "DATABASE_URL", "postgres://host:notaport/db", nil},
		{"db secret", "DB_SECRET_ARN", "db-secret", nil},
		{"both database settings", "DB_SECRET_ARN", "arn:aws:secretsmanager:x", map[string]string{"DATABASE_URL": "postgres://localhost/db"}},
		{"db host alone", "DB_HOST", "proxy.example", nil},
		{"ssl mode", "DB_SSLMODE", "always", nil},
		{"ssl root cert alone", "DB_SSLROOTCERT", "/etc/rds.pem", nil},
		{"source kind", "SUBJECT_SOURCES", "cookie:session", nil},
		{"source without name", "SUBJECT_SOURCES", "header:", nil},
		{"source with name", "SUBJECT_SOURCES", "ip:x", nil},
		{"empty source", "SUBJECT_SOURCES", "apikey,,ip", nil},
		{"hmac key short", "SUBJECT_HMAC_KEY", "short", nil},
		{"dimension syntax", "DIMENSIONS", "ip", nil},
		{"show a header", "SUBJECT_SHOW", "jwt,header", nil},
		{"show a query parameter", "SUBJECT_SHOW", "query:api_key", nil},
		{"show the api key", "SUBJECT_SHOW", "apikey", nil},
		{"show a claim by name", "SUBJECT_SHOW", "jwt:sub", nil},
		{"show a kind", "SUBJECT_SHOW", "cookie", nil},
		{"context source without upstream", "UPSTREAM_AUTHORIZER", "", map[string]string{"SUBJECT_SOURCES": "context:tenant"}},
		{"principal source without upstream", "UPSTREAM_AUTHORIZER", "", map[string]string{"SUBJECT_SOURCES": "principal"}},
		{"upstream ttl over an hour", "UPSTREAM_CACHE_TTL", "2h", nil},
		{"upstream ttl without identity sources", "UPSTREAM_CACHE_TTL", "300s", map[string]string{"UPSTREAM_AUTHORIZER": "team-authorizer"}},
		{"upstream identity from the answer", "UPSTREAM_IDENTITY_SOURCES", "header:authorization,context:tenant", nil},
		{"upstream identity route with a name", "UPSTREAM_IDENTITY_SOURCES", "route:GET", nil},
		{"upstream identity stage variable", "UPSTREAM_IDENTITY_SOURCES", "stagevar:a-b", nil},
		{"upstream identity kind", "UPSTREAM_IDENTITY_SOURCES", "cookie:session", nil},
		{"upstream name", "UPSTREAM_AUTHORIZER", "my function", nil},
		{"dimension default", "DIMENSIONS", "default=ip", nil},
		{"dimension twice", "DIMENSIONS", "ip=ip;ip=header:x", nil},
		{"jwt dimension without issuer", "JWT_ISSUER", "", map[string]string{"DIMENSIONS": "tenant=jwt:tenant", "JWT_AUDIENCE": "app"}},
		{"jwt source without issuer", "JWT_ISSUER", "", map[string]string{"SUBJECT_SOURCES": "jwt:sub", "JWT_AUDIENCE": "app"}},
		{"jwt source without audience", "JWT_AUDIENCE", "", map[string]string{"SUBJECT_SOURCES": "jwt:sub", "JWT_ISSUER": "https://issuer.example"}},
		{"jwt issuer not a URL", "JWT_ISSUER", "issuer.example", nil},
		{"hmac key secret", "SUBJECT_HMAC_KEY_SECRET_ARN", "key", nil},
		{"both hmac keys", "SUBJECT_HMAC_KEY_SECRET_ARN", "arn:aws:secretsmanager:x", map[string]string{"SUBJECT_HMAC_KEY": "0123456789abcdef"}},
		{"signing key short", "RULES_SIGNING_KEY", "0123456789abcdef", nil},
		{"signing key secret", "RULES_SIGNING_KEY_SECRET_ARN", "key", nil},
		{"both signing keys", "RULES_SIGNING_KEY_SECRET_ARN", "arn:aws:secretsmanager:x", map[string]string{"RULES_SIGNING_KEY": strings.Repeat("k", 32)}},
		{"public key not base64", "RULES_PUBLIC_KEY", "not base64!", nil},
		{"public key short", "RULES_PUBLIC_KEY", "AAAA", nil},
		{"public key URL alphabet", "RULES_PUBLIC_KEY", strings.Repeat("_", 43) + "=", nil},
		{"limit shape", "DEFAULT_LIMIT", "100 per minute", nil},
		{"limit number", "DEFAULT_LIMIT", "many/1m", nil},
		{"limit negative", "DEFAULT_LIMIT", "-1/1m", nil},
		{"limit period", "DEFAULT_LIMIT", "100/fortnight", nil},
		{"limit period fraction", "DEFAULT_LIMIT", "100/1500ms", nil},
		{"limit burst below", "DEFAULT_LIMIT", "100/1m,burst=50", nil},
		{"limit burst key", "DEFAULT_LIMIT", "100/1m,cost=2", nil},
		{"limit burst on block", "DEFAULT_LIMIT", "0/1m,burst=5", nil},
		{"limit refill horizon", "DEFAULT_LIMIT", "1/1y,burst=10000000", nil},
		{"refresh", "RULES_REFRESH", "0s", nil},
		{"poll", "RULES_VERSION_POLL", "soon", nil},
		{"header dialect", "RATELIMIT_HEADERS", "draft11,x-ratelimit", nil},
		{"lease max zero", "LEASE_MAX", "0", nil},
		{"lease max", "LEASE_MAX", "many", nil},
		{"lease max above", "LEASE_MAX", "10001", nil},
		{"lease ttl below", "LEASE_TTL", "10ms", nil},
		{"lease ttl above", "LEASE_TTL", "2s", nil},
		{"deny cache max age below", "DENY_CACHE_MAX_AGE", "50ms", nil},
		{"deny cache max age above", "DENY_CACHE_MAX_AGE", "2m", nil},
		{"deny cache max age", "DENY_CACHE_MAX_AGE", "forever", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{tc.key: tc.value}
			for k, v := range tc.extra {
				m[k] = v
			}
			_, err := FromEnv(env(m))
			if err == nil || !strings.Contains(err.Error(), tc.key+":") {
				t.Errorf("FromEnv(%s=%q) error = %v, want one naming %s", tc.key, tc.value, err, tc.key)
			}
		})
	}

	// Every problem at once, one line each. (DB_HOST and DB_SSLROOTCERT
	// are fine here: the bad DB_SECRET_ARN is set.)
	all := map[string]string{}
	for _, tc := range tests {
		if tc.extra == nil && tc.key != "DB_HOST" && tc.key != "DB_SSLROOTCERT" {
			all[tc.key] = tc.value
		}
	}
	_, err := FromEnv(env(all))
	if err == nil {
		t.Fatal("FromEnv(every variable wrong) error = nil")
	}
	for k := range all {
		if !strings.Contains(err.Error(), k+":") {
			t.Errorf("FromEnv(every variable wrong) error does not name %s:\n%v", k, err)
		}
	}
	if n := len(strings.Split(err.Error(), "\n")); n < len(all) {
		t.Errorf("FromEnv(every variable wrong) reported %d problems, want at least %d:\n%v", n, len(all), err)
	}
}

// TestUpstreamCacheNeedsSources: a TTL above 0 without the identity
// sources is refused, and the message says why (the defaults turn the
// cache off, so this is only an explicit TTL).
func TestUpstreamCacheNeedsSources(t *testing.T) {
	_, err := FromEnv(env(map[string]string{"UPSTREAM_AUTHORIZER": "team-authorizer", "UPSTREAM_CACHE_TTL": "5m"}))
	if err == nil {
		t.Fatal("FromEnv(UPSTREAM_CACHE_TTL=5m, no UPSTREAM_IDENTITY_SOURCES) error = nil")
	}
	for _, want := range []string{"UPSTREAM_CACHE_TTL: 5m0s", "needs UPSTREAM_IDENTITY_SOURCES", "every header, query value, route or stage variable the upstream reads", "one caller's answer reaches another"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v\nwant it to say %q", err, want)
		}
	}
	c, err := FromEnv(env(map[string]string{"UPSTREAM_AUTHORIZER": "team-authorizer"}))
	if err != nil || c.UpstreamCacheTTL != 0 {
		t.Errorf("FromEnv(UPSTREAM_AUTHORIZER alone) = TTL %v, %v; want 0, no cache", c.UpstreamCacheTTL, err)
	}
}

func TestFromEnvDoesNotLeakPasswords(t *testing.T) {
	_, err := FromEnv(env(map[string]string{
		// net/url's error quotes this URL whole, password included.
		"REDIS_URL":    "redis://u:hunter2@cache:notaport",
		"DATABASE_URL": "postgres://u:hunter3@host:notaport/db",
	}))
	if err == nil {
		t.Fatal("FromEnv() error = nil, want errors")
	}
	for _, pw := range []string{"hunter2", "hunter3"} {
		if strings.Contains(err.Error(), pw) {
			t.Errorf("FromEnv() error %q contains the password %q", err, pw)
		}
	}
}

func TestSecretRedacted(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"REDIS_URL":    "redis://u:hunter2@cache:6379",
		"DATABASE_URL": "postgres://u:hunter3@db/sluice",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("config", "config", c, "url", c.DatabaseURL)
	out := buf.String() + fmt.Sprintf("%v %+v %#v %s", c, c, c, c.RedisURL)
	for _, pw := range []string{"hunter2", "hunter3"} {
		if strings.Contains(out, pw) {
			t.Errorf("a secret leaked into the output: %s", out)
		}
	}
	if !strings.Contains(buf.String(), `"redisUrlSet":true`) {
		t.Errorf("config log line = %s, want redisUrlSet true", buf.String())
	}
}

func TestParseLimitRoundTrip(t *testing.T) {
	for _, s := range []string{"100/1m", "100/1m,burst=200", "0/1s", "7/1d", "1000000000/1y"} {
		e, err := rules.ParseLimit(s)
		if err != nil {
			t.Fatalf("rules.ParseLimit(%q) error = %v", s, err)
		}
		if got := formatLimit(e); got != s {
			t.Errorf("formatLimit(rules.ParseLimit(%q)) = %q, want %q", s, got, s)
		}
	}
}

// TestParseLimitHorizon: DEFAULT_LIMIT obeys the refill horizon every rule
// does (rules.MaxHorizon), exactly at the boundary.
func TestParseLimitHorizon(t *testing.T) {
	for _, s := range []string{"1/1y,burst=10", "7/30d,burst=851", "1/1s,burst=315360000"} {
		if _, err := rules.ParseLimit(s); err != nil {
			t.Errorf("rules.ParseLimit(%q) error = %v, want nil: at or within the horizon", s, err)
		}
	}
	for _, s := range []string{"1/1y,burst=11", "7/30d,burst=852", "1/1y,burst=10000000", "1/1s,burst=1000000000"} {
		_, err := rules.ParseLimit(s)
		if err == nil || !strings.Contains(err.Error(), "takes longer than 10y to refill") {
			t.Errorf("rules.ParseLimit(%q) error = %v, want one about the 10y refill horizon", s, err)
		}
	}
}

func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"100/1m", "100/1m,burst=200", "0/1s", "1/1h30m", "x/y", ",", "/", "9223372036854775807/1s", "1/1y,burst=10000000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := rules.ParseLimit(s)
		if err != nil {
			if e != nil {
				t.Errorf("rules.ParseLimit(%q) = %+v with error %v, want nil", s, e, err)
			}
			return
		}
		switch {
		case e.Limit < 0 || e.Limit > rules.MaxLimit:
			t.Errorf("rules.ParseLimit(%q).Limit = %d, out of range", s, e.Limit)
		case e.Period < time.Second || e.Period > rules.MaxPeriod.Duration():
			t.Errorf("rules.ParseLimit(%q).Period = %v, out of range", s, e.Period)
		case e.Limit > 0 && e.Burst < e.Limit, e.Limit == 0 && e.Burst != 0:
			t.Errorf("rules.ParseLimit(%q) burst %d for limit %d", s, e.Burst, e.Limit)
		case !rules.WithinHorizon(e.Burst, e.Limit, e.Period):
			t.Errorf("rules.ParseLimit(%q) = %+v, beyond rules.MaxHorizon", s, e)
		}
		// What ParseLimit accepts, the snapshot applies.
		if snap := rules.NewSnapshot(nil, nil, rules.SnapshotOptions{Default: e}); snap.Default() == nil {
			t.Errorf("rules.ParseLimit(%q) = %+v, which the snapshot skips: %+v", s, e, snap.Skipped())
		}
		again, err := rules.ParseLimit(formatLimit(e))
		if err != nil || !cmp.Equal(e, again) {
			t.Errorf("rules.ParseLimit(formatLimit(rules.ParseLimit(%q))) = %+v, %v; want %+v", s, again, err, e)
		}
	})
}

func TestFromEnvJoinsErrors(t *testing.T) {
	_, err := FromEnv(env(map[string]string{"LOG_LEVEL": "x", "REDIS_MODE": "y"}))
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 2 {
		t.Errorf("FromEnv(two bad) error = %v, want errors.Join of 2", err)
	}
}

// TestLogValueMaxRules: the start-up log line shows the effective rule cap,
// not 0 when MAX_RULES is unset.
func TestLogValueMaxRules(t *testing.T) {
	for _, tt := range []struct {
		set  int
		want int64
	}{{0, 10_000}, {500, 500}} {
		var got int64
		for _, a := range (Config{MaxRules: tt.set}).LogValue().Group() {
			if a.Key == "maxRules" {
				got = a.Value.Int64()
			}
		}
		if got != tt.want {
			t.Errorf("Config{MaxRules: %d}.LogValue() maxRules = %d, want %d", tt.set, got, tt.want)
		}
	}
}

// TestParseSubjectShow: SUBJECT_SHOW takes identity kinds and refuses a
// credential with the reason, every problem at once.
func TestParseSubjectShow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    []identity.SourceKind
		wantErr []string
	}{
		{"", nil, nil},
		{" jwt , principal,context,ip,jwt", []identity.SourceKind{identity.SourceJWT, identity.SourcePrincipal, identity.SourceContext, identity.SourceIP}, nil},
		{"header,query:k,apikey", nil, []string{`"header" is a credential source: its subjects stay hashed`, `"query:k" is a credential source`, `"apikey" is a credential source`}},
		{"jwt:sub", nil, []string{`"jwt:sub": name the kind only (jwt)`}},
		{"ip,,cookie", nil, []string{"empty item", `"cookie" is not a source kind`}},
	} {
		got, err := parseSubjectShow(tc.in)
		if tc.wantErr == nil {
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("parseSubjectShow(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("parseSubjectShow(%q) = %v, want an error", tc.in, got)
			continue
		}
		for _, w := range tc.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("parseSubjectShow(%q) error %q does not say %q", tc.in, err, w)
			}
		}
	}
}
