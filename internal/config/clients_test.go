package config

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/testenv"
)

// fakeSecrets serves secrets from a map, by ARN.
type fakeSecrets map[string]string

func (f fakeSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	s, ok := f[*in.SecretId]
	if !ok {
		return nil, errors.New("ResourceNotFoundException: secret not found")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: &s}, nil
}

const (
	dbARN    = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db"
	redisARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:redis"
)

func TestPostgresConfig(t *testing.T) {
	secrets := fakeSecrets{
		dbARN:        `{"username":"sluice","password":"p@ss/word?#","host":"db.cluster.rds.amazonaws.com","port":5432,"dbname":"rules","engine":"postgres"}`,
		dbARN + "-2": `{"username":"sluice","password":"x","host":"db","port":"6543"}`,
	}
	type conn struct {
		Host, User, Password, Database string
		Port                           uint16
		TLS                            bool
		MaxConns                       int32
		ExecMode                       pgx.QueryExecMode
		ConnectTimeout                 time.Duration
	}
	tests := []struct {
		name string
		cfg  Config
		want conn
	}{
		{"database url", Config{DatabaseURL: "postgres://app:pw@localhost:5433/sluice?sslmode=disable"},
			conn{"localhost", "app", "pw", "sluice", 5433, false, 2, pgx.QueryExecModeCacheStatement, 5 * time.Second}},
		{"rds secret", Config{DBSecretARN: dbARN, DBSSLMode: "require"},
			conn{"db.cluster.rds.amazonaws.com", "sluice", "p@ss/word?#", "rules", 5432, true, 2, pgx.QueryExecModeCacheStatement, 30 * time.Second}},
		{"rds proxy", Config{DBSecretARN: dbARN, DBHost: "proxy.rds.amazonaws.com"},
			conn{"proxy.rds.amazonaws.com", "sluice", "p@ss/word?#", "rules", 5432, true, 2, pgx.QueryExecModeExec, 30 * time.Second}},
		{"string port, default db", Config{DBSecretARN: dbARN + "-2", DBSSLMode: "require"},
			conn{"db", "sluice", "x", "postgres", 6543, true, 2, pgx.QueryExecModeCacheStatement, 30 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := postgresConfig(t.Context(), tc.cfg, secrets)
			if err != nil {
				t.Fatalf("postgresConfig() error = %v", err)
			}
			c := pc.ConnConfig
			got := conn{c.Host, c.User, c.Password, c.Database, c.Port, c.TLSConfig != nil, pc.MaxConns, c.DefaultQueryExecMode, c.ConnectTimeout}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("postgresConfig() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPostgresConfigErrors(t *testing.T) {
	secrets := fakeSecrets{
		dbARN + "-bad":     `{"username":"u","password":"hunter2"`,
		dbARN + "-nohost":  `{"username":"u","password":"hunter2"}`,
		dbARN + "-badport": `{"username":"u","password":"hunter2","host":"h","port":"http"}`,
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"nothing set", Config{}, "neither DATABASE_URL nor DB_SECRET_ARN"},
		{"secret missing", Config{DBSecretARN: dbARN + "-gone"}, "secret not found"},
		{"not json", Config{DBSecretARN: dbARN + "-bad"}, "not RDS secret JSON"},
		{"no host", Config{DBSecretARN: dbARN + "-nohost"}, "missing host"},
		{"bad port", Config{DBSecretARN: dbARN + "-badport"}, "not a TCP port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := postgresConfig(t.Context(), tc.cfg, secrets)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("postgresConfig() error = %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("postgresConfig() error %q leaks the password", err)
			}
		})
	}
}

func TestRedisClient(t *testing.T) {
	secrets := fakeSecrets{
		redisARN:           "plain-token",
		redisARN + "-json": `{"username":"limiter","password":"json-token"}`,
	}
	type opts struct {
		Addr, User, Password string
		TLS, ContextTimeout  bool
		PoolSize, MinIdle    int
		// MaxRetries, DialerRetries and Protocol are the same for a node
		// and a cluster: one retry, one dial retry, RESP2.
		MaxRetries, DialerRetries, Protocol int
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want opts
	}{
		{"plain", Config{RedisURL: "redis://localhost:6379/0"}, opts{"localhost:6379", "", "", false, true, 4, 1, 1, 1, 2}},
		{"tls with url password", Config{RedisURL: "rediss://:urlpw@cache.example:6380"}, opts{"cache.example:6380", "", "urlpw", true, true, 4, 1, 1, 1, 2}},
		{"auth secret token", Config{RedisURL: "rediss://:urlpw@cache.example:6380", RedisAuthSecretARN: redisARN}, opts{"cache.example:6380", "", "plain-token", true, true, 4, 1, 1, 1, 2}},
		{"auth secret json", Config{RedisURL: "redis://cache:6379", RedisAuthSecretARN: redisARN + "-json"}, opts{"cache:6379", "limiter", "json-token", false, true, 4, 1, 1, 1, 2}},
		{"cluster", Config{RedisURL: "rediss://cfg.cache.example:6379?addr=node2:6379", RedisMode: RedisCluster, RedisAuthSecretARN: redisARN},
			opts{"cfg.cache.example:6379,node2:6379", "", "plain-token", true, true, 4, 1, 1, 1, 2}},
		// A failover client is a *redis.Client whose dialer asks the
		// sentinels: the limiter's type assertions and pool sizing hold.
		{"sentinel", Config{RedisURL: "redis://:urlpw@s1:26379?master_name=sluice&addr=s2:26379", RedisMode: RedisSentinel, RedisPoolSize: 16},
			opts{"FailoverClient", "", "urlpw", false, true, 16, 1, 1, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newRedis(t.Context(), tc.cfg, secrets)
			if err != nil {
				t.Fatalf("newRedis() error = %v", err)
			}
			defer c.Close()
			var got opts
			switch c := c.(type) {
			case *redis.ClusterClient:
				o := c.Options()
				got = opts{strings.Join(o.Addrs, ","), o.Username, o.Password, o.TLSConfig != nil, o.ContextTimeoutEnabled, o.PoolSize, o.MinIdleConns, o.MaxRetries, o.DialerRetries, o.Protocol}
				// TRYAGAIN during a reshard is retried within the limiter's budget.
				if o.MinRetryBackoff != time.Millisecond || o.MaxRetryBackoff != 4*time.Millisecond || o.MaxRedirects != 8 {
					t.Errorf("newRedis(cluster) retries: backoff %v..%v, %d redirects; want 1ms..4ms, 8", o.MinRetryBackoff, o.MaxRetryBackoff, o.MaxRedirects)
				}
			case *redis.Client:
				o := c.Options()
				got = opts{o.Addr, o.Username, o.Password, o.TLSConfig != nil, o.ContextTimeoutEnabled, o.PoolSize, o.MinIdleConns, o.MaxRetries, o.DialerRetries, o.Protocol}
			default:
				t.Fatalf("newRedis() = %T", c)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("newRedis() options mismatch (-want +got):\n%s", diff)
			}
		})
	}

	// Sentinel settings that the client does not show: the sentinels, the
	// master name and who authenticates where.
	type failover struct {
		Master, Sentinels                string
		SentinelUser, SentinelPassword   string
		User, Password                   string
		TLS, ContextTimeout              bool
		PoolSize, Protocol, PipelinePool int
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want failover
	}{
		{"url password for both",
			Config{RedisURL: "redis://:urlpw@s1:26379/0?master_name=m&addr=s2:26379&addr=s3:26379"},
			failover{"m", "s1:26379,s2:26379,s3:26379", "", "urlpw", "", "urlpw", false, true, 4, 2, -1}},
		{"data password apart",
			Config{RedisURL: "redis://s1:26379?master_name=m&password=datapw"},
			failover{"m", "s1:26379", "", "", "", "datapw", false, true, 4, 2, -1}},
		{"tls, secret for both",
			Config{RedisURL: "rediss://:urlpw@s1:26379?master_name=m", RedisAuthSecretARN: redisARN + "-json"},
			failover{"m", "s1:26379", "limiter", "json-token", "limiter", "json-token", true, true, 4, 2, -1}},
		{"resp3 on request",
			Config{RedisURL: "redis://s1:26379?master_name=m&protocol=3", RedisPoolSize: 8},
			failover{"m", "s1:26379", "", "", "", "", false, true, 8, 3, -1}},
	} {
		t.Run("sentinel "+tc.name, func(t *testing.T) {
			var user, password string
			if tc.cfg.RedisAuthSecretARN != "" {
				s, err := getSecret(t.Context(), secrets, tc.cfg.RedisAuthSecretARN)
				if err != nil {
					t.Fatal(err)
				}
				user, password = redisAuth(string(s))
			}
			o, err := failoverOptions(tc.cfg, user, password, tc.cfg.RedisAuthSecretARN != "")
			if err != nil {
				t.Fatalf("failoverOptions() error = %v", err)
			}
			got := failover{o.MasterName, strings.Join(o.SentinelAddrs, ","), o.SentinelUsername, o.SentinelPassword,
				o.Username, o.Password, o.TLSConfig != nil, o.ContextTimeoutEnabled, o.PoolSize, o.Protocol, o.PipelinePoolSize}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("failoverOptions() mismatch (-want +got):\n%s", diff)
			}
		})
	}

	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no url", Config{}, "REDIS_URL is not set"},
		{"sentinel without master", Config{RedisURL: "redis://s1:26379", RedisMode: RedisSentinel}, "master_name"},
		{"secret missing", Config{RedisURL: "redis://x:1", RedisAuthSecretARN: redisARN + "-gone"}, "secret not found"},
	} {
		if _, err := newRedis(t.Context(), tc.cfg, secrets); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newRedis(%s) error = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestClientsAgainstServers(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		pool, err := Postgres(t.Context(), Config{DatabaseURL: Secret(testenv.DatabaseURL(t))})
		if err != nil {
			t.Fatalf("Postgres() error = %v", err)
		}
		defer pool.Close()
		var one int
		if err := pool.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Errorf("SELECT 1 = %d, %v; want 1", one, err)
		}
	})
	t.Run("redis", func(t *testing.T) {
		c, err := Redis(t.Context(), Config{RedisURL: Secret(testenv.RedisURL(t))})
		if err != nil {
			t.Fatalf("Redis() error = %v", err)
		}
		defer c.Close()
		if err := c.Ping(t.Context()).Err(); err != nil {
			t.Errorf("PING error = %v", err)
		}
		// The context deadline bounds a call (ContextTimeoutEnabled).
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		start := time.Now()
		_ = c.Do(ctx, "DEBUG", "SLEEP", "0.2").Err()
		if d := time.Since(start); d > 150*time.Millisecond {
			t.Errorf("a call with a 1ms deadline took %v, want it cut short", d)
		}
	})
}

