package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/authorizer"
	authapigw "github.com/sluicehq/sluice/internal/authorizer/apigw"
	"github.com/sluicehq/sluice/internal/authorizer/wiring"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/redisversion"
)

// defaultSeed is where `make run` (run from the repository root) finds the
// example rules. embeddedSeed is a copy of it, used when that file is not
// there (a `go install`ed binary run elsewhere); a test keeps the two equal.
const defaultSeed = "examples/rules.json"

//go:embed seed_rules.json
var embeddedSeed []byte

// adminActor is who the audit log records for admin calls through the local
// gateway, where a bearer token stands in for IAM.
const adminActor = "local-admin"

// localConfig is what `sluice local` runs.
type localConfig struct {
	Addr           string
	API, Stage     string
	Seed           string
	SeedSet        bool // --seed given: a missing file is an error
	RedisURL       string
	DatabaseURL    string
	RedisPrefix    string
	RedisTimeout   time.Duration
	Poll           time.Duration
	Refresh        time.Duration
	SubjectSources string
	DefaultLimit   string
	Token          string
	LogLevel       string
}

func runLocal(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "local", "", `Run the local stack: the demo API behind the real authorizer code path on
--addr, the admin API under /admin/ (bearer token), Redis and the rules
store. REDIS_URL and DATABASE_URL select real servers (the database is
migrated on start); without them an in-process Redis (miniredis) and the
in-memory store are used. Ctrl-C stops.

Environment: REDIS_URL, DATABASE_URL, SLUICE_ADMIN_TOKEN (else one is
generated and printed), LOG_LEVEL (debug, info, warn, error),
SUBJECT_SOURCES and DEFAULT_LIMIT (as the authorizer Lambda reads them).`)
	c := localConfig{
		RedisURL:    os.Getenv("REDIS_URL"),
		DatabaseURL: os.Getenv("DATABASE_URL"),
		Token:       os.Getenv("SLUICE_ADMIN_TOKEN"),
		LogLevel:    os.Getenv("LOG_LEVEL"),
	}
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "listen address (port 0 picks a free one)")
	fs.StringVar(&c.API, "api", "demo", "API id of the demo API (the rules' api)")
	fs.StringVar(&c.Stage, "stage", "local", "stage name in the method ARN")
	fs.StringVar(&c.Seed, "seed", defaultSeed, `rules and plans to create at start ({"plans": [...], "rules": [...]}); "" seeds nothing`)
	fs.StringVar(&c.RedisPrefix, "redis-prefix", limiter.DefaultPrefix, "prefix of every Redis key (buckets and the rules version)")
	fs.DurationVar(&c.RedisTimeout, "redis-timeout", 250*time.Millisecond, "per-call Redis timeout of the limiter (generous: a laptop is not a Lambda)")
	fs.DurationVar(&c.Poll, "poll", 250*time.Millisecond, "how often the authorizer checks the rules version")
	fs.DurationVar(&c.Refresh, "refresh", 5*time.Minute, "full rules reload interval")
	fs.StringVar(&c.SubjectSources, "subject-sources", envOr("SUBJECT_SOURCES", "header:x-api-key,query:api_key"),
		"where the subject comes from, in order (env SUBJECT_SOURCES); no subject → 401 (add ip to fall back on the client address)")
	fs.StringVar(&c.DefaultLimit, "default-limit", os.Getenv("DEFAULT_LIMIT"),
		`limit when no rule matches, such as "100/1m" or "100/1m,burst=200" (env DEFAULT_LIMIT); "" allows`)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 0); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "seed" {
			c.SeedSet = true
		}
	})
	return serveLocal(ctx, c, e.stdout, e.stderr)
}

// localStack is everything `sluice local` started, closed in reverse.
type localStack struct {
	closers []func()
}

func (s *localStack) onClose(f func()) { s.closers = append(s.closers, f) }

func (s *localStack) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// ruleStore is what the local stack needs of a store: the admin API's
// operations (memory.Store and postgres.Store both have them).
type ruleStore interface {
	CreateRule(ctx context.Context, r rules.Rule, actor string) (rules.Rule, error)
	GetRule(ctx context.Context, id string) (rules.Rule, error)
	UpdateRule(ctx context.Context, r rules.Rule, ifVersion int64, actor string) (rules.Rule, error)
	DeleteRule(ctx context.Context, id string, ifVersion int64, actor string) error
	ListRules(ctx context.Context, f rules.Filter) (rules.Page, error)
	RuleHistory(ctx context.Context, id string) ([]rules.AuditEntry, error)
	CreatePlan(ctx context.Context, p rules.Plan, actor string) (rules.Plan, error)
	GetPlan(ctx context.Context, name string) (rules.Plan, error)
	UpdatePlan(ctx context.Context, p rules.Plan, ifVersion int64, actor string) (rules.Plan, error)
	DeletePlan(ctx context.Context, name string, ifVersion int64, actor string) error
	ListPlans(ctx context.Context) ([]rules.Plan, error)
	LoadAll(ctx context.Context) ([]rules.Rule, []rules.Plan, error)
}

