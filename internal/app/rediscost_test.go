package app_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestRedisCost measures what a decision costs Redis, beside a PING and
// go-redis/redis_rate's GCRA script, on one private redis-server: Redis CPU
// per decision (user + sys from INFO cpu, delta over the run) and the
// script's usec_per_call (INFO commandstats, reset before each run), each as
// a ratio to PING's, medians over alternating rounds. It is long, so it runs
// only with SLUICE_REDIS_COST=1:
//
//	SLUICE_REDIS_COST=1 scripts/testenv.sh go test -count=1 -run TestRedisCost -v ./internal/app/
//
// SLUICE_REDIS_COST_N (decisions per run, default 100000) and
// SLUICE_REDIS_COST_ROUNDS (default 5) size it; SLUICE_REDIS_COST_ONLY
// (e.g. "bare") runs only those beside ping and redis_rate. Every run is closed loop, 16
// callers over 10,000 subjects, limits far above demand (every decision is
// an allow). The contenders:
//
//	ping       PING
//	redis_rate redis_rate.Limiter.Allow, one GCRA limit
//	bare       limiter.Allow, one token bucket, no leases, no deny cache
//	deployed   the authorizer's decision as app.New builds it (Decide:
//	           rules cache, deny cache, leases on: LEASE_MAX 64), one
//	           rule for every subject (DEFAULT_LIMIT)
//	deployed-leases-off  the same with LEASE_MAX=1
//	floor      a script of TIME, GET and SET PX with constant values: what
//	           any exact bucket on Redis's clock pays at least
//	empty      a script that returns 1: the cost of EVALSHA itself
func TestRedisCost(t *testing.T) {
	if os.Getenv("SLUICE_REDIS_COST") != "1" {
		t.Skip("SLUICE_REDIS_COST=1 runs it (minutes)")
	}
	n := testenv.EnvInt(t, "SLUICE_REDIS_COST_N", 100_000)
	rounds := testenv.EnvInt(t, "SLUICE_REDIS_COST_ROUNDS", 5)
	const callers, subjects = 16, 10_000

	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: callers, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	names := make([]string, subjects)
	for i := range names {
		names[i] = "cost-subject-" + strconv.Itoa(i)
	}

	rr := redis_rate.NewLimiter(rdb)
	rrLimit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}
	bare := limiter.New(rdb, limiter.Options{Prefix: "bare:", Timeout: time.Second, DenyCacheSize: -1})
	bareBuckets := []limiter.Bucket{{ID: "api", Limit: 1_000_000, Period: time.Second}}

	deployed := func(prefix, leaseMax string) *app.Decider {
		cfg, err := config.FromEnv(func(k string) string {
			return map[string]string{
				"REDIS_URL":     "redis://" + srv.Addr,
				"DEFAULT_LIMIT": "1000000/1s",
				"REDIS_TIMEOUT": "1s",
				"LEASE_MAX":     leaseMax,
			}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.NewDecider(ctx, cfg, app.Options{Out: &testenv.Buffer{}, Redis: rdb, Store: memory.New(), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		return a
	}
	dep, depOff := deployed("dep:", "64"), deployed("depoff:", "1")
	// floor is what any exact bucket on Redis's clock pays at least: TIME,
	// a GET and a SET with an expiry, constant values, in one script.
	floor := redis.NewScript("local t = redis.call('TIME')\nlocal v = redis.call('GET', KEYS[1])\n" +
		"redis.call('SET', KEYS[1], '94608000123456.5 1 1000000', 'PX', '1001')\nreturn '1 1 999999 1 0 0'")
	// empty is what a script call costs before it runs a command.
	empty := redis.NewScript("return 1")
	reqs := make([]authorizer.Request, subjects)
	for i := range reqs {
		reqs[i] = authorizer.Request{API: "cost", Method: "GET", Resource: "/", Headers: map[string]string{"x-api-key": names[i]}}
	}

	type contender struct {
		name, script string // script: its commandstats entry
		op           func(ctx context.Context, i int) error
	}
	cs := []contender{
		{"ping", "ping", func(ctx context.Context, _ int) error { return rdb.Ping(ctx).Err() }},
		{"redis_rate", "evalsha", func(ctx context.Context, i int) error {
			r, err := rr.Allow(ctx, "rr:"+names[i%subjects], rrLimit)
			if err == nil && r.Allowed == 0 {
				err = fmt.Errorf("redis_rate denied")
			}
			return err
		}},
		{"bare", "evalsha", func(ctx context.Context, i int) error {
			d, err := bare.Allow(ctx, limiter.Request{Subject: names[i%subjects], Buckets: bareBuckets, Cost: 1})
			if err == nil && !d.Allowed {
				err = fmt.Errorf("bare denied: %+v", d)
			}
			return err
		}},
		{"deployed", "evalsha", decideAll(dep, reqs)},
		{"deployed-leases-off", "evalsha", decideAll(depOff, reqs)},
		{"floor", "evalsha", func(ctx context.Context, i int) error {
			return floor.Run(ctx, rdb, []string{"floor:" + names[i%subjects]}).Err()
		}},
		{"empty", "evalsha", func(ctx context.Context, i int) error {
			return empty.Run(ctx, rdb, []string{"empty:" + names[i%subjects]}).Err()
		}},
	}

	// Warm up: load the scripts, make every subject's keys, fill the
	// rules cache.
	for _, c := range cs {
		if err := drive(ctx, callers, subjects, c.op); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}

	if only := os.Getenv("SLUICE_REDIS_COST_ONLY"); only != "" {
		cs = slices.DeleteFunc(cs, func(c contender) bool {
			return c.name != "ping" && c.name != "redis_rate" && c.name != "floor" && c.name != "empty" && !slices.Contains(strings.Split(only, ","), c.name)
		})
	}
	type sample struct{ cpu, usec, calls, extra float64 }
	inner := map[string]map[string]testenv.CmdStat{} // the last round's other commands, per decision
	got := map[string][]sample{}
	ratio := map[string][][3]float64{} // per round: CPU over PING's, usec over redis_rate's and over PING's
	for r := range rounds {
		order := slices.Clone(cs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		round := map[string]sample{}
		for _, c := range order {
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			before := testenv.RedisCPU(t, rdb)
			if err := drive(ctx, callers, n, c.op); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			cpu := testenv.RedisCPU(t, rdb) - before
			stats := testenv.CommandStats(t, rdb)
			s := sample{cpu: cpu / float64(n) * 1e6, usec: stats[c.script].Usec, calls: stats[c.script].Calls / float64(n)}
			inner[c.name] = map[string]testenv.CmdStat{}
			for name, st := range stats {
				if name != c.script && !strings.HasPrefix(name, "config") && name != "info" {
					s.extra += st.Calls * st.Usec / float64(n)
					inner[c.name][name] = testenv.CmdStat{Calls: st.Calls / float64(n), Usec: st.Usec}
				}
			}
			round[c.name] = s
			got[c.name] = append(got[c.name], s)
		}
		for _, c := range cs {
			ratio[c.name] = append(ratio[c.name], [3]float64{round[c.name].cpu / round["ping"].cpu, round[c.name].usec / round["redis_rate"].usec,
				round[c.name].usec / round["ping"].usec})
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%d rounds × %d decisions, %d callers, %d subjects; medians (min–max)\n", rounds, n, callers, subjects)
	fmt.Fprintf(&b, "| what | Redis CPU µs/decision | × PING | script usec_per_call | × redis_rate | × PING's | script calls/decision | other commands, µs/decision (inside the script too) |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range cs {
		s := got[c.name]
		col := func(f func(sample) float64) string { return spread(s, f) }
		rc := func(k int) string {
			return spread(ratio[c.name], func(x [3]float64) float64 { return x[k] })
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.name,
			col(func(x sample) float64 { return x.cpu }), rc(0),
			col(func(x sample) float64 { return x.usec }), rc(1), rc(2),
			col(func(x sample) float64 { return x.calls }),
			col(func(x sample) float64 { return x.extra }))
	}
	fmt.Fprintf(&b, "\nother commands (inside the script, or beside it), last round: calls/decision × usec_per_call\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "%-10s", c.name)
		for _, name := range slices.Sorted(maps.Keys(inner[c.name])) {
			st := inner[c.name][name]
			fmt.Fprintf(&b, " %s %.3g×%.3g", name, st.Calls, st.Usec)
		}
		b.WriteByte('\n')
	}
	t.Log("\n" + b.String())
}

// decideAll is a contender that decides reqs through a's authorizer, every
// decision an allow.
func decideAll(a *app.Decider, reqs []authorizer.Request) func(context.Context, int) error {
	return func(ctx context.Context, i int) error {
		res, err := a.Core.Decide(ctx, &reqs[i%len(reqs)])
		if err == nil && !res.Allowed {
			err = fmt.Errorf("denied: %+v", res)
		}
		return err
	}
}

// drive runs op n times from callers goroutines, i = 0..n-1, and returns
// the first error.
func drive(ctx context.Context, callers, n int, op func(context.Context, int) error) error {
	var (
		next  atomic.Int64
		first atomic.Value
		wg    sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := op(ctx, i); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return err
	}
	return nil
}

// spread formats the median of xs by f, with its range.
func spread[T any](xs []T, f func(T) float64) string {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return fmt.Sprintf("%.3g (%.3g–%.3g)", med, v[0], v[len(v)-1])
}