// TestSecretSettings: each secret given as its value or as a secret's ARN
// is read from either, refused from the secret when its check fails
// without quoting it, and nil when neither is set.
func TestSecretSettings(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:secretsmanager:eu-west-1:1:secret:key"
	str := func(b []byte, err error) (string, error) { return string(b), err }
	for _, tc := range []struct {
		ss        secretSetting
		good      string
		bad       []string
		fromValue func(Config) (string, error) // the exported reader
		set       func(*Config, Secret)
	}{
		{subjectKeySetting, "0123456789abcdef0123456789abcdef", []string{"hunter2", "0123456789abcde"},
			func(c Config) (string, error) { return str(SubjectKey(t.Context(), c)) }, func(c *Config, v Secret) { c.SubjectHMACKey = v }},
		{edgeKeySetting, "0123456789abcdef", []string{"hunter2"},
			func(c Config) (string, error) { return EdgeKey(t.Context(), c) }, func(c *Config, v Secret) { c.EdgeKey = v }},
		{originVerifySetting, "Zm9vYmFyYmF6cXV4cXV1eA", []string{"short", "0123456789abcdef 0", "0123456789abcdef,0", "0123456789abcdéf", strings.Repeat("x", 129)},
			func(c Config) (string, error) { return OriginVerify(t.Context(), c) }, func(c *Config, v Secret) { c.OriginVerify = v }},
		{rulesSigningSetting, strings.Repeat("r", MinRulesSigningKey), []string{strings.Repeat("r", MinRulesSigningKey-1)},
			func(c Config) (string, error) { return str(RulesSigningSecret(t.Context(), c)) }, func(c *Config, v Secret) { c.RulesSigningKey = v }},
	} {
		got, err := str(tc.ss.read(t.Context(), fakeSecrets{arn: tc.good}, "", arn))
		if err != nil || got != tc.good {
			t.Errorf("%s from a secret = %q, %v; want the secret", tc.ss.Var, got, err)
		}
		for _, bad := range tc.bad {
			_, err := tc.ss.read(t.Context(), fakeSecrets{arn: bad}, "", arn)
			if err == nil {
				t.Errorf("%s from secret %q = nil error, want refused", tc.ss.Var, bad)
			} else if len(bad) > 4 && strings.Contains(err.Error(), bad) {
				t.Errorf("%s from secret %q: error %q names the secret's value", tc.ss.Var, bad, err)
			}
		}
		if _, err := tc.ss.read(t.Context(), fakeSecrets{}, "", arn); err == nil {
			t.Errorf("%s from a missing secret = nil error", tc.ss.Var)
		}
		var c Config
		tc.set(&c, "from-the-environment")
		if v, err := tc.fromValue(c); err != nil || v != "from-the-environment" {
			t.Errorf("%s from the environment = %q, %v", tc.ss.Var, v, err)
		}
		if v, err := tc.ss.read(t.Context(), nil, "", ""); v != nil || err != nil {
			t.Errorf("%s unset = %q, %v; want nil, nil", tc.ss.Var, v, err)
		}
		if v, err := tc.fromValue(Config{}); v != "" || err != nil {
			t.Errorf("%s unset = %q, %v; want \"\", nil", tc.ss.Var, v, err)
		}
	}
	cfg, err := FromEnv(env(map[string]string{"RULES_PUBLIC_KEY": "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="}))
	if err != nil || len(cfg.RulesPublicKey) != 32 || cfg.RulesPublicKey[0] != 0xd7 {
		t.Errorf("FromEnv(RULES_PUBLIC_KEY) = %x, %v; want the 32 bytes", cfg.RulesPublicKey, err)
	}
}

