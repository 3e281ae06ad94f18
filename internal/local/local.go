// Package local is `sluice local`: the demo API behind a local API
// Gateway that invokes the authorizer's Lambda entry, the admin and check
// APIs and the console under /admin/ and /console/, embedded Redis and
// rules store, all built by internal/app as the Lambdas are.
package local

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/console"
	"github.com/sluicehq/sluice/internal/decider"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/prommetrics"
)

// DefaultSeed is where `make run` (run from the repository root) finds the
// example rules. embeddedSeed is a copy of it, used when that file is not
// there (a `go install`ed binary run elsewhere); a test keeps the two equal.
const DefaultSeed = "examples/rules.json"

//go:embed seed_rules.json
var embeddedSeed []byte

// AdminActor is who the audit log records for admin calls through the local
// gateway, where a bearer token stands in for IAM.
const AdminActor = "local-admin"

// Config is what `sluice local` runs: where it listens and what it
// serves, beside the configuration the Lambdas read (config.Config), which
// Run reads through Getenv.
type Config struct {
	// Addr is the listen address; port 0 picks a free one.
	Addr string
	// API and Stage name the demo API in the events and ARNs the gateway
	// builds (the rules' api).
	API, Stage string
	// Seed is the file of plans and rules created at start; "" seeds
	// nothing. SeedSet: the user named it, so a missing file is an error
	// (else the built-in copy of DefaultSeed is used).
	Seed    string
	SeedSet bool
	// Token is the admin token (SLUICE_ADMIN_TOKEN); empty generates one.
	Token string
	// ReadToken, when set (SLUICE_READ_TOKEN), is a read-only operator's
	// token: the admin API's reads (every GET) and nothing else; a write
	// with it is a 403 that says why. Empty: no such token.
	ReadToken string
	// StateDir keeps the subject hash key and the development issuer's
	// key across restarts; default <user config dir>/sluice.
	StateDir string
	// Regions is how many local Regions to run, 1 to MaxRegions; 0 or 1
	// runs one, without a ledger. More run each on its own port and
	// embedded Redis, over one rules store and one ledger (LedgerURL).
	Regions int
	// LedgerURL is the DynamoDB endpoint of the Regions' ledger; empty
	// starts dynalite (Dynalite) for the run.
	LedgerURL string
	// SubjectKeyFrom, when set, rotates the subject-key record from this
	// key id to the subject hash key's (--subject-key-from).
	SubjectKeyFrom string
	// Dynalite is the path of dynalite's cli.js (SLUICE_DYNALITE); empty
	// looks in .cache/dynalite under the working directory, where
	// scripts/dynalite.sh installs it.
	Dynalite string
	// Getenv reads the Lambdas' variables (REDIS_URL, SUBJECT_SOURCES,
	// ...; the CLI overlays its flags); Defaults fill what it leaves
	// empty. Nil reads nothing, so every setting is its default.
	Getenv func(string) string
	// Edge runs the CDN edge in front of the demo API (--edge): the
	// stack's CloudFront Function in goja over an in-memory KeyValueStore
	// (docs/edge.md). One Region only.
	Edge bool

	// edge is that edge, once started.
	edge *edge
	// ln, when set, is the listener already open on Addr (the development
	// issuer's URL names its address); dev is that issuer.
	ln  net.Listener
	dev *identity.DevIssuer
}

// Defaults are the settings `sluice local` uses where the Lambdas use
// config's defaults: a laptop serves many requests at once over a slower,
// shared loopback, and rule changes should show within a quarter second.
var Defaults = map[string]string{
	"REDIS_PREFIX":       limiter.DefaultPrefix,
	"REDIS_TIMEOUT":      "250ms",
	"REDIS_POOL_SIZE":    "64",
	"RULES_VERSION_POLL": "250ms",
	"SUBJECT_SOURCES":    "header:x-api-key,query:api_key",
}

// ErrConfig marks a configuration Run cannot start with (a bad variable
// or flag), as opposed to a failure while running.
var ErrConfig = errors.New("configuration")

