package limiter

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestChargeScriptAB compares the charge script this tree runs for a
// one-bucket allow (charge_one.lua) with a version of charge.lua, paired:
// the two take turns on one private Redis (each going first every other
// round), one-bucket allows from 16 callers over
// 10,000 subjects, CONFIG RESETSTAT before each turn, and it logs the
// quartiles of new/old per round of the script's usec_per_call (INFO
// commandstats) and of Redis CPU per decision (INFO cpu). On a shared
// machine a round's ratio swings by tens of percent; the pairing and the
// median of many rounds are what make a few percent visible. The old
// version is a directory holding its bucket.lua and charge.lua:
//
//	mkdir -p /tmp/old && for f in bucket charge stored; do git show main:internal/limiter/$f.lua > /tmp/old/$f.lua 2>/dev/null; done
//	SLUICE_SCRIPT_AB=/tmp/old SLUICE_SCRIPT_AB_ROUNDS=60 scripts/testenv.sh go test -count=1 -run TestChargeScriptAB -v ./internal/limiter/
func TestChargeScriptAB(t *testing.T) {
	dir := os.Getenv("SLUICE_SCRIPT_AB")
	if dir == "" {
		t.Skip("SLUICE_SCRIPT_AB=<directory of the old bucket.lua and charge.lua> runs it")
	}
	var old [2][]byte
	for i, f := range []string{"bucket.lua", "charge.lua"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		old[i] = b
	}
	rounds := 60
	if s := os.Getenv("SLUICE_SCRIPT_AB_ROUNDS"); s != "" {
		var err error
		if rounds, err = strconv.Atoi(s); err != nil || rounds < 2 {
			t.Fatalf("SLUICE_SCRIPT_AB_ROUNDS=%q: want an integer >= 2", s)
		}
	}
	const callers, subjectCount, per = 16, 10_000, 5_000
	bs := []Bucket{{ID: "api", Limit: 1_000_000, Period: time.Second}}
	// The new side is what this tree runs for the request (chargeFor:
	// charge_one.lua for this one token bucket).
	oldBucket := string(old[0])
	if st, err := os.ReadFile(filepath.Join(dir, "stored.lua")); err == nil {
		// A version with stored.lua (withStored): put it in.
		oldBucket = strings.Replace(oldBucket, "-- #include stored.lua\n", string(st), 1)
	}
	scripts := [2]*redis.Script{
		redis.NewScript("local charging, every_end = true, false\n" + oldBucket + string(old[1]) + "return out\n"),
		chargeFor(bs),
	}
	rdb := newPrivateClient(t, callers)
	ctx := context.Background()
	digests := make([]subjectDigest, subjectCount)
	for i := range digests {
		digests[i] = digestOf("ab-" + strconv.Itoa(i))
	}
	// run makes per decisions with script v under its own prefix and
	// returns its usec_per_call and Redis CPU µs per decision.
	run := func(v int) (usec, cpu float64) {
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		before := infoCPU(t, rdb)
		var next atomic.Int64
		var wg sync.WaitGroup
		prefix := "ab" + strconv.Itoa(v) + ":"
		for range callers {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= per {
						return
					}
					c := buildCalls.Get().(*call)
					c.build(prefix, &subjects{id: digests[i%subjectCount]}, 1, bs)
					err := scripts[v].Run(ctx, rdb, c.keys, c.args...).Err()
					buildCalls.Put(c)
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		cpu = (infoCPU(t, rdb) - before) / per * 1e6
		for line := range strings.SplitSeq(rdb.Info(ctx, "commandstats").Val(), "\r\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
				for kv := range strings.SplitSeq(rest, ",") {
					if v, ok := strings.CutPrefix(kv, "usec_per_call="); ok {
						usec, _ = strconv.ParseFloat(v, 64)
					}
				}
			}
		}
		return usec, cpu
	}
	run(0) // warm up: load both, make the keys
	run(1)
	var usec, cpu []float64
	for r := range rounds {
		var u, c [2]float64
		for k := range 2 {
			v := k ^ r%2
			u[v], c[v] = run(v)
		}
		usec, cpu = append(usec, u[1]/u[0]), append(cpu, c[1]/c[0])
	}
	q := func(xs []float64) string {
		slices.Sort(xs)
		n := len(xs)
		return strconv.FormatFloat(xs[n/4], 'f', 3, 64) + " / " + strconv.FormatFloat(xs[n/2], 'f', 3, 64) + " / " + strconv.FormatFloat(xs[3*n/4], 'f', 3, 64)
	}
	t.Logf("new/old over %d rounds of %d, quartiles p25 / median / p75: usec_per_call %s; Redis CPU %s", rounds, per, q(usec), q(cpu))
}

// newPrivateClient returns a client of a private redis-server (the
// shared test one has other users, whose work would count in INFO cpu).
func newPrivateClient(t *testing.T, poolSize int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr, PoolSize: poolSize, Protocol: 2, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// infoCPU returns Redis's used_cpu_user + used_cpu_sys, in seconds.
func infoCPU(t *testing.T, c *redis.Client) float64 {
	t.Helper()
	var sum float64
	for line := range strings.SplitSeq(c.Info(context.Background(), "cpu").Val(), "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("INFO cpu %s: %v", line, err)
			}
			sum += f
		}
	}
	return sum
}