// fakeLambda answers Invoke with a fixed output.
type fakeLambda struct {
	out *lambda.InvokeOutput
	err error
	fn  string
}

func (f *fakeLambda) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	f.fn = *in.FunctionName
	return f.out, f.err
}

func TestUpstreamInvoker(t *testing.T) {
	t.Parallel()
	unhandled := "Unhandled"
	tests := []struct {
		name    string
		out     *lambda.InvokeOutput
		err     error
		want    string
		wantErr error // nil: any error when want is ""
	}{
		{"answer", &lambda.InvokeOutput{Payload: []byte(`{"principalId":"u"}`)}, nil, `{"principalId":"u"}`, nil},
		{"Unauthorized", &lambda.InvokeOutput{FunctionError: &unhandled, Payload: []byte(`{"errorMessage":"Unauthorized","errorType":"errorString"}`)}, nil, "", identity.ErrUpstreamUnauthorized},
		{"Unauthorized without the header (emulator)", &lambda.InvokeOutput{Payload: []byte(`{"errorMessage":"Unauthorized","errorType":"errorString"}`)}, nil, "", identity.ErrUpstreamUnauthorized},
		{"another function error", &lambda.InvokeOutput{FunctionError: &unhandled, Payload: []byte(`{"errorMessage":"boom","errorType":"x"}`)}, nil, "", nil},
		{"invoke failed", nil, errors.New("throttled"), "", nil},
	}
	for _, tc := range tests {
		f := &fakeLambda{out: tc.out, err: tc.err}
		u := &upstreamInvoker{c: f, fn: "team-authorizer"}
		got, err := u.Invoke(t.Context(), []byte(`{}`))
		switch {
		case tc.want != "" && (err != nil || string(got) != tc.want):
			t.Errorf("%s: Invoke = %s, %v; want %s", tc.name, got, err, tc.want)
		case tc.want == "" && err == nil:
			t.Errorf("%s: Invoke error = nil", tc.name)
		case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
			t.Errorf("%s: Invoke error = %v, want %v", tc.name, err, tc.wantErr)
		case tc.wantErr == nil && errors.Is(err, identity.ErrUpstreamUnauthorized):
			t.Errorf("%s: Invoke error = %v, want a failure, not Unauthorized", tc.name, err)
		}
		if f.fn != "team-authorizer" {
			t.Errorf("%s: invoked %q", tc.name, f.fn)
		}
	}
}

// TestReaderCredentials reads the read-only role's login from its secret
// and refuses a secret without both fields, without quoting it.
func TestReaderCredentials(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:reader"
	sm := fakeSecrets{
		arn:           `{"username":"sluice_reader","password":"p4ss"}`,
		arn + "-nopw": `{"username":"sluice_reader"}`,
		arn + "-text": `hunter2`,
	}
	c, err := readerCredentials(t.Context(), sm, arn)
	if err != nil || c.Username != "sluice_reader" || c.Password != "p4ss" {
		t.Fatalf("readerCredentials = %+v, %v; want sluice_reader with its password", c, err)
	}
	for _, bad := range []string{arn + "-nopw", arn + "-text", arn + "-gone"} {
		c, err := readerCredentials(t.Context(), sm, bad)
		if err == nil {
			t.Errorf("readerCredentials(%s) = %+v, want an error", bad, c)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("readerCredentials(%s): %v quotes the secret", bad, err)
		}
	}
}
