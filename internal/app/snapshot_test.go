package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The tests here cover the rules snapshot the admin path publishes to Redis
// (docs/authorizer.md, "Rules cache and propagation"), on real Redis and
// PostgreSQL: what a cold start serves with the database down, with neither
// source, with a corrupt snapshot; a burst of writes; Redis emptied; admin
// writes racing; and what one authorizer reads per admin write.

// createRuleBody creates a rule from body through svc and returns it with
// its ETag.
func createRuleBody(t *testing.T, svc *admin.Service, body map[string]any) (rules.Rule, string) {
	t.Helper()
	resp := call(t, svc, "POST", "/rules", nil, body, http.StatusCreated)
	var r rules.Rule
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		t.Fatal(err)
	}
	return r, resp.Header.Get("Etag")
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestColdStartNeitherSource: with no snapshot in Redis (never published,
// or Redis restarted empty) or Redis down, and the database down, a cold
// start serves DEFAULT_LIMIT alone and says so at error level; when the
// database comes back, the rules load.
func TestColdStartNeitherSource(t *testing.T) {
	tests := []struct {
		name       string
		redisDown  bool
		defLimit   string
		wantDetail string // in the no-rules log line
	}{
		{"redis empty, DEFAULT_LIMIT set", false, "3/1m", `"defaultLimit":"3 per 1m0s (burst 3) for every subject"`},
		{"redis down, no DEFAULT_LIMIT", true, "", `"defaultLimit":"none: every request is allowed, rules with failure_mode closed included"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL := pgtest.NewDatabase(t)
			// A rule in the database, never published: written behind
			// the admin API's back.
			pool, err := pgxpool.New(t.Context(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			r, err := postgres.New(pool).CreateRule(t.Context(), rules.Rule{API: "a1b2c3d4e5", Route: "*", Subject: "*",
				Limit: new(int64(50)), Period: rules.Period(time.Minute), FailureMode: rules.FailClosed}, "test")
			if err != nil {
				t.Fatal(err)
			}
			rURL := testenv.RedisURL(t)
			if tc.redisDown {
				rURL = "redis://" + closedAddr(t)
			}
			p, proxied := viaProxy(t, dbURL)
			a, logs := newApp(t, map[string]string{"REDIS_URL": rURL, "DATABASE_URL": proxied, "DEFAULT_LIMIT": tc.defLimit, "REDIS_TIMEOUT": "1s"})
			if st := a.Cache.Stats(); st.Loaded || st.Origin != rulesync.FromNothing || st.LastError == nil {
				t.Fatalf("cache stats with neither source = %+v, want nothing loaded and an error", st)
			}
			res, _ := a.Core.Decide(context.Background(), &authorizer.Request{API: "a1b2c3d4e5", Method: "GET", Resource: "/", Headers: map[string]string{"x-api-key": "k"}})
			switch {
			case tc.defLimit == "" && (!res.Allowed || res.Effective != nil):
				t.Errorf("decision with neither source and no DEFAULT_LIMIT = %+v, want allowed with no rule", res)
			case tc.defLimit != "" && (!res.Default || res.Limit != 3):
				t.Errorf("decision with neither source = %+v, want the default rule, 3/1m", res)
			}
			line := ""
			for l := range strings.SplitSeq(logs.String(), "\n") {
				if strings.Contains(l, "no rules loaded") {
					line = l
				}
			}
			if !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, tc.wantDetail) {
				t.Errorf("no-rules log line = %s, want an ERROR with %s; logs:\n%s", line, tc.wantDetail, logs.String())
			}

			p.Up(t)
			waitFor(t, 10*time.Second, "rules loaded once the database is up", func() bool {
				a.Cache.Snapshot(context.Background())
				return a.Cache.Stats().Loaded
			})
			if got := a.Cache.Snapshot(context.Background()).Match("a1b2c3d4e5", "GET", "/", "k"); got.API == nil || got.API.ID != r.ID {
				t.Errorf("rules after the database came back: %+v, want %s", got, r.ID)
			}
		})
	}
}

// TestColdStartFailClosed: a cold start with the database down enforces
// the last snapshot's rules, failure_mode closed included: when Redis then
// fails, the closed rule denies. (Before snapshots, this start served only
// the default rule, and with no DEFAULT_LIMIT allowed everything.)
func TestColdStartFailClosed(t *testing.T) {
	t.Parallel()
	rURL, dbURL := testenv.RedisURL(t), pgtest.NewDatabase(t)
	svc := adminService(t, dbURL, rURL)
	closed, _ := createRuleBody(t, svc, map[string]any{"api": "a1b2c3d4e5", "route": "GET /orders/{id}", "subject": "*",
		"limit": 2, "period": "1m", "failure_mode": "closed"})

	rp := testenv.NewProxy(t, testenv.RedisAddr(t))
	rp.Up(t)
	_, proxied := viaProxy(t, dbURL) // never up
	a, _ := newApp(t, map[string]string{"REDIS_URL": "redis://" + rp.Addr(), "DATABASE_URL": proxied, "REDIS_TIMEOUT": "200ms"})
	if st := a.Cache.Stats(); st.Origin != rulesync.FromSnapshot || st.Rules != 1 {
		t.Fatalf("cache after a cold start with the database down = %+v, want the snapshot's rule", st)
	}
	key := "closed-" + testenv.Random(t)
	var got []bool
	for range 3 {
		got = append(got, decide(t, a, key).Allowed)
	}
	if got[0] != true || got[1] != true || got[2] != false {
		t.Errorf("3 requests on the snapshot's 2/1m rule = %v, want [true true false]", got)
	}
	rp.Down()
	res, err := a.Core.Decide(context.Background(), &authorizer.Request{
		API: "a1b2c3d4e5", Method: "GET", Resource: "/orders/{id}", Headers: map[string]string{"x-api-key": "other-" + key},
	})
	if err == nil || res.Allowed || res.FailOpen || res.Rule != closed.ID {
		t.Errorf("decision with Redis down on the closed rule = allowed %v failOpen %v rule %s, %v; want denied by %s with an error", res.Allowed, res.FailOpen, res.Rule, err, closed.ID)
	}
}

// corrupt overwrites the published snapshot with its bytes, one flipped.
func corrupt(t *testing.T, snaps *rulesync.Snapshots, rdb redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	_, key := snaps.Keys()
	b, err := rdb.Get(ctx, key).Bytes()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	b[len(b)-3] ^= 0x10
	if err := rdb.Set(ctx, key, b, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptSnapshot: an undecodable snapshot is logged and the rules come
// from the database instead, at a cold start and on a warm reload; with the
// database down too, the default rule serves.
func TestCorruptSnapshot(t *testing.T) {
	t.Parallel()
	rURL, dbURL := testenv.RedisURL(t), pgtest.NewDatabase(t)
	adm, _ := newAdmin(t, map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": rURL})
	r, etag := createRuleBody(t, adm.Service, map[string]any{"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 50, "period": "1m"})
	corrupt(t, adm.Snapshots, adm.Redis)

	// Cold start, database up.
	a, logs := newApp(t, map[string]string{"REDIS_URL": rURL, "DATABASE_URL": dbURL, "REDIS_TIMEOUT": "1s", "RULES_VERSION_POLL": "50ms"})
	if st := a.Cache.Stats(); st.Origin != rulesync.FromStore || st.Rules != 1 {
		t.Errorf("cold start on a corrupt snapshot = %+v, want the rule from the database", st)
	}
	if out := logs.String(); !strings.Contains(out, "rules refresh failed") || !strings.Contains(out, "checksum mismatch") {
		t.Errorf("no log line naming the corrupt snapshot:\n%s", out)
	}

	// Warm: a good publish is loaded from Redis; a corrupt one announced by
	// a newer version sends the reload to the database.
	call(t, adm.Service, "PUT", "/rules/"+r.ID, http.Header{"If-Match": {etag}}, map[string]any{
		"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 60, "period": "1m"}, http.StatusOK)
	waitFor(t, 5*time.Second, "the update from the snapshot", func() bool { return decide(t, a, "k").Limit == 60 })
	if st := a.Cache.Stats(); st.Origin != rulesync.FromSnapshot {
		t.Errorf("after a good publish: %+v, want loaded from the snapshot", st)
	}
	stores := a.Cache.Stats().StoreLoads
	corrupt(t, adm.Snapshots, adm.Redis)
	vkey, _ := adm.Snapshots.Keys()
	if err := a.Redis.Incr(context.Background(), vkey).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a reload from the database", func() bool {
		decide(t, a, "k")
		return a.Cache.Stats().StoreLoads > stores
	})
	if st := a.Cache.Stats(); st.Origin != rulesync.FromStore || st.Rules != 1 || decide(t, a, "k").Limit != 60 {
		t.Errorf("after a corrupt publish: %+v, want the rule (limit 60) from the database", st)
	}

	// Cold start with the corrupt snapshot and the database down.
	_, proxied := viaProxy(t, dbURL)
	b, logs := newApp(t, map[string]string{"REDIS_URL": rURL, "DATABASE_URL": proxied, "DEFAULT_LIMIT": "4/1m", "REDIS_TIMEOUT": "1s"})
	if st := b.Cache.Stats(); st.Loaded {
		t.Errorf("cold start on a corrupt snapshot, database down = %+v, want nothing loaded", st)
	}
	if res := decide(t, b, "k"); !res.Default || res.Limit != 4 {
		t.Errorf("decision = %+v, want the default rule (4/1m)", res)
	}
	if out := logs.String(); !strings.Contains(out, "checksum mismatch") || !strings.Contains(out, "no rules loaded") {
		t.Errorf("want the corrupt snapshot and the no-rules state logged:\n%s", out)
	}
}

// TestBurstOfWrites: a burst of admin writes makes each authorizer reload
// at most once per RULES_VERSION_POLL (1s), each
// reload one GET of the snapshot and no database query; the last write is
// what it ends on.
func TestBurstOfWrites(t *testing.T) {
	t.Parallel()
	rURL, dbURL := testenv.RedisURL(t), pgtest.NewDatabase(t)
	svc := adminService(t, dbURL, rURL)
	r, etag := createRuleBody(t, svc, map[string]any{"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 1, "period": "1m"})
	a, _ := newApp(t, map[string]string{"REDIS_URL": rURL, "DATABASE_URL": dbURL, "REDIS_TIMEOUT": "1s"})
	before := a.Cache.Stats()

	// Requests keep arriving during the burst, as they would in
	// production: one right after every write, each a chance to reload.
	const writes = 40
	start := time.Now()
	for i := range writes {
		resp := call(t, svc, "PUT", "/rules/"+r.ID, http.Header{"If-Match": {etag}}, map[string]any{
			"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": i + 2, "period": "1m"}, http.StatusOK)
		etag = resp.Header.Get("Etag")
		a.Cache.Snapshot(context.Background())
	}
	burst := time.Since(start)
	waitFor(t, 5*time.Second, "the last write", func() bool { return limitOf(a) == writes+1 })
	a.Cache.Wait()

	after := a.Cache.Stats()
	reloads := after.Reloads - before.Reloads
	most := uint64(burst/time.Second) + 2 // the first at once, one a second, the last
	t.Logf("%d admin writes in %v: %d reloads, %d snapshot GETs, %d database loads", writes, burst.Round(time.Millisecond),
		reloads, after.SnapshotLoads-before.SnapshotLoads, after.StoreLoads-before.StoreLoads)
	if reloads < 1 || reloads > most {
		t.Errorf("%d writes over %v made %d reloads, want 1..%d", writes, burst, reloads, most)
	}
	if after.StoreLoads != before.StoreLoads || after.SnapshotLoads-before.SnapshotLoads != reloads {
		t.Errorf("database loads %d, snapshot GETs %d for %d reloads; want none and one each", after.StoreLoads-before.StoreLoads, after.SnapshotLoads-before.SnapshotLoads, reloads)
	}
}

func limitOf(a *app.Decider) int64 {
	m := a.Cache.Snapshot(context.Background()).Match("a1b2c3d4e5", "GET", "/", "k")
	if m.API == nil {
		return -1
	}
	return m.API.Limit
}

// TestRedisEmptied: Redis restarted empty (both keys gone: the version
// reads 0) changes nothing on a warm authorizer, which neither reloads nor
// forgets; the next write publishes a newer version, which it loads.
func TestRedisEmptied(t *testing.T) {
	t.Parallel()
	rURL, dbURL := testenv.RedisURL(t), pgtest.NewDatabase(t)
	svc := adminService(t, dbURL, rURL)
	r, etag := createRuleBody(t, svc, map[string]any{"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 10, "period": "1m"})
	a, logs := newApp(t, map[string]string{"REDIS_URL": rURL, "DATABASE_URL": dbURL, "REDIS_TIMEOUT": "1s", "RULES_VERSION_POLL": "20ms"})
	before := a.Cache.Stats()
	vkey, skey := a.Snapshots.Keys()
	if err := a.Redis.Del(context.Background(), vkey, skey).Err(); err != nil {
		t.Fatal(err)
	}
	// Requests go on until the cache has read the emptied version a few
	// times (each read a poll apart); none of the reads may reload.
	testenv.Await(t, 5*time.Second, 2*time.Millisecond, "3 version reads of the emptied Redis", func() bool {
		a.Cache.Snapshot(context.Background())
		st := a.Cache.Stats()
		return st.LastError == nil && st.VersionReads >= before.VersionReads+3
	})
	a.Cache.Wait()
	if st := a.Cache.Stats(); st.Reloads != before.Reloads || st.Version != before.Version || st.LastError != nil || limitOf(a) != 10 {
		t.Errorf("after Redis emptied: %+v, want the same set (version %d), no reload, no error", st, before.Version)
	}
	call(t, svc, "PUT", "/rules/"+r.ID, http.Header{"If-Match": {etag}}, map[string]any{
		"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 11, "period": "1m"}, http.StatusOK)
	waitFor(t, 5*time.Second, "the next write", func() bool { return limitOf(a) == 11 })
	if st := a.Cache.Stats(); st.Origin != rulesync.FromSnapshot || st.Version <= before.Version {
		t.Errorf("after the next write: %+v, want a newer version from the snapshot", st)
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("errors logged:\n%s", logs.String())
	}
}

// TestConcurrentAdminWrites: two admin functions writing at once publish
// in whatever order they finish; Redis ends holding the store's last set,
// never an older one.
func TestConcurrentAdminWrites(t *testing.T) {
	t.Parallel()
	rURL, dbURL := testenv.RedisURL(t), pgtest.NewDatabase(t)
	admins := []*app.Admin{}
	for range 2 {
		a, _ := newAdmin(t, map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": rURL})
		admins = append(admins, a)
	}
	var wg sync.WaitGroup
	for i, a := range admins {
		for j := range 15 {
			wg.Go(func() {
				call(t, a.Service, "POST", "/rules", nil, map[string]any{"api": "a1b2c3d4e5", "route": "*",
					"subject": "s-" + strconv.Itoa(i) + "-" + strconv.Itoa(j), "limit": 5, "period": "1m"}, http.StatusCreated)
			})
		}
	}
	wg.Wait()
	want, err := admins[0].Store.LoadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := admins[1].Snapshots.LoadAll(context.Background())
	if err != nil || got.Version != want.Version || len(got.Rules) != 30 {
		t.Errorf("Redis after 30 racing creates = version %d, %d rules, %v; want the store's version %d, 30 rules", got.Version, len(got.Rules), err, want.Version)
	}
}

// countingLoader counts what an authorizer's loads read from PostgreSQL:
// statements (through a pgx tracer on its pool) and bytes (the loaded set
// as JSON, the size of the rows read).
type countingLoader struct {
	rulesync.Loader
	statements *atomic.Int64
	loads      atomic.Int64
	bytes      atomic.Int64
}

func (c *countingLoader) LoadAll(ctx context.Context) (rules.Set, error) {
	set, err := c.Loader.LoadAll(ctx)
	if err == nil {
		b, _ := json.Marshal(set)
		c.bytes.Add(int64(len(b)))
	}
	c.loads.Add(1)
	return set, err
}

// statementCounter is a pgx.QueryTracer counting statements, BEGIN and
// COMMIT included.
type statementCounter struct{ n atomic.Int64 }

func (s *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}
func (s *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// sizedSnapshots counts the snapshot GETs an authorizer makes and their
// bytes (the value's length when read).
type sizedSnapshots struct {
	*rulesync.Snapshots
	rdb          redis.UniversalClient
	reads, bytes atomic.Int64
}

func (s *sizedSnapshots) LoadAll(ctx context.Context) (rules.Set, error) {
	_, key := s.Keys()
	n, _ := s.rdb.StrLen(ctx, key).Result()
	s.reads.Add(1)
	s.bytes.Add(n)
	return s.Snapshots.LoadAll(ctx)
}

// TestReadsPerAdminWrite measures what one authorizer instance reads per
// admin write, with 1,000 rules in the store: before (every instance
// reloads from PostgreSQL when the version moves) and after (it reloads
// the snapshot from Redis). Run with
//
//	go test -run TestReadsPerAdminWrite -v ./internal/app/
func TestReadsPerAdminWrite(t *testing.T) {
	t.Parallel()
	const seeded, writes = 1000, 8
	rURL, dbURL := testenv.RedisURL(t), pgtest.NewDatabase(t)
	ctx := context.Background()

	// Seed behind the admin API (fast), then publish once.
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	seedStore := postgres.New(pool)
	var ids []string
	for i := range seeded {
		r, err := seedStore.CreateRule(ctx, rules.Rule{API: "a1b2c3d4e5", Route: []string{"*", "GET /orders/{id}"}[i%2],
			Subject: "customer-" + strconv.Itoa(i), Limit: new(int64(100)), Period: rules.Period(time.Minute),
			Description: "per-customer limit"}, "seed")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	adm, _ := newAdmin(t, map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": rURL})
	if _, err := adm.PublishRules(ctx); err != nil {
		t.Fatal(err)
	}

	// One authorizer cache per mode, each on a pool of its own whose
	// statements are counted.
	type instance struct {
		name  string
		stmts *statementCounter
		store *countingLoader
		snaps *sizedSnapshots
		cache *rulesync.Cache
	}
	newInstance := func(name string, useSnapshots bool) *instance {
		cfg, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		in := &instance{name: name, stmts: &statementCounter{}}
		cfg.ConnConfig.Tracer = in.stmts
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		in.store = &countingLoader{Loader: postgres.New(p), statements: &in.stmts.n}
		in.snaps = &sizedSnapshots{Snapshots: adm.Snapshots, rdb: adm.Redis}
		o := rulesync.CacheOptions{Poll: 20 * time.Millisecond, Refresh: time.Hour}
		if useSnapshots {
			o.Snapshots = in.snaps
		}
		if in.cache, err = rulesync.NewCache(ctx, in.store, adm.Snapshots, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(in.cache.Wait)
		return in
	}
	instances := []*instance{newInstance("before: reload from PostgreSQL", false), newInstance("after: reload from the Redis snapshot", true)}
	type counts struct{ stmts, pgBytes, gets, redisBytes, reloads int64 }
	snap := func(in *instance) counts {
		return counts{in.stmts.n.Load(), in.store.bytes.Load(), in.snaps.reads.Load(), in.snaps.bytes.Load(), int64(in.cache.Stats().Reloads)}
	}
	start := map[*instance]counts{}
	for _, in := range instances {
		start[in] = snap(in)
	}

	// Writes spaced wider than the poll, so every write is one reload: the
	// cost per write, not a debounced burst.
	for i := range writes {
		call(t, adm.Service, "PUT", "/rules/"+ids[i], http.Header{"If-Match": {`"1"`}}, map[string]any{
			"api": "a1b2c3d4e5", "route": []string{"*", "GET /orders/{id}"}[i%2], "subject": "customer-" + strconv.Itoa(i),
			"limit": 200, "period": "1m"}, http.StatusOK)
		want, err := adm.Snapshots.Version(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range instances {
			testenv.Await(t, 5*time.Second, 2*time.Millisecond, fmt.Sprintf("%s: version %d loaded", in.name, want), func() bool {
				if in.cache.Stats().Version == want {
					return true
				}
				in.cache.Snapshot(context.Background())
				return false
			})
		}
	}
	for _, in := range instances {
		in.cache.Wait()
		c, s := snap(in), start[in]
		per := func(a, b int64) float64 { return float64(a-b) / writes }
		t.Logf("%s, per admin write (%d rules): %.1f reloads, %.1f PostgreSQL statements, %.0f bytes from PostgreSQL, %.1f snapshot GETs, %.0f bytes from Redis (version polls aside)",
			in.name, seeded, per(c.reloads, s.reloads), per(c.stmts, s.stmts), per(c.pgBytes, s.pgBytes), per(c.gets, s.gets), per(c.redisBytes, s.redisBytes))
	}
	before, after := instances[0], instances[1]
	if c, s := snap(before), start[before]; c.stmts-s.stmts < 4*writes {
		t.Errorf("before: %d statements for %d writes, want at least 4 a write (a full reload each)", c.stmts-s.stmts, writes)
	}
	if c, s := snap(after), start[after]; c.stmts != s.stmts || c.pgBytes != s.pgBytes || c.gets-s.gets != writes {
		t.Errorf("after: %d statements, %d bytes from PostgreSQL, %d snapshot GETs for %d writes; want none, none, one a write", c.stmts-s.stmts, c.pgBytes-s.pgBytes, c.gets-s.gets, writes)
	}
}