func serveLocal(ctx context.Context, c localConfig, stdout, stderr io.Writer) error {
	level := slog.LevelInfo
	if c.LogLevel != "" {
		if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
			return usageErrorf("LOG_LEVEL %q: %v", c.LogLevel, err)
		}
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	sources, err := authorizer.ParseSources(c.SubjectSources)
	if err != nil {
		return usageErrorf("--subject-sources: %v", err)
	}

	var def *rules.Effective
	if c.DefaultLimit != "" {
		if def, err = config.ParseLimit(c.DefaultLimit); err != nil {
			return usageErrorf("--default-limit: %v", err)
		}
	}

	var st localStack
	defer st.close()

	// Redis: the given server, or an in-process one.
	var rdb redis.UniversalClient
	redisDesc := ""
	if c.RedisURL != "" {
		opt, err := redis.ParseURL(c.RedisURL)
		if err != nil {
			return fmt.Errorf("REDIS_URL: %w", err)
		}
		opt.ContextTimeoutEnabled = true
		if opt.Protocol == 0 {
			opt.Protocol = 2 // as config.Redis: RESP3 costs a read per command
		}
		rdb = redis.NewClient(opt)
		redisDesc = redactURL(c.RedisURL)
	} else {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return fmt.Errorf("start embedded Redis: %w", err)
		}
		st.onClose(m.Close)
		stopTTL := expireMiniredis(m)
		st.onClose(stopTTL)
		rdb = redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, Protocol: 2})
		redisDesc = "embedded (miniredis on " + m.Addr() + ")"
	}
	st.onClose(func() { rdb.Close() })
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = rdb.Ping(pingCtx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("connect to Redis %s: %w", redisDesc, err)
	}

	// Rules store: PostgreSQL (migrated here) or memory.
	var store ruleStore
	storeDesc := ""
	if c.DatabaseURL != "" {
		pool, err := pgxpool.New(ctx, c.DatabaseURL)
		if err != nil {
			return fmt.Errorf("DATABASE_URL: %w", err)
		}
		st.onClose(pool.Close)
		db := stdlib.OpenDBFromPool(pool)
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		res, err := postgres.Migrate(mctx, db)
		cancel()
		db.Close()
		if err != nil {
			return fmt.Errorf("migrate %s: %w", redactURL(c.DatabaseURL), err)
		}
		log.InfoContext(ctx, "database migrated", slog.Int64("version", res.Version), slog.Int("applied", len(res.Applied)))
		store = postgres.New(pool)
		storeDesc = "PostgreSQL " + redactURL(c.DatabaseURL)
	} else {
		store = memory.New()
		storeDesc = "embedded (in memory; gone when sluice stops)"
	}

	seedDesc, err := seed(ctx, store, c)
	if err != nil {
		return err
	}

	lim := limiter.New(rdb, limiter.Options{Prefix: c.RedisPrefix, Timeout: c.RedisTimeout})
	version := redisversion.New(rdb, c.RedisPrefix+"rules:version")
	// Move the version so every authorizer sharing this Redis reloads the
	// seeded rules.
	if _, err := version.Bump(ctx); err != nil {
		return fmt.Errorf("bump rules version: %w", err)
	}
	cache, err := rules.NewCache(ctx, store, version, rules.CacheOptions{
		Default:  def,
		Poll:     c.Poll,
		Refresh:  c.Refresh,
		OnError:  func(err error) { log.Warn("rules refresh failed", slog.String("error", err.Error())) },
		OnReload: wiring.LogReload(log),
	})
	if err != nil {
		return fmt.Errorf("load rules: %w", err)
	}
	st.onClose(cache.Wait)
	az := authapigw.NewAuthorizer(authorizer.New(cache, lim, authorizer.Options{Sources: sources}), authapigw.Options{Logger: log})
	svc := admin.New(store, version, lim, admin.Options{Logger: log, Default: def})

	token, generated := c.Token, false
	if token == "" {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("generate admin token: %w", err)
		}
		token, generated = "sl_"+hex.EncodeToString(b[:]), true
	}

	mux := http.NewServeMux()
	adminHandler := svc.HTTPHandler(func(*http.Request) string { return adminActor })
	mux.Handle("/admin/", requireToken(token, http.StripPrefix("/admin", adminHandler)))
	mux.Handle("/admin", http.RedirectHandler("/admin/rules", http.StatusTemporaryRedirect))
	mux.Handle("/", newGateway(c.API, c.Stage, demoResources, az, log))

	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.Addr, err)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	banner(stdout, bannerInfo{
		base: "http://" + ln.Addr().String(), api: c.API, stage: c.Stage,
		redis: redisDesc, store: storeDesc, seed: seedDesc, token: token, generated: generated,
	})

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "\nshutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	<-served
	return nil
}