// Run builds the local stack and serves it until ctx ends: the banner goes
// to stdout, the logs to stderr.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	getenv := c.getenv
	overlay := map[string]string{}
	if err := startDevIssuer(&c, getenv, overlay); err != nil {
		return err
	}
	// refuse closes the development issuer's listener, if one is open,
	// on an error before serving takes it over.
	refuse := func(err error) error {
		if c.ln != nil {
			c.ln.Close()
		}
		return err
	}
	cfg, err := config.FromEnv(func(k string) string {
		return cmp.Or(getenv(k), overlay[k], Defaults[k])
	})
	if err != nil {
		return refuse(fmt.Errorf("%w: %v", ErrConfig, err))
	}
	if c.dev != nil && (getenv("JWT_AUDIENCE") != "" || getenv("JWT_JWKS_URL") != "") {
		return refuse(fmt.Errorf("%w: JWT_AUDIENCE and JWT_JWKS_URL need JWT_ISSUER; without it sluice local runs its development issuer", ErrConfig))
	}
	cfg.DatabaseURL = config.Secret(withLocalSSLMode(string(cfg.DatabaseURL)))
	if cfg.SubjectHMACKey == "" && cfg.SubjectHMACKeySecretARN == "" {
		// As the stack keeps one in Secrets Manager: generated once, kept,
		// so a persistent REDIS_URL keeps its buckets across restarts.
		key, err := localSecret(c.StateDir, "subject-hmac.key", 32)
		if err != nil {
			return refuse(err)
		}
		cfg.SubjectHMACKey = config.Secret(key)
	}
	if cfg.RulesSigningKey == "" && cfg.RulesSigningKeySecretARN == "" {
		// The rule writers' key, kept as the subject key is: the admin
		// API signs each rules snapshot, and every limiter sharing this
		// Redis (RULES_PUBLIC_KEY) refuses one it did not sign.
		key, err := localSecret(c.StateDir, "rules-signing.key", 32)
		if err != nil {
			return refuse(err)
		}
		cfg.RulesSigningKey = config.Secret(key)
		if cfg.RulesPublicKey == nil {
			cfg.RulesPublicKey = rulesync.NewSigningKey([]byte(key)).Public().(ed25519.PublicKey)
		}
	}
	if c.Edge && cfg.EdgeKey == "" && cfg.EdgeKeySecretARN == "" {
		cfg.EdgeKey = config.Secret(randomHex(24)) // the store is in memory: a key per run
	}
	if c.Regions > 1 {
		if c.Edge {
			return refuse(fmt.Errorf("%w: --edge runs with one Region", ErrConfig))
		}
		return serveRegions(ctx, c, cfg, stdout, stderr)
	}
	return serve(ctx, c, cfg, stdout, stderr)
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

