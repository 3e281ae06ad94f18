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
// one-bucket allow (charge_one.lua) with a version of charge.lua, paired
// (pairedCost: the two take turns on one private Redis, one-bucket allows
// from 16 callers over 10,000 subjects), and logs the quartiles of new/old
// per round of the script's usec_per_call and of Redis CPU per decision.
// The old version is a directory holding its bucket.lua and charge.lua:
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
	rounds := testenv.EnvInt(t, "SLUICE_SCRIPT_AB_ROUNDS", 60)
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
	ratios := pairedCost(t, rounds, 5_000, []costSide{{scripts[0], bs}, {scripts[1], bs}})
	t.Logf("new/old over %d rounds of 5000, quartiles p25 / median / p75: usec_per_call %s; Redis CPU %s", rounds, quartiles(ratios[1].usec), quartiles(ratios[1].cpu))
}

// costSide is one side of pairedCost: a script and the buckets of every
// decision it makes.
type costSide struct {
	script  *redis.Script
	buckets []Bucket
}

// costRatios are one side's per-round ratios to side 0.
type costRatios struct {
	usec, cpu, rate []float64
}

// pairedCost runs the sides in turn on one private Redis, rounds times
// (the order reversed every other round), each turn per allows from 16
// callers over 10,000 subjects, under the side's own prefix, with CONFIG
// RESETSTAT before it. It returns every side's per-round ratio to side 0
// of the script's usec_per_call (INFO commandstats), of Redis CPU per
// decision (INFO cpu) and of decisions per second. On a shared machine a
// round's ratio swings by tens of percent; the pairing and the median of
// many rounds are what make a few percent visible.
func pairedCost(t *testing.T, rounds, per int, sides []costSide) []costRatios {
	t.Helper()
	const callers, subjectCount = 16, 10_000
	rdb := newPrivateClient(t, callers)
	ctx := context.Background()
	digests := make([]subjectDigest, subjectCount)
	for i := range digests {
		digests[i] = digestOf("ab-" + strconv.Itoa(i))
	}
	// run makes per decisions with side v and returns its usec_per_call,
	// Redis CPU µs per decision and decisions per second.
	run := func(v int) (usec, cpu, rate float64) {
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		before := testenv.RedisCPU(t, rdb)
		start := time.Now()
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
					c.build(prefix, &subjects{id: digests[i%subjectCount]}, 1, sides[v].buckets)
					err := sides[v].script.Run(ctx, rdb, c.keys, c.args...).Err()
					buildCalls.Put(c)
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		rate = float64(per) / time.Since(start).Seconds()
		cpu = (testenv.RedisCPU(t, rdb) - before) / float64(per) * 1e6
		return testenv.CommandStats(t, rdb)["evalsha"].Usec, cpu, rate
	}
	for v := range sides {
		run(v) // warm up: load every script, make the keys
	}
	out := make([]costRatios, len(sides))
	u, c, r := make([]float64, len(sides)), make([]float64, len(sides)), make([]float64, len(sides))
	for round := range rounds {
		for k := range sides {
			v := k
			if round%2 == 1 {
				v = len(sides) - 1 - k
			}
			u[v], c[v], r[v] = run(v)
		}
		for v := range sides {
			out[v].usec = append(out[v].usec, u[v]/u[0])
			out[v].cpu = append(out[v].cpu, c[v]/c[0])
			out[v].rate = append(out[v].rate, r[v]/r[0])
		}
	}
	return out
}

// quartiles formats p25 / median / p75 of xs (sorted in place).
func quartiles(xs []float64) string {
	slices.Sort(xs)
	n := len(xs)
	return strconv.FormatFloat(xs[n/4], 'f', 3, 64) + " / " + strconv.FormatFloat(xs[n/2], 'f', 3, 64) + " / " + strconv.FormatFloat(xs[3*n/4], 'f', 3, 64)
}

// newPrivateClient returns a client of a private redis-server (the
// shared test one has other users, whose work would count in INFO cpu).
func newPrivateClient(t *testing.T, poolSize int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr, PoolSize: poolSize, Protocol: 2, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
