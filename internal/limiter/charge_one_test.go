package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestChargeOneMatchesCharge holds charge_one.lua to charge.lua: for one
// enforcing token bucket, from the same stored value at the same instant,
// the two give the same reply, leave the same value and the same expiry.
// Both run on real Redis with their one TIME call replaced by a fixed
// instant (so that a microsecond between the two calls cannot tell them
// apart), over random numbers, costs and stored values: missing, every
// level of the current form, values written with other numbers (converted),
// the previous version's "<tat>", and what no script writes.
func TestChargeOneMatchesCharge(t *testing.T) {
	c := newClient(t, 1)
	ctx := context.Background()
	prefix := testPrefix(t, c)
	// The fixed instant: 2027-01-15T08:00:00.123456Z, in us since 2024.
	const sec, usec = 1800000000, 123456
	now := float64((sec-1704067200)*1000000 + usec)
	fixed := func(src string) *redis.Script {
		t.Helper()
		const call = "redis.call('TIME')"
		if n := strings.Count(src, call); n != 1 {
			t.Fatalf("a script calls TIME %d times, want once: the test fixes the clock of that call", n)
		}
		return redis.NewScript(strings.Replace(src, call, fmt.Sprintf("{'%d', '%d'}", sec, usec), 1))
	}
	general, one := fixed(chargeSrc), fixed(chargeOneLua)
	for _, sc := range []*redis.Script{general, one} {
		if err := sc.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
	}

	rng := rand.New(rand.NewPCG(24, uint64(time.Now().UnixNano())))
	limits := []int64{1, 3, 10, 60, 1000, 1_000_000}
	periods := []time.Duration{time.Millisecond, time.Second, 7 * time.Second, time.Minute, time.Hour, 24 * time.Hour}
	pick := func(xs []int64) int64 { return xs[rng.IntN(len(xs))] }
	fmtG := func(f float64) string { return strconv.FormatFloat(f, 'g', 17, 64) }
	for i := range 3000 {
		b := Bucket{ID: "b", Limit: pick(limits), Period: periods[rng.IntN(len(periods))]}
		if rng.IntN(3) == 0 {
			b.Burst = 1 + rng.Int64N(2*b.Limit)
		}
		if validate([]Bucket{b}, 1, true) != nil {
			continue // beyond MaxHorizon: never sent to a script
		}
		if chargeFor([]Bucket{b}) != chargeOneScript {
			t.Fatalf("chargeFor(%+v) is not charge_one.lua", b)
		}
		burst := float64(b.capacity())
		T := float64(periodMicros(b.Period)) / float64(b.Limit)
		cost := []int64{1, 1, 1, 2, b.capacity(), b.capacity() + 1, 1 + rng.Int64N(b.capacity())}[rng.IntN(7)]
		// used: tokens the stored tat says are used, from a little
		// "past full" to a debt.
		used := rng.Float64()*(burst+2) - 1
		if rng.IntN(2) == 0 {
			used = float64(rng.Int64N(int64(burst) + 1))
		}
		tat := now + used*T
		stored, present := "", true
		switch k := rng.IntN(10); k {
		case 0:
			present = false
		case 1, 2, 3, 4:
			stored = fmtG(tat) + " " + fmtG(T) + " " + strconv.FormatInt(b.capacity(), 10)
			if tat == float64(int64(tat)) && T == float64(int64(T)) {
				stored = strconv.FormatInt(int64(tat), 10) + " " + strconv.FormatInt(int64(T), 10) + " " + strconv.FormatInt(b.capacity(), 10)
			}
		case 5, 6:
			// Written with other numbers: converted.
			oT, ob := T*[]float64{0.5, 2, 3.7}[rng.IntN(3)], []float64{burst, burst * 2, math1(burst / 3)}[rng.IntN(3)]
			stored = fmtG(now+used*oT) + " " + fmtG(oT) + " " + fmtG(ob)
		case 7:
			stored = fmtG(tat) // the previous version's form
		default:
			stored = []string{"", "x", "1 2", "nan nan nan", "inf 1 1", fmtG(tat) + " 0 1", fmtG(tat) + " -1 5",
				fmtG(tat) + " inf 5", "1e400 5 5", fmtG(tat) + " " + fmtG(T) + " 0", "-inf"}[rng.IntN(11)]
		}
		keys := [2]string{prefix + "g" + strconv.Itoa(i), prefix + "o" + strconv.Itoa(i)}
		var reply [2]string
		var after [2]string
		var exp [2]int64 // PEXPIRETIME: Unix ms, or -1 (none), -2 (no key)
		for s, script := range []*redis.Script{general, one} {
			if present {
				if err := c.Set(ctx, keys[s], stored, time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var (
				ks   = []string{keys[s]}
				args []any
			)
			args = append(args, strconv.FormatInt(cost, 10), strconv.FormatInt(b.Limit, 10),
				strconv.FormatInt(periodMicros(b.Period), 10), strconv.FormatInt(b.capacity(), 10), "0")
			// The call and the reads in one transaction: a bucket of a
			// millisecond's horizon expires before a later read.
			var run *redis.Cmd
			var get *redis.StringCmd
			var pexp *redis.Cmd
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				run = script.EvalSha(ctx, p, ks, args...)
				get = p.Get(ctx, keys[s])
				pexp = p.Do(ctx, "PEXPIRETIME", keys[s])
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("case %d (%+v, cost %d, stored %q): script %d: %v", i, b, cost, stored, s, err)
			}
			if reply[s], err = run.Text(); err != nil {
				t.Fatalf("case %d (%+v, cost %d, stored %q): script %d: %v", i, b, cost, stored, s, err)
			}
			after[s] = get.Val()
			exp[s], _ = pexp.Int64()
		}
		c.Del(ctx, keys[0], keys[1])
		if reply[0] != reply[1] || after[0] != after[1] {
			t.Fatalf("case %d (%+v, cost %d, stored %q):\ncharge.lua     reply %q, leaves %q\ncharge_one.lua reply %q, leaves %q",
				i, b, cost, stored, reply[0], after[0], reply[1], after[1])
		}
		if d := exp[1] - exp[0]; d < -50 || d > 50 || (exp[0] < 0) != (exp[1] < 0) {
			t.Fatalf("case %d (%+v, cost %d, stored %q): PEXPIRETIME %d and %d", i, b, cost, stored, exp[0], exp[1])
		}
	}
}

// math1 is x, at least 1.
func math1(x float64) float64 { return max(x, 1) }