// serve builds the stack through internal/app, as the Lambdas are
// built, with miniredis and the memory store injected when no server is
// configured, and serves it until ctx ends.
func serve(ctx context.Context, c Config, cfg config.Config, stdout, stderr io.Writer) error {
	var st localStack
	defer st.close()
	// One process decides and administers: GET /stats answers from the
	// counts the authorizer keeps (app.Options.Stats).
	// The stats are shared with the HTTP API's and the service's guard
	// (limitedRoutes), so GET /stats and the console count theirs too.
	counts := stats.New(stats.Options{})
	o := app.Options{Out: stderr, Function: "sluice-local", Prefix: cfg.RedisPrefix, Stats: counts}

	// Serve from the start: the development issuer's JWKS must answer the
	// authorizer's fetch at init. The other routes are added once built
	// (ServeMux takes routes while it serves); until all are, every other
	// request is answered 503 problem+json, never the mux's plain-text 404
	// (gatedServer). The banner comes last.
	ln := c.ln
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", c.Addr); err != nil {
			return fmt.Errorf("listen on %s: %w", c.Addr, err)
		}
	}
	mux := http.NewServeMux()
	mountJWKS(mux, c.dev)
	var mounted atomic.Bool
	srv := gatedServer(&mounted, mux, stderr)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	serving := true
	defer func() {
		if serving { // an error before the end: stop serving
			srv.Close()
			<-served
		}
	}()

	redisDesc := config.Redact(string(cfg.RedisURL))
	if cfg.RedisURL == "" {
		rdb, err := st.embeddedRedis(cfg.RedisPoolSize)
		if err != nil {
			return err
		}
		o.Redis, redisDesc = rdb, "embedded (miniredis on "+rdb.Options().Addr+")"
	}

	// The rules store: PostgreSQL, migrated and seeded through a Migrate
	// app before the authorizer's first load, or memory.
	var (
		seedDesc string
		mig      *app.Migration // set while the database still needs migrating
	)
	storeDesc := "embedded (in memory; gone when sluice stops)"
	if cfg.DatabaseURL != "" {
		storeDesc = "PostgreSQL " + config.Redact(string(cfg.DatabaseURL))
		var err error
		if mig, err = app.NewMigrator(ctx, cfg, app.Options{Out: stderr, Function: o.Function}); err != nil {
			return err
		}
		st.onClose(mig.Close)
		if seedDesc, err = migrateAndSeed(ctx, mig, c, firstMigrateTimeout); err == nil {
			mig = nil
		} else if ctx.Err() != nil {
			return ctx.Err()
		} else {
			// As a cold Lambda does: start on what Redis holds, and
			// catch up once the database answers.
			mig.Log.Error("database unreachable at start: serving the rules snapshot in Redis, else the default limit; migrating and seeding once it answers",
				slog.String("store", storeDesc), slog.Any("error", err))
			storeDesc += " (unreachable at start: retrying in the background)"
			seedDesc = "" // said below, once the authorizer has read what Redis holds
		}
	} else {
		o.Store = memory.NewWithOptions(store.Options{MaxRules: cfg.MaxRules})
		var err error
		if seedDesc, err = seed(ctx, o.Store, c); err != nil {
			return err
		}
	}

	a, err := app.NewLocal(ctx, cfg, o)
	if err != nil {
		return err
	}
	st.onClose(a.Close)
	// Give leased tokens back and flush the metrics aggregated since the
	// last EMF line on the way out, as the Lambdas do on SIGTERM.
	st.onClose(a.Shutdown)
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = a.Redis.Ping(pingCtx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("connect to Redis %s: %w", redisDesc, err)
	}
	if err := recordSubjectKey(ctx, a.Admin.SubjectKey, c.SubjectKeyFrom); err != nil {
		return err
	}
	if mig == nil {
		// Publish the seeded rules, so every authorizer sharing this
		// Redis serves them, and the next cold start can without the
		// database.
		if _, err := a.PublishRules(ctx); err != nil {
			return fmt.Errorf("publish the rules to Redis: %w", err)
		}
	} else {
		seedDesc = dbDownRules(ctx, a, c.Seed)
		retryCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			catchUp(retryCtx, mig, a, c)
		}()
		st.onClose(func() { stop(); <-done })
	}

	var edgeLine string
	if c.Edge {
		e, stop, err := startEdge(ctx, a, cfg, c.API)
		if err != nil {
			return err
		}
		st.onClose(stop)
		c.edge = e
		edgeLine = fmt.Sprintf("  edge       %s/  (the CloudFront Function in goja before the demo API; long denials published every %v)\n", "http://"+ln.Addr().String(), EdgeInterval)
	}
	token, generated := adminToken(c.Token)
	if err := mount(mux, c, cfg, a, token, nil, st.onClose); err != nil {
		return err
	}
	mounted.Store(true)

	bi := bannerInfo{
		base: "http://" + ln.Addr().String(), api: c.API, stage: c.Stage,
		redis: redisDesc, store: storeDesc, seed: seedDesc, seedless: c.Seed == "", token: token, generated: generated,
		rulesKey: rulesync.FormatPublicKey(cfg.RulesPublicKey), edge: edgeLine,
	}
	if err := bi.addDevToken(c.dev, cfg.SubjectSources); err != nil {
		return err
	}
	banner(stdout, bi)

	select {
	case err := <-served:
		serving = false
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "\nshutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	serving = false
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	<-served
	return nil
}

