package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/limiter"
)

// scriptCost runs the script measurement cmd (dump, ab or quota).
func scriptCost(cmd string, args []string) error {
	fs := flag.NewFlagSet("rediscost "+cmd, flag.ExitOnError)
	rounds := fs.Int("rounds", map[string]int{"ab": 60, "quota": 14}[cmd], "rounds")
	_ = fs.Parse(args)
	switch {
	case *rounds < 1 && cmd != "dump":
		return errUsage
	case cmd == "dump" && fs.NArg() == 1:
		return dump(fs.Arg(0))
	case cmd == "ab" && fs.NArg() == 1:
		return ab(context.Background(), fs.Arg(0), *rounds)
	case cmd == "quota" && fs.NArg() == 0:
		return quota(context.Background(), *rounds)
	}
	return errUsage
}

// dump writes the scripts as Redis runs them into dir.
func dump(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lua := limiter.Lua()
	return errors.Join(
		os.WriteFile(filepath.Join(dir, "charge.lua"), []byte(lua.Charge), 0o644),
		os.WriteFile(filepath.Join(dir, "charge_one.lua"), []byte(lua.ChargeOne), 0o644))
}

// ab compares charge_one.lua with the charge.lua of the version in dir.
func ab(ctx context.Context, dir string, rounds int) error {
	var old [2]string
	for i, f := range []string{"bucket.lua", "charge.lua"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		old[i] = string(b)
	}
	if st, err := os.ReadFile(filepath.Join(dir, "stored.lua")); err == nil {
		// A version with stored.lua: put it in, as the limiter does.
		old[0] = strings.Replace(old[0], "-- #include stored.lua\n", string(st), 1)
	}
	lua := limiter.Lua()
	bs := []limiter.Bucket{{ID: "api", Limit: 1_000_000, Period: time.Second}}
	ratios, err := pairedCost(ctx, rounds, 5_000, []side{
		{redis.NewScript(prelude(lua) + old[0] + old[1] + "return out\n"), bs},
		{redis.NewScript(lua.ChargeOne), bs},
	})
	if err != nil {
		return err
	}
	fmt.Printf("new/old over %d rounds of 5000, quartiles p25 / median / p75: usec_per_call %s; Redis CPU %s\n",
		rounds, quartiles(ratios[1].usec), quartiles(ratios[1].cpu))
	return nil
}

// prelude is the line before bucket.lua in the charge script: the locals
// bucket.lua reads.
func prelude(lua limiter.LuaSource) string {
	return lua.Charge[:strings.Index(lua.Charge, lua.Bucket)]
}

// quota measures the parts of two quotas' cost.
func quota(ctx context.Context, rounds int) error {
	// BenchmarkAllow's buckets.
	api := limiter.Bucket{ID: "api", Limit: 1_000_000, Period: time.Second}
	route := limiter.Bucket{ID: "route", Limit: 1_000_000, Period: time.Second}
	two := []limiter.Bucket{api, route}
	four := []limiter.Bucket{api, route,
		{ID: "q-day", Limit: 1_000_000_000, Period: 24 * time.Hour, Window: limiter.Daily, Anchor: time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)},
		{ID: "q-month", Limit: 1_000_000_000, Period: 24 * time.Hour, Window: limiter.Monthly}}

	lua := limiter.Lua()
	const incrby = "redis.pcall('INCRBY', KEYS[i], cs)"
	// The quota loop is the last statement of bucket.lua's "if quotas
	// then" block: a variant replaces it, to that block's end.
	const loop = "\tfor i = 1, n do\n\t\tif st[4 * i - 1] < 0 then\n\t\t\tlocal limit = tonumber("
	at := strings.Index(lua.Bucket, loop)
	if strings.Count(lua.Bucket, loop) != 1 || !strings.HasSuffix(lua.Bucket, "\nend\n") || strings.Count(lua.Charge, incrby) != 1 {
		return errors.New("bucket.lua's quota loop has changed: update the variants")
	}
	withLoop := func(body string) *redis.Script {
		return redis.NewScript(strings.Replace(lua.Charge, lua.Bucket,
			lua.Bucket[:at]+"\tfor i = 1, n do\n\t\tif st[4 * i - 1] < 0 then\n"+body+"\t\tend\n\tend\nend\n", 1))
	}
	charge := redis.NewScript(lua.Charge)
	names := []string{"2 rate (charge.lua)", "2 rate + 2 quota (charge.lua)", "quota loop without INCRBY",
		"quota loop cut to INCRBY", "INCR for INCRBY", "no quota loop"}
	ratios, err := pairedCost(ctx, rounds, 20_000, []side{
		{charge, two},
		{charge, four},
		{redis.NewScript(strings.Replace(lua.Charge, incrby, "cost + 4", 1)), four},
		{withLoop("\t\t\tlocal r = " + incrby + "\n" +
			"\t\t\tst[4 * i - 2], st[4 * i] = tonumber(ARGV[4 * i - 2]) + cost - r, 1\n\t\t\tspec = 1\n"), four},
		{redis.NewScript(strings.Replace(lua.Charge, incrby, "redis.pcall('INCR', KEYS[i])", 1)), four},
		{withLoop("\t\t\tst[4 * i - 2] = 1e9\n"), four},
	})
	if err != nil {
		return err
	}
	for i, name := range names[1:] {
		r := ratios[i+1]
		fmt.Printf("%-30s ÷ 2 rate, p25 / median / p75 over %d rounds: decisions/s %s; Redis CPU %s; usec_per_call %s\n",
			name, rounds, quartiles(r.rate), quartiles(r.cpu), quartiles(r.usec))
	}
	return nil
}