// expireMiniredis makes the embedded Redis expire keys in real time:
// miniredis only moves TTLs when told, and idle buckets should go away as
// they do on Redis.
func expireMiniredis(m *miniredis.Miniredis) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// requireToken guards the admin API with a bearer token, standing in for
// the IAM authorization of the deployed Admin API. The comparison is of
// SHA-256 digests in constant time, so neither content nor length leaks.
func requireToken(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-admin"`)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{ //nolint:errcheck // the client has gone
				"type":   admin.ProblemTypeBase + "unauthorized",
				"title":  http.StatusText(http.StatusUnauthorized),
				"status": http.StatusUnauthorized,
				"detail": "Send Authorization: Bearer <token>, the admin token `sluice local` printed at start (or SLUICE_ADMIN_TOKEN).",
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// seedFile is the format of examples/rules.json.
type seedFile struct {
	Plans []rules.Plan `json:"plans"`
	Rules []rules.Rule `json:"rules"`
}

// seed creates the seed file's plans and rules. What already exists (a
// plan of that name, a rule on that scope — a database seeded before) is
// left alone, so restarting against the same database is harmless.
func seed(ctx context.Context, store ruleStore, c localConfig) (string, error) {
	if c.Seed == "" {
		return "nothing seeded (--seed \"\")", nil
	}
	b, err := os.ReadFile(c.Seed)
	from := c.Seed
	if errors.Is(err, fs.ErrNotExist) && !c.SeedSet {
		b, from = embeddedSeed, "the built-in copy of "+defaultSeed
	} else if err != nil {
		return "", fmt.Errorf("read seed rules: %w", err)
	}
	var sf seedFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return "", fmt.Errorf("read seed rules from %s: %w", from, err)
	}
	var made, kept int
	for _, p := range sf.Plans {
		p.Normalize()
		if _, err := store.CreatePlan(ctx, p, "seed"); errors.Is(err, rules.ErrConflict) {
			kept++
		} else if err != nil {
			return "", fmt.Errorf("seed plan %q from %s: %w", p.Name, from, err)
		} else {
			made++
		}
	}
	for _, r := range sf.Rules {
		r.Normalize()
		if _, err := store.CreateRule(ctx, r, "seed"); errors.Is(err, rules.ErrConflict) {
			kept++
		} else if err != nil {
			return "", fmt.Errorf("seed rule %s %q %s from %s: %w", r.API, r.Route, r.Subject, from, err)
		} else {
			made++
		}
	}
	desc := fmt.Sprintf("%d plan(s) and %d rule(s) from %s", len(sf.Plans), len(sf.Rules), from)
	if kept > 0 {
		desc += fmt.Sprintf(" (%d already there, left as they were)", kept)
	}
	return desc, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// redactURL hides a password in a connection URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

type bannerInfo struct {
	base, api, stage, redis, store, seed, token string
	generated                                   bool
}

// banner prints what is running and three commands to try.
func banner(w io.Writer, b bannerInfo) {
	tokenNote := "from SLUICE_ADMIN_TOKEN"
	if b.generated {
		tokenNote = "generated; set SLUICE_ADMIN_TOKEN to choose one"
	}
	fmt.Fprintf(w, `Sluice local stack
  demo API   %[1]s/  (api %[2]q, stage %[3]q; resources %[4]s)
  admin API  %[1]s/admin/
  token      %[5]s  (%[6]s)
  Redis      %[7]s
  store      %[8]s
  rules      %[9]s

Try:
  curl -i -H 'x-api-key: alice' %[1]s/hello
  curl -i -H 'x-api-key: alice' %[1]s/search   # run it 4 times: the 4th gets 429 (3 a minute)
  curl -s -H 'Authorization: Bearer %[5]s' %[1]s/admin/rules

CLI:
  export SLUICE_ADMIN_TOKEN=%[5]s SLUICE_ENDPOINT=%[1]s/admin
  go run ./cmd/sluice rules ls

Ctrl-C stops.
`, b.base, b.api, b.stage, strings.Join(demoResources, " "), b.token, tokenNote, b.redis, b.store, b.seed)
}