// adminToken returns the admin token: the one given, else a generated one
// (generated true).
func adminToken(given string) (token string, generated bool) {
	if given != "" {
		return given, false
	}
	return "sl_" + randomHex(24), true
}

// mount adds the routes of one stack built on a to mux: the demo APIs,
// the admin and check APIs behind token, the console and the metrics.
// afterWrite, when set, runs after every admin call that is not a read
// (sluice local --regions publishes the rules to every Region's Redis).
//
// With onClose, the decisions are also exported as OpenTelemetry metrics
// when the standard variables ask for them (otelWanted); onClose takes
// the flush. --regions passes nil: N Regions would export N copies of
// one series.
func mount(mux *http.ServeMux, c Config, cfg config.Config, a *app.Local, token string, afterWrite func(context.Context), onClose func(func())) error {
	// The admin and check Lambdas' own http.Handlers: the functions run
	// them through internal/lambdahttp, local mounts them as they are.
	adminHandler := sameProcess(a.Admin.Service.Handler(admin.HandlerOptions{Actor: func(*http.Request) string { return AdminActor }}), a.Cache, a.Limiter, a.Log)
	if afterWrite != nil {
		next := adminHandler
		adminHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				afterWrite(r.Context())
			}
		})
	}
	mux.Handle("/admin/", RequireTokens(token, c.ReadToken, localTokenFrom, http.StripPrefix("/admin", adminHandler)))
	mux.Handle("/admin/check", RequireToken(token, localTokenFrom, a.Check))
	mux.Handle("/admin/debug/vars", RequireToken(token, localTokenFrom, debugVarsHandler(a.Limiter)))
	mux.Handle("/admin/token", RequireToken(token, localTokenFrom, devTokenHandler(c.dev)))
	mux.Handle("/admin/resources", RequireTokens(token, c.ReadToken, localTokenFrom, resourcesHandler(c.API, c.Stage)))
	mux.Handle("/admin", http.RedirectHandler("/admin/rules", http.StatusTemporaryRedirect))
	// The console's files are public (they are in the repository); what
	// it shows comes from /admin/, behind the token (see internal/console).
	mux.Handle("/console/", http.StripPrefix("/console", console.Handler()))
	mux.Handle("/console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
	// The HTTP API and the service decide through the public package's
	// Limiter over this App's decision path (its rules cache, limiter,
	// EMF metrics and stats): one path, and the admin API's rules apply
	// to them as to the REST API. Their decisions, and the REST API's
	// (its authorizer observed), are also Prometheus metrics on /metrics.
	rl := ratelimit.FromDecider(a.Decider.Decider, decider.EmbedOptions{Headers: cfg.RateLimitHeaders})
	reg := prometheus.NewRegistry()
	prom, err := prommetrics.New(reg, prommetrics.Options{Health: rl.Health})
	if err != nil {
		return fmt.Errorf("register the Prometheus metrics: %w", err)
	}
	obs := observers{prom}
	if onClose != nil && otelWanted(c.getenv) {
		m, shutdown, err := otelObserver(c.getenv, rl.Health)
		if err != nil {
			return err
		}
		onClose(shutdown)
		obs = append(obs, m)
	}
	gw := newGateway(c.API, c.Stage, demoResources, a.Authorizer.Observing(ratelimit.CoreObserver(obs)), a.Log)
	gw.headers = cfg.RateLimitHeaders
	mux.Handle("/", c.front(gw))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	limitedRoutes(mux, rl, obs, a.Log)
	return nil
}

// getenv is c.Getenv, or nothing when it is nil.
func (c Config) getenv(k string) string {
	if c.Getenv == nil {
		return ""
	}
	return c.Getenv(k)
}

