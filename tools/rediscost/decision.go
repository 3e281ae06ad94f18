package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/store/memory"
)

// Every run is closed loop: callers goroutines over subjects subjects.
const callers, subjects = 16, 10_000

// decisionCost runs the decision measurement.
func decisionCost(args []string) error {
	fs := flag.NewFlagSet("rediscost decision", flag.ExitOnError)
	n := fs.Int("n", 100_000, "decisions per run")
	rounds := fs.Int("rounds", 5, "rounds; each runs every contender once, the order reversed every other round")
	only := fs.String("only", "", "comma-separated contenders to run beside ping, redis_rate, floor and empty (e.g. bare)")
	_ = fs.Parse(args)
	if *n < 1 || *rounds < 1 || fs.NArg() != 0 {
		return errUsage
	}
	return run(context.Background(), os.Stdout, *n, *rounds, *only)
}

type contender struct {
	name, script string // script: its commandstats entry
	op           func(ctx context.Context, i int) error
}

func run(ctx context.Context, w io.Writer, n, rounds int, only string) error {
	addr, stop, err := startRedis(ctx)
	if err != nil {
		return err
	}
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: callers, ContextTimeoutEnabled: true})
	defer rdb.Close()
	cs, closeAll, err := contenders(ctx, rdb, addr)
	defer closeAll()
	if err != nil {
		return err
	}
	// Warm up: load the scripts, make every subject's keys, fill the
	// rules cache.
	for _, c := range cs {
		if err := drive(ctx, callers, subjects, c.op); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	if only != "" {
		cs = slices.DeleteFunc(cs, func(c contender) bool {
			return c.name != "ping" && c.name != "redis_rate" && c.name != "floor" && c.name != "empty" && !slices.Contains(strings.Split(only, ","), c.name)
		})
	}

	type sample struct{ cpu, usec, calls, extra float64 }
	inner := map[string]map[string]cmdStat{} // the last round's other commands, per decision
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
				return err
			}
			before, err := redisCPU(ctx, rdb)
			if err != nil {
				return err
			}
			if err := drive(ctx, callers, n, c.op); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			after, err := redisCPU(ctx, rdb)
			if err != nil {
				return err
			}
			stats, err := commandStats(ctx, rdb)
			if err != nil {
				return err
			}
			s := sample{cpu: (after - before) / float64(n) * 1e6, usec: stats[c.script].Usec, calls: stats[c.script].Calls / float64(n)}
			inner[c.name] = map[string]cmdStat{}
			for name, st := range stats {
				if name != c.script && !strings.HasPrefix(name, "config") && name != "info" {
					s.extra += st.Calls * st.Usec / float64(n)
					inner[c.name][name] = cmdStat{Calls: st.Calls / float64(n), Usec: st.Usec}
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

	fmt.Fprintf(w, "%d rounds × %d decisions, %d callers, %d subjects; medians (min–max)\n\n", rounds, n, callers, subjects)
	fmt.Fprintf(w, "| what | Redis CPU µs/decision | × PING | script usec_per_call | × redis_rate | × PING's | script calls/decision | other commands, µs/decision (inside the script too) |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range cs {
		s := got[c.name]
		col := func(f func(sample) float64) string { return spread(s, f) }
		rc := func(k int) string {
			return spread(ratio[c.name], func(x [3]float64) float64 { return x[k] })
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.name,
			col(func(x sample) float64 { return x.cpu }), rc(0),
			col(func(x sample) float64 { return x.usec }), rc(1), rc(2),
			col(func(x sample) float64 { return x.calls }),
			col(func(x sample) float64 { return x.extra }))
	}
	fmt.Fprintf(w, "\nother commands (inside the script, or beside it), last round: calls/decision × usec_per_call\n")
	for _, c := range cs {
		fmt.Fprintf(w, "%-10s", c.name)
		for _, name := range slices.Sorted(maps.Keys(inner[c.name])) {
			st := inner[c.name][name]
			fmt.Fprintf(w, " %s %.3g×%.3g", name, st.Calls, st.Usec)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// contenders builds the contenders on rdb, a client of the server at
// addr, and a function that closes what they hold.
func contenders(ctx context.Context, rdb *redis.Client, addr string) ([]contender, func(), error) {
	names := make([]string, subjects)
	for i := range names {
		names[i] = "cost-subject-" + strconv.Itoa(i)
	}
	rr := redis_rate.NewLimiter(rdb)
	rrLimit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}
	bare := limiter.New(rdb, limiter.Options{Prefix: "bare:", Timeout: time.Second, DenyCacheSize: -1})
	bareBuckets := []limiter.Bucket{{ID: "api", Limit: 1_000_000, Period: time.Second}}
	// inflight is bare plus a concurrency rule: the decision and the
	// release that ends the request, both.
	inflightBuckets := append(bareBuckets[:1:1], limiter.Bucket{ID: "exports", Limit: 1_000_000, Period: time.Minute, Concurrency: true})

	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	deployed := func(prefix, leaseMax string) (*app.Decider, error) {
		cfg, err := config.FromEnv(func(k string) string {
			return map[string]string{
				"REDIS_URL":     "redis://" + addr,
				"DEFAULT_LIMIT": "1000000/1s",
				"REDIS_TIMEOUT": "1s",
				"LEASE_MAX":     leaseMax,
			}[k]
		})
		if err != nil {
			return nil, err
		}
		a, err := app.NewDecider(ctx, cfg, app.Options{Out: io.Discard, Redis: rdb, Store: memory.New(), Prefix: prefix})
		if err != nil {
			return nil, err
		}
		closers = append(closers, a.Close)
		return a, nil
	}
	dep, err1 := deployed("dep:", "64")
	depOff, err2 := deployed("depoff:", "1")
	if err := errors.Join(err1, err2); err != nil {
		return nil, closeAll, err
	}
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
	return []contender{
		{"ping", "ping", func(ctx context.Context, _ int) error { return rdb.Ping(ctx).Err() }},
		{"redis_rate", "evalsha", func(ctx context.Context, i int) error {
			r, err := rr.Allow(ctx, "rr:"+names[i%subjects], rrLimit)
			if err == nil && r.Allowed == 0 {
				err = errors.New("redis_rate denied")
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
		{"inflight", "evalsha", func(ctx context.Context, i int) error {
			d, err := bare.Allow(ctx, limiter.Request{Subject: names[i%subjects], Buckets: inflightBuckets, Cost: 1})
			if err == nil && !d.Allowed {
				err = fmt.Errorf("inflight denied: %+v", d)
			}
			if err == nil {
				err = bare.Release(ctx, d.Slots)
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
	}, closeAll, nil
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
