package app_test

// Failovers under load: every test here runs N goroutines deciding through
// the graph app.New builds (the real timeout, breaker and rules cache) while
// a private server it started is killed, restarted, resharded or slowed,
// and logs the figures RELIABILITY.md quotes: the gap (the longest stretch
// with no decision answered by Redis), fail-open counts, latencies, and
// calls the open breaker skipped.

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The two rules of the load: every subject its own buckets, the route rule
// the stricter.
const (
	apiRate, apiBurst     = 20, 30 // per second
	routeRate, routeBurst = 10, 10
)

// failoverDecider builds the decision path from env as a Lambda would, on
// o's store and key prefix, logging to the returned buffer.
func failoverDecider(t *testing.T, env map[string]string, o app.Options) (*app.Decider, *testenv.Buffer) {
	t.Helper()
	cfg, out := failoverConfig(t, env, &o)
	a, err := app.NewDecider(context.Background(), cfg, o)
	if err != nil {
		t.Fatalf("app.NewDecider: %v", err)
	}
	t.Cleanup(a.Close)
	return a, out
}

// failoverAdmin is failoverDecider for the full admin API.
func failoverAdmin(t *testing.T, env map[string]string, o app.Options) (*app.Admin, *testenv.Buffer) {
	t.Helper()
	cfg, out := failoverConfig(t, env, &o)
	a, err := app.NewAdmin(context.Background(), cfg, app.AdminFull, o)
	if err != nil {
		t.Fatalf("app.NewAdmin: %v", err)
	}
	t.Cleanup(a.Close)
	return a, out
}

func failoverConfig(t *testing.T, env map[string]string, o *app.Options) (config.Config, *testenv.Buffer) {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config.FromEnv: %v", err)
	}
	out := &testenv.Buffer{}
	o.Out, o.Function = out, "failover-test"
	return cfg, out
}

// logOnFailure logs the apps' logs when the test has failed.
func logOnFailure(t *testing.T, logs ...*testenv.Buffer) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range logs {
				t.Logf("app log:\n%s", l)
			}
		}
	})
}

// twoRules stores the load's API-wide and route rules.
func twoRules(t *testing.T, st store.Store) {
	t.Helper()
	for _, r := range []rules.Rule{
		{API: loadAPI, Route: rules.Wildcard, Subject: rules.Wildcard, Limit: new(int64(apiRate)), Burst: new(int64(apiBurst)), Period: rules.Period(time.Second), Enabled: new(true)},
		{API: loadAPI, Route: loadMethod + " " + loadResource, Subject: rules.Wildcard, Limit: new(int64(routeRate)), Burst: new(int64(routeBurst)), Period: rules.Period(time.Second), Enabled: new(true)},
	} {
		if _, err := st.CreateRule(context.Background(), r, "failover-test"); err != nil {
			t.Fatalf("CreateRule: %v", err)
		}
	}
}

// loadSubjects returns n subjects of this test.
func loadSubjects(t *testing.T, n int) []string {
	t.Helper()
	run := testenv.Random(t)
	s := make([]string, n)
	for i := range s {
		s[i] = "fo-" + run + "-" + strconv.Itoa(i)
	}
	return s
}

// probe makes one decision of the load's request for a fresh subject; a
// fail-open decision is returned too (it names the rule and its limit).
func probe(t *testing.T, a *app.Decider) authorizer.Result {
	t.Helper()
	res, err := a.Core.Decide(context.Background(), &authorizer.Request{API: loadAPI, Method: loadMethod, Resource: loadResource,
		Headers: map[string]string{"x-api-key": "fo-probe-" + testenv.Random(t)}})
	if err != nil && !res.FailOpen {
		t.Fatalf("Decide: %v", err)
	}
	return res
}

// adminCall makes one admin request through the Service, as the admin
// Lambdas do.
func adminCall(svc *admin.Service, method, path string, hdr http.Header, body any) adminResponse {
	b, _ := json.Marshal(body)
	if hdr == nil {
		hdr = http.Header{}
	}
	hdr.Set("Content-Type", "application/json")
	return serveAdmin(svc, method, path, hdr, b, "failover-test")
}