// localTokenFrom says where sluice local's admin token is, for its 401s.
const localTokenFrom = "the admin token `sluice local` printed at start (or SLUICE_ADMIN_TOKEN)"

// dbDownRules says, for the banner, what sluice local enforces while the
// database is unreachable: the rules snapshot an earlier run published to
// Redis, else the default limit; the seed follows once it answers.
func dbDownRules(ctx context.Context, a *app.Local, seed string) string {
	then := "; " + seed + " is seeded once the database answers"
	if seed == "" {
		then = ""
	}
	if a.Cache != nil {
		if snap := a.Cache.Snapshot(ctx); snap != nil && snap.Len() > 0 {
			return fmt.Sprintf("enforcing the %d rule(s) of the snapshot in Redis while the database is unreachable%s", snap.Len(), then)
		}
	}
	return "no rules: no snapshot in Redis and the database is unreachable, so the default limit (DEFAULT_LIMIT) applies" + then
}

// jwksPattern is the development issuer's JWKS route.
const jwksPattern = "GET /.well-known/jwks.json"

// gatedServer is the server of mux, logging its errors to stderr, that
// serves mux once mounted is true. Before, it serves only the development
// issuer's JWKS, which the authorizer fetches while it is built, and
// answers anything else 503 problem+json with Retry-After: a client that
// connects early learns to retry, not that the route does not exist.
func gatedServer(mounted *atomic.Bool, mux *http.ServeMux, stderr io.Writer) *http.Server {
	gate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mounted.Load() {
			mux.ServeHTTP(w, r)
			return
		}
		if h, pattern := mux.Handler(r); pattern == jwksPattern {
			h.ServeHTTP(w, r)
			return
		}
		writeProblem(w, &httpapi.Error{
			Status: http.StatusServiceUnavailable,
			Detail: "sluice local is starting: its routes are not mounted yet. Retry in a moment.",
			Header: http.Header{"Retry-After": {"1"}},
		})
	})
	return &http.Server{
		Handler:           gate,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.New(slog.NewJSONHandler(stderr, nil)).Handler(), slog.LevelWarn),
	}
}

// embeddedRedis starts a miniredis expiring keys in real time
// (expireMiniredis) and returns a client of it with poolSize
// connections; both close with s.
func (s *localStack) embeddedRedis(poolSize int) (*redis.Client, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded Redis: %w", err)
	}
	s.onClose(m.Close)
	s.onClose(expireMiniredis(m))
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, Protocol: 2, PoolSize: poolSize})
	s.onClose(func() { rdb.Close() })
	return rdb, nil
}

// firstMigrateTimeout bounds the migration at start: a database that does
// not answer within it is retried in the background.
const firstMigrateTimeout = 5 * time.Second

// migrateAndSeed migrates the database and seeds it, within timeout.
func migrateAndSeed(ctx context.Context, mig *app.Migration, c Config, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := mig.Migrator.Once(ctx, io.Discard); err != nil {
		return "", err
	}
	return seed(ctx, mig.Store, c)
}

