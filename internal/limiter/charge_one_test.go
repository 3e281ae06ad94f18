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

// The instant both scripts see in the tests below (their one TIME call
// replaced): 2027-01-15T08:00:00.123456Z.
const fixedSec, fixedUsec = 1800000000, 123456

// fixedNow is that instant in the scripts' microseconds since 2024.
const fixedNow = float64((fixedSec-1704067200)*1000000 + fixedUsec)

// chargePair is charge.lua and charge_one.lua with their clock fixed to
// fixedNow, loaded on one test Redis.
type chargePair struct {
	c            *redis.Client
	prefix       string
	general, one *redis.Script
	n            int
}

func newChargePair(t testing.TB) *chargePair {
	t.Helper()
	c := newClient(t, 1)
	fixed := func(src string) *redis.Script {
		t.Helper()
		const call = "redis.call('TIME')"
		if n := strings.Count(src, call); n != 1 {
			t.Fatalf("a script calls TIME %d times, want once: the test fixes the clock of that call", n)
		}
		return redis.NewScript(strings.Replace(src, call, fmt.Sprintf("{'%d', '%d'}", fixedSec, fixedUsec), 1))
	}
	p := &chargePair{c: c, prefix: testPrefix(t, c), general: fixed(chargeSrc), one: fixed(chargeOneSrc)}
	for _, sc := range []*redis.Script{p.general, p.one} {
		if err := sc.Load(context.Background(), c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// compare charges cost to bucket b from the stored value (none when
// !present) with each script, and fails t unless both give the same
// reply, leave the same value and expire it at the same time (within the
// 50 ms between the two calls).
func (p *chargePair) compare(t testing.TB, b Bucket, cost int64, stored string, present bool) {
	t.Helper()
	ctx := context.Background()
	if chargeFor([]Bucket{b}) != chargeOneScript {
		t.Fatalf("chargeFor(%+v) is not charge_one.lua", b)
	}
	p.n++
	keys := [2]string{p.prefix + "g" + strconv.Itoa(p.n), p.prefix + "o" + strconv.Itoa(p.n)}
	defer p.c.Del(ctx, keys[0], keys[1])
	// The arguments as every call builds them (appendArgs).
	buf, ends := appendArgs(nil, nil, cost, []Bucket{b}, "")
	args := make([]any, len(ends))
	for i, from := 0, 0; i < len(ends); i++ {
		args[i], from = string(buf[from:ends[i]]), ends[i]
	}
	var reply, after [2]string
	var exp [2]int64 // PEXPIRETIME: Unix ms, or -1 (none), -2 (no key)
	for s, script := range []*redis.Script{p.general, p.one} {
		if present {
			if err := p.c.Set(ctx, keys[s], stored, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// The call and the reads in one transaction: a bucket of a
		// millisecond's horizon expires before a later read.
		var run *redis.Cmd
		var get *redis.StringCmd
		var pexp *redis.Cmd
		_, err := p.c.TxPipelined(ctx, func(pl redis.Pipeliner) error {
			run = script.EvalSha(ctx, pl, []string{keys[s]}, args...)
			get = pl.Get(ctx, keys[s])
			pexp = pl.Do(ctx, "PEXPIRETIME", keys[s])
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("%+v, cost %d, stored %q: script %d: %v", b, cost, stored, s, err)
		}
		if reply[s], err = run.Text(); err != nil {
			t.Fatalf("%+v, cost %d, stored %q: script %d: %v", b, cost, stored, s, err)
		}
		after[s] = get.Val()
		exp[s], _ = pexp.Int64()
	}
	if reply[0] != reply[1] || after[0] != after[1] {
		t.Fatalf("%+v, cost %d, stored %q (present %v):\ncharge.lua     reply %q, leaves %q\ncharge_one.lua reply %q, leaves %q",
			b, cost, stored, present, reply[0], after[0], reply[1], after[1])
	}
	if d := exp[1] - exp[0]; d < -50 || d > 50 || (exp[0] < 0) != (exp[1] < 0) {
		t.Fatalf("%+v, cost %d, stored %q: PEXPIRETIME %d and %d", b, cost, stored, exp[0], exp[1])
	}
}

// TestChargeOneMatchesCharge holds charge_one.lua to charge.lua: for one
// enforcing token bucket, from the same stored value at the same instant,
// the two give the same reply, leave the same value and the same expiry.
// Both run on real Redis with their one TIME call replaced by a fixed
// instant (so that a microsecond between the two calls cannot tell them
// apart), over random numbers, costs and stored values: missing, every
// level of the current form, values written with other numbers (converted),
// the previous version's "<tat>", and what no script writes.
// FuzzChargeOneMatchesCharge explores the same comparison.
func TestChargeOneMatchesCharge(t *testing.T) {
	p := newChargePair(t)
	rng := rand.New(rand.NewPCG(24, uint64(time.Now().UnixNano())))
	limits := []int64{1, 3, 10, 60, 1000, 1_000_000}
	periods := []time.Duration{time.Millisecond, time.Second, 7 * time.Second, time.Minute, time.Hour, 24 * time.Hour}
	pick := func(xs []int64) int64 { return xs[rng.IntN(len(xs))] }
	fmtG := func(f float64) string { return strconv.FormatFloat(f, 'g', 17, 64) }
	for range 3000 {
		b := Bucket{ID: "b", Limit: pick(limits), Period: periods[rng.IntN(len(periods))]}
		if rng.IntN(3) == 0 {
			b.Burst = 1 + rng.Int64N(2*b.Limit)
		}
		if validate([]Bucket{b}, 1, true) != nil {
			continue // beyond MaxHorizon: never sent to a script
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
		tat := fixedNow + used*T
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
			oT, ob := T*[]float64{0.5, 2, 3.7}[rng.IntN(3)], []float64{burst, burst * 2, max(burst/3, 1)}[rng.IntN(3)]
			stored = fmtG(fixedNow+used*oT) + " " + fmtG(oT) + " " + fmtG(ob)
		case 7:
			stored = fmtG(tat) // the previous version's form
		default:
			stored = []string{"", "x", "1 2", "nan nan nan", "inf 1 1", fmtG(tat) + " 0 1", fmtG(tat) + " -1 5",
				fmtG(tat) + " inf 5", "1e400 5 5", fmtG(tat) + " " + fmtG(T) + " 0", "-inf"}[rng.IntN(11)]
		}
		p.compare(t, b, cost, stored, present)
	}
}

// FuzzChargeOneMatchesCharge is TestChargeOneMatchesCharge's comparison
// over any bucket validation accepts, any cost and any stored value (the
// seeds run with go test; -fuzz explores):
//
//	scripts/testenv.sh go test -run '^$' -fuzz FuzzChargeOneMatchesCharge -fuzztime 2m ./internal/limiter/
func FuzzChargeOneMatchesCharge(f *testing.F) {
	f.Add(int64(10), int64(1_000_000), int64(0), int64(1), "94608000123456 100000 10", true)
	f.Add(int64(60), int64(60_000_000), int64(120), int64(3), "94608000123456.5 1000000 60", true)
	f.Add(int64(3), int64(7_000_000), int64(0), int64(4), "", false)
	f.Add(int64(1000), int64(1000), int64(1991), int64(1), "x", true)
	f.Add(int64(1), int64(3_600_000_000), int64(5), int64(2), "1e400 5 5", true)
	f.Add(int64(7), int64(1_000_000), int64(0), int64(1), "94608000123456", true)
	p := newChargePair(f)
	f.Fuzz(func(t *testing.T, limit, periodUs, burst, cost int64, stored string, present bool) {
		// Folded into what validation accepts, so that the fuzzer's
		// inputs reach the scripts rather than the validator.
		limit = 1 + abs64(limit)%1_000_000
		b := Bucket{ID: "b", Limit: limit, Period: time.Duration(1+abs64(periodUs)%86_400_000_000) * time.Microsecond,
			Burst: abs64(burst) % (2*limit + 1)}
		cost = 1 + abs64(cost)%(2*b.capacity()+1)
		if validate([]Bucket{b}, cost, true) != nil {
			return // beyond MaxHorizon: never sent to a script
		}
		p.compare(t, b, cost, stored, present)
	})
}

// abs64 is |x|, with math.MinInt64 as 0.
func abs64(x int64) int64 {
	if x < 0 {
		x = -x
	}
	return max(x, 0)
}