// side is one side of pairedCost: a script and the buckets of every
// decision it makes.
type side struct {
	script  *redis.Script
	buckets []limiter.Bucket
}

// ratios are one side's per-round ratios to side 0.
type ratios struct {
	usec, cpu, rate []float64
}

// pairedCost runs the sides in turn on a private Redis, rounds times (the
// order reversed every other round), each turn per allows from 16 callers
// over 10,000 subjects, under the side's own prefix, with CONFIG
// RESETSTAT before it. It returns every side's per-round ratio to side 0
// of the script's usec_per_call (INFO commandstats), of Redis CPU per
// decision (INFO cpu) and of decisions per second.
func pairedCost(ctx context.Context, rounds, per int, sides []side) ([]ratios, error) {
	addr, stop, err := startRedis(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: callers, Protocol: 2, ContextTimeoutEnabled: true})
	defer rdb.Close()
	// Every call's keys and arguments, built before any is timed.
	type args struct {
		keys []string
		argv []any
	}
	calls := make([][]args, len(sides))
	for v, s := range sides {
		prefix := "ab" + strconv.Itoa(v) + ":"
		calls[v] = make([]args, subjects)
		for i := range calls[v] {
			calls[v][i].keys, calls[v][i].argv = limiter.ChargeArgs(prefix, "ab-"+strconv.Itoa(i), 1, s.buckets)
		}
	}
	// run makes per decisions with side v and returns its usec_per_call,
	// Redis CPU µs per decision and decisions per second.
	run := func(v int) (usec, cpu, rate float64, err error) {
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			return 0, 0, 0, err
		}
		before, err := redisCPU(ctx, rdb)
		if err != nil {
			return 0, 0, 0, err
		}
		start := time.Now()
		err = drive(ctx, callers, per, func(ctx context.Context, i int) error {
			c := calls[v][i%subjects]
			return sides[v].script.Run(ctx, rdb, c.keys, c.argv...).Err()
		})
		if err != nil {
			return 0, 0, 0, err
		}
		rate = float64(per) / time.Since(start).Seconds()
		after, err := redisCPU(ctx, rdb)
		if err != nil {
			return 0, 0, 0, err
		}
		stats, err := commandStats(ctx, rdb)
		if err != nil {
			return 0, 0, 0, err
		}
		return stats["evalsha"].Usec, (after - before) / float64(per) * 1e6, rate, nil
	}
	for v := range sides {
		if _, _, _, err := run(v); err != nil { // warm up: load every script, make the keys
			return nil, err
		}
	}
	out := make([]ratios, len(sides))
	u, c, r := make([]float64, len(sides)), make([]float64, len(sides)), make([]float64, len(sides))
	for round := range rounds {
		for k := range sides {
			v := k
			if round%2 == 1 {
				v = len(sides) - 1 - k
			}
			if u[v], c[v], r[v], err = run(v); err != nil {
				return nil, err
			}
		}
		for v := range sides {
			out[v].usec = append(out[v].usec, u[v]/u[0])
			out[v].cpu = append(out[v].cpu, c[v]/c[0])
			out[v].rate = append(out[v].rate, r[v]/r[0])
		}
	}
	return out, nil
}