// catchUp retries migrateAndSeed with backoff, as the Lambdas retry their
// rules load (1s doubling to 30s), until it succeeds or ctx ends; then it
// publishes the rules, which the authorizer loads at its next version
// check.
func catchUp(ctx context.Context, mig *app.Migration, a *app.Local, c Config) {
	wait := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		desc, err := migrateAndSeed(ctx, mig, c, 30*time.Second)
		if err == nil {
			if _, err = a.PublishRules(ctx); err == nil {
				a.Log.Info("database reachable: migrated, seeded and published", slog.String("seed", desc))
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		a.Log.Warn("database still unreachable; retrying", slog.Duration("in", min(2*wait, 30*time.Second)), slog.Any("error", err))
		wait = min(2*wait, 30*time.Second)
	}
}

// expireMiniredis makes the embedded Redis expire keys in real time, to
// within miniredisTick: miniredis only moves TTLs when told, and idle
// buckets should go away as they do on Redis. A quota's window end is its
// key's expiry (PEXPIRETIME reads the now of the clock plus a TTL moved at
// the last tick), so the tick also bounds how late a window's end reads.
func expireMiniredis(m *miniredis.Miniredis) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(miniredisTick)
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

// miniredisTick is how often expireMiniredis moves the TTLs.
const miniredisTick = 20 * time.Millisecond

// RequireToken guards the admin API with a bearer token, standing in for
// the IAM authorization of the deployed Admin API; from says, in the 401,
// which token and where it is found. The comparison is of SHA-256 digests in
// constant time, so neither content nor length leaks.
func RequireToken(token, from string, next http.Handler) http.Handler {
	return RequireTokens(token, "", from, next)
}

// RequireTokens is RequireToken with a second, read-only token (none when
// read is ""): it passes reads (GET and HEAD, the admin API's read routes,
// admin.ReadRoutes) and answers anything else 403, standing in for a
// principal holding only the stack's GrantRead.
func RequireTokens(token, read, from string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	wantRead := sha256.Sum256([]byte(read))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		full := ok && subtle.ConstantTimeCompare(sum[:], want[:]) == 1
		reader := ok && read != "" && subtle.ConstantTimeCompare(sum[:], wantRead[:]) == 1
		var e *httpapi.Error
		switch {
		case full, reader && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			next.ServeHTTP(w, r)
			return
		case reader:
			e = &httpapi.Error{Status: http.StatusForbidden,
				Detail: "This token is read-only (SLUICE_READ_TOKEN): it reads rules, plans, their history, limits and stats, and changes nothing. Send the admin token to " + r.Method + " here."}
		default:
			e = &httpapi.Error{
				Status: http.StatusUnauthorized,
				Detail: "Send Authorization: Bearer <token>, " + from + ".",
				Header: http.Header{"Www-Authenticate": {`Bearer realm="sluice-admin"`}},
			}
		}
		writeProblem(w, e)
	})
}

// writeProblem answers e as problem+json (httpapi.Render).
func writeProblem(w http.ResponseWriter, e *httpapi.Error) {
	status, h, body := httpapi.Render(httpapi.TypeBase, e)
	maps.Copy(w.Header(), h)
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client has gone
}

// seedFile is the format of examples/rules.json.
type seedFile struct {
	Plans []rules.Plan `json:"plans"`
	Rules []rules.Rule `json:"rules"`
}

// seed creates the seed file's plans and rules. What already exists (a
// plan of that name, a rule on that scope — a database seeded before) is
// left alone, so restarting against the same database is harmless.
func seed(ctx context.Context, store store.Store, c Config) (string, error) {
	if c.Seed == "" {
		return "nothing seeded (--seed \"\")", nil
	}
	b, err := os.ReadFile(c.Seed)
	from := c.Seed
	if errors.Is(err, fs.ErrNotExist) && !c.SeedSet {
		b, from = embeddedSeed, "the built-in copy of "+DefaultSeed
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
		desc += fmt.Sprintf(": %d created, %d already in the store from an earlier run (kept unchanged)", made, kept)
	}
	return desc, nil
}

type bannerInfo struct {
	base, api, stage, redis, store, seed, token string
	generated                                   bool
	// devToken is a token of the development issuer, for the curl line;
	// jwtClaim the claim the jwt: source reads. Empty without one.
	devToken, jwtClaim string
	// regions is the lines on the Regions of `sluice local --regions`,
	// each ending in a newline; empty for one.
	regions string
	// seedless is --seed "": no demo rule limits /search.
	seedless bool
	// rulesKey is RULES_PUBLIC_KEY: what a limiter sharing this Redis
	// verifies the rules with.
	rulesKey string
	// edge is the banner's line on --edge, or empty.
	edge string
}