// TestFailoverPostgresRestart stops the rules database mid-load: decisions
// go on (no database on the hot path), admin writes answer 503
// problem+json with Retry-After and leave nothing behind, and once the
// database is back a write succeeds and reaches the authorizer.
func TestFailoverPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts a private PostgreSQL under load: skipped with -short (make check)")
	}
	pg := pgtest.StartServer(t)
	rURL := testenv.RedisURL(t)
	prefix := testenv.Prefix(t, "failover")
	testenv.DeleteKeys(t, testenv.Redis(t), prefix)
	// The fault here is the database's: a 1s Redis budget keeps a busy
	// test machine's Redis hiccups out of the figures.
	env := map[string]string{"REDIS_URL": rURL, "DATABASE_URL": pg.URL, "REDIS_POOL_SIZE": "8", "RULES_VERSION_POLL": "100ms", "REDIS_TIMEOUT": "1s"}
	adm, admLog := failoverAdmin(t, env, app.Options{Prefix: prefix})
	twoRules(t, adm.Store)
	dec, decLog := failoverDecider(t, env, app.Options{Prefix: prefix})
	logOnFailure(t, admLog, decLog)
	if st := dec.Cache.Stats(); st.Rules != 2 {
		t.Fatalf("rules loaded at init = %+v, want 2\n%s", st, decLog)
	}
	var route rules.Rule
	page, err := adm.Store.ListRules(context.Background(), rules.Filter{Route: loadMethod + " " + loadResource})
	if err != nil || len(page.Rules) != 1 {
		t.Fatalf("ListRules(route) = %+v, %v; want one rule", page, err)
	}
	route = page.Rules[0]

	ld := startLoad(t, dec, 8, loadSubjects(t, 32), time.Millisecond)
	ld.awaitByRedis(t, 500, "before the database stops")
	pg.Stop()
	down := ld.since()

	// Admin writes while the database is down: every one a 503 problem.
	writes := []struct {
		method, path string
		hdr          http.Header
		body         any
	}{
		{"POST", "/rules", nil, map[string]any{"api": loadAPI, "route": "POST /orders", "subject": "*", "limit": 5, "period": "1s"}},
		{"PUT", "/rules/" + route.ID, http.Header{"If-Match": {`"1"`}}, map[string]any{"api": loadAPI, "route": route.Route, "subject": "*", "limit": 3, "period": "1s"}},
		{"DELETE", "/rules/" + route.ID, http.Header{"If-Match": {`"1"`}}, nil},
		{"POST", "/plans", nil, map[string]any{"name": "gold", "limit": 5, "period": "1s"}},
	}
	for _, w := range writes {
		resp := adminCall(adm.Service, w.method, w.path, w.hdr, w.body)
		var p struct {
			Status int    `json:"status"`
			Type   string `json:"type"`
		}
		_ = json.Unmarshal(resp.Body, &p)
		if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			resp.Header.Get("Content-Type") != "application/problem+json" || p.Status != 503 {
			t.Errorf("%s %s with the database down = %d %v %s, want a 503 problem+json with Retry-After",
				w.method, w.path, resp.Status, resp.Header, resp.Body)
		}
	}
	// Decisions keep flowing meanwhile: the outage lasts until Redis has
	// answered plenty of them (the check below wants 100 in it).
	ld.awaitByRedis(t, 2000, "with the database down")
	pg.Start(t)
	up := ld.since()

	// Everything resumes: a write succeeds and reaches the authorizer.
	resp := adminCall(adm.Service, "PUT", "/rules/"+route.ID, http.Header{"If-Match": {`"1"`}},
		map[string]any{"api": loadAPI, "route": route.Route, "subject": "*", "limit": 3, "period": "1s"})
	if resp.Status != http.StatusOK {
		t.Fatalf("PUT after the restart = %d %s, want 200", resp.Status, resp.Body)
	}
	changed := time.Now()
	waitFor(t, 15*time.Second, "the change made after the restart reaches the authorizer", func() bool {
		r := probe(t, dec)
		return r.Rule == route.ID && r.Limit == 3
	})
	t.Logf("database restart: admin update to first decision by it %v", time.Since(changed).Round(time.Millisecond))
	ld.awaitByRedis(t, 300, "after the restart")
	rep := ld.finish()

	during := rep.window(down, up)
	t.Logf("database down %v: %s", (up - down).Round(time.Millisecond), summary(during))
	t.Logf("whole load %v: %s", rep.length.Round(time.Millisecond), summary(rep.samples))
	gap, at := rep.gap()
	t.Logf("gap with no decision by Redis: %v (at %v)", gap.Round(time.Millisecond), at.Round(time.Millisecond))
	// The database is not on the hot path: decisions by Redis went on
	// throughout the outage.
	if n := count(during, byRedis); n < 100 {
		t.Errorf("%d decisions answered by Redis while the database was down, want them to go on (>= 100)", n)
	}
	if n := count(rep.samples, failed); n != 0 {
		t.Errorf("%d decisions errored", n)
	}
	if gap >= up-down {
		t.Errorf("gap with no decision by Redis = %v, as long as the outage (%v): the database is not on the hot path", gap, up-down)
	}

	// No partial rows: the rules and the audit log agree, and the failed
	// writes left nothing (2 creates + 1 update = 3 audit rows).
	conn, err := pgx.Connect(context.Background(), pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var nRules, nPlans, nAudit, mismatched int
	err = conn.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM rules), (SELECT count(*) FROM plans), (SELECT count(*) FROM audit_log),
		(SELECT count(*) FROM rules r WHERE r.version <>
			(SELECT count(*) FROM audit_log a WHERE a.kind = 'rule' AND a.target_id = r.id::text))`).Scan(&nRules, &nPlans, &nAudit, &mismatched)
	if err != nil {
		t.Fatalf("consistency query: %v", err)
	}
	if nRules != 2 || nPlans != 0 || nAudit != 3 || mismatched != 0 {
		t.Errorf("after the restart: %d rules, %d plans, %d audit rows, %d rules whose version disagrees with their audit rows; want 2, 0, 3, 0",
			nRules, nPlans, nAudit, mismatched)
	}
	if strings.Contains(admLog.String(), `"status":500`) {
		t.Errorf("an admin request answered 500:\n%s", admLog.String())
	}
}

// redisTime is the Redis server's TIME at addr.
func redisTime(t *testing.T, addr string) time.Time {
	t.Helper()
	c := testenv.Client(t, "redis://"+addr, nil)
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME on %s: %v", addr, err)
	}
	return now
}

// warm fills a's Redis pool with n connections, as a warm Lambda's is:
// the load starts from a steady state, not from n concurrent dials.
func warm(t *testing.T, a *app.Decider, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := a.Redis.Do(ctx, "DEBUG", "SLEEP", "0.05").Err(); err != nil {
				t.Errorf("warm-up: %v", err)
			}
		})
	}
	wg.Wait()
}

// waitRedisDecision waits until a decision of a is answered by Redis
// again, and returns how long that took.
func waitRedisDecision(t *testing.T, a *app.Decider, within time.Duration) time.Duration {
	t.Helper()
	return testenv.Await(t, within, 5*time.Millisecond, "a decision answered by Redis", func() bool {
		res, err := a.Core.Decide(context.Background(), &authorizer.Request{API: loadAPI, Method: loadMethod, Resource: loadResource,
			Headers: map[string]string{"x-api-key": "fo-probe-" + testenv.Random(t)}})
		return err == nil && !res.FailOpen
	})
}

// watchPromotion subscribes to the +switch-master events of the sentinel
// at addr and, once it announces want as the primary of name, sends the
// load's clock then (0 when it has not within 20s). Call it before the
// failover starts: the event is not repeated.
func watchPromotion(t *testing.T, addr, name, want string, ld *load) <-chan time.Duration {
	t.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Protocol: 2})
	sub := sc.Subscribe(context.Background(), "+switch-master")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatalf("SUBSCRIBE +switch-master on %s: %v", addr, err)
	}
	ch := make(chan time.Duration, 1)
	go func() {
		defer sc.Close()
		defer sub.Close()
		timeout := time.After(20 * time.Second)
		msgs := sub.Channel()
		for {
			select {
			case m := <-msgs:
				// <name> <old ip> <old port> <new ip> <new port>
				f := strings.Fields(m.Payload)
				if len(f) == 5 && f[0] == name && net.JoinHostPort(f[3], f[4]) == want {
					ch <- ld.since()
					return
				}
			case <-timeout:
				ch <- 0
				return
			}
		}
	}()
	return ch
}

// TestFailoverSentinel kills the primary of a Sentinel-watched pair under
// load: the failover client built from REDIS_MODE=sentinel follows the
// promotion, decisions fail open (counted) during the gap and are answered
// by the new primary after it.
func TestFailoverSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel-watched pair and kills the primary: skipped with -short (make check)")
	}
	primary := testenv.StartRedis(t)
	replica, sentinels := testenv.StartSentinel(t, primary, "sluice", 3)
	url := "redis://" + sentinels[0].Addr + "/0?master_name=sluice&addr=" + sentinels[1].Addr + "&addr=" + sentinels[2].Addr
	st := memory.New()
	twoRules(t, st)
	a, logs := failoverDecider(t, map[string]string{"REDIS_MODE": "sentinel", "REDIS_URL": url, "REDIS_POOL_SIZE": "8"},
		app.Options{Store: st})
	logOnFailure(t, logs)
	if res := probe(t, a); res.FailOpen || res.Limit != routeRate {
		t.Fatalf("decision before the failover = %+v, want one by Redis with the route rule", res)
	}

	warm(t, a, 8)
	t0 := redisTime(t, primary.Addr)
	ld := startLoad(t, a, 8, loadSubjects(t, 32), time.Millisecond)
	promoted := watchPromotion(t, sentinels[0].Addr, "sluice", replica.Addr, ld)
	ld.awaitByRedis(t, 1000, "before the kill")
	before := a.Limiter.Stats()
	primary.Kill()
	killed := ld.since()
	back := waitRedisDecision(t, a, 20*time.Second)
	ld.awaitByRedis(t, 1000, "by the new primary")
	rep := ld.finish()
	t1 := redisTime(t, replica.Addr)
	after := a.Limiter.Stats()
	if p := <-promoted; p > 0 {
		t.Logf("sentinels reported the replica as primary %v after the kill; the limiter's first decision by it %v after that (the breaker probes once per %v)",
			(p - killed).Round(time.Millisecond), (killed + back - p).Round(time.Millisecond), limiter.DefaultBreakerCooldown)
	}

	gap, at := rep.gap()
	during := rep.window(killed, killed+back)
	t.Logf("sentinel failover: primary killed at %v; first decision by the new primary %v later", killed.Round(time.Millisecond), back.Round(time.Millisecond))
	t.Logf("gap with no decision by Redis: %v ms (from %v)", gap.Milliseconds(), at.Round(time.Millisecond))
	t.Logf("during the failover: %s", summary(during))
	t.Logf("whole load %v: %s", rep.length.Round(time.Millisecond), summary(rep.samples))
	t.Logf("limiter: %d Redis calls failed, %d skipped by the open breaker, breaker opened %d times, closed %d times; now %s",
		after.Errors-before.Errors, after.Skipped-before.Skipped, after.BreakerOpened-before.BreakerOpened, after.BreakerClosed-before.BreakerClosed, after.Breaker)
	checkAdmission(t, rep, routeBurst, routeRate, t0, t1)

	if n := count(rep.samples, failed); n != 0 {
		t.Errorf("%d decisions errored without failing open; the rules fail open", n)
	}
	// Recovered (waitRedisDecision saw the new primary answer): the
	// breaker closed again. It may reopen on a burst of timeouts on a
	// loaded machine, so its state at the end is not checked.
	if after.BreakerClosed == before.BreakerClosed {
		t.Errorf("the breaker never closed after the failover: %+v", after)
	}
	if t.Failed() {
		t.Logf("errors:\n%s", strings.Join(ld.errors(), "\n"))
	}
	if gap > 10*time.Second {
		t.Errorf("gap = %v, want the failover followed within 10s", gap)
	}
}

// clusterNodes maps each slot range's first slot to its master's id, from
// CLUSTER SHARDS on addr, and returns the id of the node at each address.
func clusterIDs(t *testing.T, addrs []string) []string {
	t.Helper()
	ids := make([]string, len(addrs))
	for i, a := range addrs {
		c := testenv.Client(t, "redis://"+a, nil)
		id, err := c.Do(context.Background(), "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatalf("CLUSTER MYID on %s: %v", a, err)
		}
		ids[i] = id
	}
	return ids
}

// slotOwner returns the address of the master serving slot.
func slotOwner(t *testing.T, c *redis.ClusterClient, slot int) string {
	t.Helper()
	shards, err := c.ClusterShards(context.Background()).Result()
	if err != nil {
		t.Fatalf("CLUSTER SHARDS: %v", err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if int64(slot) < r.Start || int64(slot) > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" {
					return net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
				}
			}
		}
	}
	t.Fatalf("slot %d has no owner: %+v", slot, shards)
	return ""
}

// subjectsInSlots returns n subjects whose buckets hash to slots below
// maxSlot (the bucket keys' hash tag is the subject hash).
func subjectsInSlots(t *testing.T, c *redis.ClusterClient, n, maxSlot int) []string {
	t.Helper()
	run := testenv.Random(t)
	var out []string
	for batch := 0; len(out) < n && batch < 20; batch++ {
		pipe := c.Pipeline()
		cands := make([]string, 500)
		cmds := make([]*redis.IntCmd, len(cands))
		for i := range cands {
			cands[i] = "fo-" + run + "-" + strconv.Itoa(batch*len(cands)+i)
			cmds[i] = pipe.ClusterKeySlot(context.Background(), "{"+limiter.SubjectHash(cands[i])+"}")
		}
		if _, err := pipe.Exec(context.Background()); err != nil {
			t.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		for i, cmd := range cmds {
			if cmd.Val() < int64(maxSlot) && len(out) < n {
				out = append(out, cands[i])
			}
		}
	}
	if len(out) < n {
		t.Fatalf("found %d subjects in slots below %d, want %d", len(out), maxSlot, n)
	}
	return out
}

// TestFailoverClusterReshard moves the slots of the subjects under load
// to another master with redis-cli --cluster reshard: two-bucket decisions
// follow MOVED and ASK, and no subject gets more than its buckets allow.
func TestFailoverClusterReshard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-master Redis Cluster and reshards it under load: skipped with -short (make check)")
	}
	const (
		moved      = 600 // slots 0..moved-1, which --cluster reshard takes first
		fillerKeys = 300 // per subject
	)
	servers := testenv.StartCluster(t, 3)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	url := "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
	st := memory.New()
	twoRules(t, st)
	a, logs := failoverDecider(t, map[string]string{"REDIS_MODE": "cluster", "REDIS_URL": url, "REDIS_POOL_SIZE": "8"},
		app.Options{Store: st})
	logOnFailure(t, logs)
	cc := a.Redis.(*redis.ClusterClient)
	from := slotOwner(t, cc, 0)
	to := addrs[0]
	if to == from {
		to = addrs[1]
	}
	ids := clusterIDs(t, []string{from, to})
	subjects := subjectsInSlots(t, cc, 32, moved)
	// Filler keys in the subjects' slots make each of those slots take
	// many MIGRATE batches to move, so that decisions meet the slot half
	// moved (ASK) instead of only before or after (MOVED).
	pipe := cc.Pipeline()
	for _, s := range subjects {
		for i := range fillerKeys {
			pipe.Set(context.Background(), "filler:{"+limiter.SubjectHash(s)+"}:"+strconv.Itoa(i), "x", time.Minute)
		}
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatalf("filler keys: %v", err)
	}

	warm(t, a, 8)
	t0 := redisTime(t, from)
	ld := startLoad(t, a, 8, subjects, time.Millisecond)
	ld.awaitByRedis(t, 1000, "before the reshard")
	begin := ld.since()
	reshard := exec.Command(testenv.Binary(t, "redis-cli"), "--cluster", "reshard", from,
		"--cluster-from", ids[0], "--cluster-to", ids[1], "--cluster-slots", strconv.Itoa(moved), "--cluster-yes")
	out, err := reshard.CombinedOutput()
	end := ld.since()
	if err != nil {
		t.Fatalf("redis-cli --cluster reshard: %v\n%s", err, out)
	}
	ld.awaitByRedis(t, 500, "after the reshard")
	rep := ld.finish()
	t1 := redisTime(t, from)

	for _, slot := range []int{0, moved - 1} {
		if got := slotOwner(t, cc, slot); got != to {
			t.Fatalf("slot %d is served by %s after the reshard, want %s", slot, got, to)
		}
	}
	during := rep.window(begin, end)
	var subjDuring []sample
	for _, s := range during {
		if s.subject >= 0 {
			subjDuring = append(subjDuring, s)
		}
	}
	gap, at := rep.gap()
	t.Logf("reshard of %d slots %s → %s took %v", moved, from, to, (end - begin).Round(time.Millisecond))
	t.Logf("during the reshard: %s", summary(during))
	t.Logf("of which the moved subjects: %s", summary(subjDuring))
	t.Logf("gap with no decision by Redis: %v ms (from %v)", gap.Milliseconds(), at.Round(time.Millisecond))
	t.Logf("whole load %v: %s", rep.length.Round(time.Millisecond), summary(rep.samples))
	st1 := a.Limiter.Stats()
	t.Logf("limiter: %d Redis calls, %d failed, %d skipped by the open breaker, breaker opened %d times", st1.RedisCalls, st1.Errors, st1.Skipped, st1.BreakerOpened)
	// The redirections the source answered (MOVED once a slot is gone,
	// ASK while it moves) and the multi-key refusals (TRYAGAIN: a
	// subject's buckets split between the nodes mid-move).
	redirects := 0
	for _, a := range []string{from, to} {
		info, err := testenv.Client(t, "redis://"+a, nil).Info(context.Background(), "errorstats").Result()
		if err != nil {
			t.Fatalf("INFO on %s: %v", a, err)
		}
		var lines []string
		for l := range strings.SplitSeq(info, "\r\n") {
			for _, e := range []string{"MOVED", "ASK", "TRYAGAIN"} {
				if n, ok := strings.CutPrefix(l, "errorstat_"+e+":count="); ok {
					lines = append(lines, e+"="+n)
					if e != "TRYAGAIN" {
						k, _ := strconv.Atoi(n)
						redirects += k
					}
				}
			}
		}
		t.Logf("%s answered %s", a, strings.Join(lines, " "))
	}
	checkAdmission(t, rep, routeBurst, routeRate, t0, t1)
	if redirects == 0 {
		t.Errorf("no MOVED or ASK was answered: the load did not meet the moving slots")
	}
	// A moved subject is decided by its new node (the breaker, if a burst
	// of failures opened it, closes on its next probe).
	moverReq := &authorizer.Request{API: loadAPI, Method: loadMethod, Resource: loadResource, Headers: map[string]string{"x-api-key": subjects[0]}}
	waitFor(t, 5*time.Second, "a moved subject decided by its new node", func() bool {
		res, err := a.Core.Decide(context.Background(), moverReq)
		return err == nil && !res.FailOpen
	})
	if n := count(rep.samples, failed); n != 0 {
		t.Errorf("%d decisions errored without failing open", n)
	}
	if errs := ld.errors(); t.Failed() || len(errs) > 0 {
		t.Logf("%d errors (breaker-open ones aside), the first:\n%s", len(errs), strings.Join(errs[:min(len(errs), 10)], "\n"))
	}
}

// TestFailoverSlowRedis puts a proxy that holds every reply for 200ms in
// front of Redis under load: each decision still returns within the
// REDIS_TIMEOUT budget (25ms), the breaker opens and decisions stop paying
// that budget (the calls are skipped), and once the delay is gone a probe
// closes the breaker again.
func TestFailoverSlowRedis(t *testing.T) {
	const delay = 200 * time.Millisecond
	srv := testenv.StartRedis(t)
	px := testenv.NewProxy(t, srv.Addr)
	px.Up(t)
	st := memory.New()
	twoRules(t, st)
	a, logs := failoverDecider(t, map[string]string{"REDIS_URL": "redis://" + px.Addr(), "REDIS_POOL_SIZE": "8"},
		app.Options{Store: st})
	logOnFailure(t, logs)
	timeout := config.DefaultRedisTimeout
	warm(t, a, 8)

	ld := startLoad(t, a, 8, loadSubjects(t, 32), time.Millisecond)
	ld.awaitByRedis(t, 800, "before the delay")
	before := a.Limiter.Stats()
	px.SetDelay(delay)
	slow := ld.since()
	time.Sleep(2500 * time.Millisecond) // sleep: Redis stays slow this long; the checks below are rates over it, against the breaker's cooldown
	during := a.Limiter.Stats()
	px.SetDelay(0)
	fast := ld.since()
	waitRedisDecision(t, a, 5*time.Second)
	ld.awaitByRedis(t, 300, "after the delay")
	rep := ld.finish()
	after := a.Limiter.Stats()

	slowS := rep.window(slow, fast)
	// From 300ms into the slow phase on, the breaker has had time to open:
	// only its probes (one per cooldown) and the calls already in flight
	// when it opened should pay the timeout.
	settled := rep.window(slow+300*time.Millisecond, fast)
	paid := 0
	for _, s := range settled {
		if s.took >= timeout*4/5 {
			paid++
		}
	}
	t.Logf("before the delay: %s", summary(rep.window(0, slow)))
	t.Logf("replies delayed %v for %v: %s", delay, (fast - slow).Round(time.Millisecond), summary(slowS))
	t.Logf("breaker settled (from +300ms): %s; %d of %d paid ≥ %v", summary(settled), paid, len(settled), timeout*4/5)
	t.Logf("after the delay: %s; first decision by Redis %v after it was removed",
		summary(rep.window(fast, rep.length)), (rep.firstByRedis(fast) - fast).Round(time.Millisecond))
	t.Logf("limiter while slow: %d Redis calls, %d failed, %d skipped by the open breaker, breaker opened %d times",
		during.RedisCalls-before.RedisCalls, during.Errors-before.Errors, during.Skipped-before.Skipped, during.BreakerOpened-before.BreakerOpened)
	t.Logf("limiter after: breaker closed %d times, now %s; %d skipped in all", after.BreakerClosed-before.BreakerClosed, after.Breaker, after.Skipped)

	// The budget bounds every decision: p99 within the timeout plus
	// scheduling slack (2 shared cores, -race).
	if p99 := quantile(slowS, 0.99); p99 > timeout+25*time.Millisecond {
		t.Errorf("p99 with Redis slow = %v, want <= timeout %v + 25ms", p99, timeout)
	}
	if during.Skipped == before.Skipped || during.BreakerOpened == before.BreakerOpened {
		t.Errorf("the breaker did not open or skipped no call while Redis was slow: %+v", during)
	}
	if paid*100 > len(settled) {
		t.Errorf("%d of %d decisions paid the timeout once the breaker had opened, want under 1%%", paid, len(settled))
	}
	if n := count(rep.samples, failed); n != 0 {
		t.Errorf("%d decisions errored without failing open", n)
	}
	if after.BreakerClosed == before.BreakerClosed {
		t.Errorf("the breaker did not close once the delay was gone: %+v", after)
	}
}

// TestFailoverRedisRestartedEmpty restarts Redis empty (no persistence)
// under load. Decisions fail open while it is down and nothing panics;
// buckets restart full, so a subject that was denied is allowed again;
// and the published rules version and snapshot are gone too, yet a rule
// change made after the restart reaches every warm instance — also one
// that was idle through the restart (a frozen Lambda): the version comes
// from the store, so the next publish is newer than anything seen.
func TestFailoverRedisRestartedEmpty(t *testing.T) {
	srv := testenv.StartRedis(t)
	env := map[string]string{"REDIS_URL": "redis://" + srv.Addr, "DATABASE_URL": pgtest.NewDatabase(t),
		"REDIS_POOL_SIZE": "8", "RULES_VERSION_POLL": "100ms",
		// The victim's deny below must outlive the restart in the busy
		// instance's cache (1s by default).
		"DENY_CACHE_MAX_AGE": "1m"}
	adm, admLog := failoverAdmin(t, env, app.Options{})
	created := adminCall(adm.Service, "POST", "/rules", nil,
		map[string]any{"api": loadAPI, "route": "*", "subject": "*", "limit": 3, "period": "1m"})
	if created.Status != http.StatusCreated {
		t.Fatalf("POST /rules = %d %s", created.Status, created.Body)
	}
	var rule rules.Rule
	if err := json.Unmarshal(created.Body, &rule); err != nil {
		t.Fatal(err)
	}
	busy, busyLog := failoverDecider(t, env, app.Options{})
	idle, idleLog := failoverDecider(t, env, app.Options{})
	logOnFailure(t, admLog, busyLog, idleLog)
	for _, a := range []*app.Decider{busy, idle} {
		if res := probe(t, a); res.Rule != rule.ID || res.Limit != 3 {
			t.Fatalf("decision before the restart = rule %s limit %d, want %s limit 3", res.Rule, res.Limit, rule.ID)
		}
	}
	seen := idle.Cache.Stats().Version

	// A subject spends its 3 tokens through the busy instance.
	victim := &authorizer.Request{API: loadAPI, Method: loadMethod, Resource: loadResource,
		Headers: map[string]string{"x-api-key": "victim-" + testenv.Random(t)}}
	for i := range 4 {
		res, err := busy.Core.Decide(context.Background(), victim)
		if err != nil || res.Allowed != (i < 3) {
			t.Fatalf("victim decision %d = allowed %v, %v; want allowed %v", i+1, res.Allowed, err, i < 3)
		}
	}

	warm(t, busy, 8)
	ld := startLoad(t, busy, 8, loadSubjects(t, 32), time.Millisecond)
	ld.awaitByRedis(t, 500, "before the restart")
	down := ld.since()
	srv.Restart(t)
	up := ld.since()
	back := waitRedisDecision(t, busy, 10*time.Second)
	ld.awaitByRedis(t, 500, "after the restart")
	rep := ld.finish()
	gap, at := rep.gap()
	t.Logf("redis restarted empty in %v; first decision by it %v later", (up - down).Round(time.Millisecond), back.Round(time.Millisecond))
	t.Logf("gap with no decision by Redis: %v ms (from %v)", gap.Milliseconds(), at.Round(time.Millisecond))
	t.Logf("around the restart: %s", summary(rep.window(down, up+back)))
	t.Logf("whole load %v: %s", rep.length.Round(time.Millisecond), summary(rep.samples))
	st := busy.Limiter.Stats()
	t.Logf("limiter: %d Redis calls failed, %d skipped by the open breaker, breaker opened %d times", st.Errors, st.Skipped, st.BreakerOpened)
	if n := count(rep.samples, failed); n != 0 {
		t.Errorf("%d decisions errored without failing open", n)
	}
	if v, err := testenv.Client(t, "redis://"+srv.Addr, nil).Get(context.Background(), "sl:{rules}:version").Result(); err != redis.Nil {
		t.Fatalf("rules version after the restart = %q, %v; want none", v, err)
	}

	// The busy instance still denies the victim from its deny cache, until
	// the retry-after Redis gave it or DENY_CACHE_MAX_AGE, whichever comes
	// first: a cache only ever denies what Redis denied, for no longer
	// than Redis said.
	if res, _ := busy.Core.Decide(context.Background(), victim); res.Allowed || !res.Cached {
		t.Errorf("victim on the busy instance after the restart = allowed %v cached %v, want denied from its deny cache", res.Allowed, res.Cached)
	}

	// A rule change after the restart reaches both instances.
	resp := adminCall(adm.Service, "PUT", "/rules/"+rule.ID, http.Header{"If-Match": {created.Header.Get("Etag")}},
		map[string]any{"api": loadAPI, "route": "*", "subject": "*", "limit": 7, "period": "1m"})
	if resp.Status != http.StatusOK {
		t.Fatalf("PUT after the restart = %d %s", resp.Status, resp.Body)
	}
	v, err := testenv.Client(t, "redis://"+srv.Addr, nil).Get(context.Background(), "sl:{rules}:version").Int64()
	t.Logf("rules version: %d before the restart (as the idle instance saw it), %d (%v) after the first write since", seen, v, err)
	for name, a := range map[string]*app.Decider{"busy": busy, "idle": idle} {
		waitFor(t, 3*time.Second, "the change after the restart on the "+name+" instance", func() bool { return probe(t, a).Limit == 7 })
	}

	// Buckets restarted full: the victim, denied before, is allowed by the
	// instance that holds no deny for it, with the whole new limit left.
	res, err := idle.Core.Decide(context.Background(), victim)
	if err != nil || !res.Allowed || res.Remaining != 6 {
		t.Errorf("victim after the restart = allowed %v remaining %d, %v; want allowed with 6 of 7 left (a full bucket)", res.Allowed, res.Remaining, err)
	}
}