// banner prints what is running and commands to try.
func banner(w io.Writer, b bannerInfo) {
	// A generated token is printed: it exists nowhere else. A token the
	// user chose is already in their environment, and terminals get shared
	// and recorded: print it masked, and refer to the variable.
	var rulesKey string
	if b.rulesKey != "" {
		rulesKey = "  rules key  " + b.rulesKey + "  (RULES_PUBLIC_KEY: a limiter on this Redis refuses rules this admin API did not sign)\n"
	}
	shown, ref := b.token, b.token
	note, export := "generated; set SLUICE_ADMIN_TOKEN to choose one", "SLUICE_ADMIN_TOKEN="+b.token+" "
	consoleURL := b.base + "/console/#token=" + url.QueryEscape(b.token)
	if !b.generated {
		shown, ref = maskToken(b.token), "$SLUICE_ADMIN_TOKEN"
		note, export = "from SLUICE_ADMIN_TOKEN", ""
		consoleURL = b.base + "/console/#token=<SLUICE_ADMIN_TOKEN>  (put your token after #token=; one you chose is not printed)"
	}
	fmt.Fprintf(w, `Sluice local stack
  demo API   %[1]s/  (api %[2]q, stage %[3]q; resources %[4]s)
  HTTP API   %[1]s/httpapi/  (api %[14]q: a Lambda integration behind ratelimit.LimitHTTPAPI; routes %[15]s)
  service    %[1]s/service/  (api %[16]q: net/http behind ratelimit's middleware; routes %[17]s)
  metrics    %[1]s/metrics  (Prometheus: the decisions of all three demo APIs)
  console    %[13]s
  admin API  %[1]s/admin/
  check API  %[1]s/admin/check  (POST {"subject", "api", "route"})
  token      %[5]s  (%[6]s)
  Redis      %[7]s
  store      %[8]s
  rules      %[9]s
%[19]s%[18]s
Try:
%[12]s  curl -s -H "Authorization: Bearer %[10]s" %[1]s/admin/rules
  curl -s -H "Authorization: Bearer %[10]s" -H 'Content-Type: application/json' \
    -d '{"subject":"alice","api":"%[2]s","route":"GET /search"}' %[1]s/admin/check

CLI (make run built it in build/):
  export PATH=$PWD/build:$PATH %[11]sSLUICE_ENDPOINT=%[1]s/admin
  sluice rules ls

Ctrl-C stops.
`, b.base, b.api, b.stage, strings.Join(demoResources, " "), shown, note, b.redis, b.store, b.seed, ref, export, tryLines(b), consoleURL,
		HTTPAPIID, strings.Join(httpAPIRoutes, ", "), ServiceAPI, strings.Join(serviceRoutes, ", "), b.regions, rulesKey+b.edge)
}

// tryLines are the banner's first curl lines: with the API key, or with a
// development token when the subject is a JWT claim.
func tryLines(b bannerInfo) string {
	four := "# run it 4 times: the 4th gets 429 (3 a minute)"
	if b.seedless {
		four = "# --seed \"\": no rule limits it until you add one"
	}
	auth, first, last := "x-api-key: alice", "", "  curl -s "+b.base+"/metrics | grep sluice_decisions_total\n"
	if b.devToken != "" {
		auth = "Authorization: Bearer " + b.devToken
		first = "  # development JWT issuer: " + b.base + "/.well-known/jwks.json; subject = claim " + b.jwtClaim + "\n"
		last = "  # another token, after the CLI export below: sluice token --sub bob --claim custom:tenant=acme\n"
	}
	return first + fmt.Sprintf(`  curl -i -H '%[2]s' %[1]s/hello
  curl -i -H '%[2]s' %[1]s/search   %[3]s
  curl -i -H '%[2]s' %[1]s/httpapi/search   # the same from the HTTP API's Lambda wrapper
  curl -i -H '%[2]s' %[1]s/service/search   # and from the net/http middleware
`, b.base, auth, four) + last
}

// maskToken shows enough of a token to tell which one it is, and no more:
// its first three characters and its length.
func maskToken(t string) string {
	if len(t) <= 8 {
		return fmt.Sprintf("******** (%d characters)", len(t))
	}
	return fmt.Sprintf("%s****** (%d characters)", t[:3], len(t))
}
