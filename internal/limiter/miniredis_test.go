package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// TestMiniredisMatchesRedis plays the deterministic bucket scenarios on
// miniredis (the local stack's embedded Redis) and on real Redis: the script
// must answer the same on both. Refill timing is left out: miniredis's clock
// and a real sleep differ.
// miniPrefix starts the keys of the miniredis side (a private server).
const miniPrefix = "t:sl:"

// realAndMini returns a miniredis with a frozen clock (the real Redis runs
// fast enough to stay within the tolerance of exact answers, miniredis
// under -race might not) and a Limiter on it and on the test Redis (under
// realPrefix), without a deny cache.
func realAndMini(t *testing.T) (m *miniredis.Miniredis, onReal, onMini *Limiter, realPrefix string) {
	t.Helper()
	real := newClient(t, 2)
	m = miniredis.RunT(t)
	m.SetTime(time.Now())
	mini := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = mini.Close() })
	realPrefix = testPrefix(t, real)
	onReal = New(real, Options{Prefix: realPrefix, DenyCacheSize: -1, Timeout: time.Second})
	onMini = New(mini, Options{Prefix: miniPrefix, DenyCacheSize: -1, Timeout: time.Second})
	return m, onReal, onMini, realPrefix
}

func TestMiniredisMatchesRedis(t *testing.T) {
	m, onReal, onMini, _ := realAndMini(t)
	ctx := context.Background()

	play := func(l *Limiter, sub string, sc scenario) []any {
		var out []any
		for _, st := range sc.steps {
			if st.peek != nil {
				got, err := l.Peek(ctx, sub, sc.buckets)
				out = append(out, got, err)
				continue
			}
			got, err := l.Allow(ctx, Request{Subject: sub, Buckets: sc.buckets, Cost: st.cost})
			out = append(out, got, err)
		}
		// Reset, then one more call on a fresh bucket.
		out = append(out, l.Reset(ctx, sub, sc.buckets))
		got, err := l.Allow(ctx, Request{Subject: sub, Buckets: sc.buckets, Cost: 1})
		out = append(out, got, err)
		return out
	}
	for i, sc := range scenarios() {
		if sc.name == "refill" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			sub := subject(t, i)
			want := play(onReal, sub, sc)
			got := play(onMini, sub, sc)
			if diff := cmp.Diff(want, got, durationsWithin(50*time.Millisecond), cmp.Comparer(func(a, b error) bool {
				return (a == nil) == (b == nil)
			})); diff != "" {
				t.Errorf("miniredis differs from Redis (-redis +miniredis):\n%s", diff)
			}
		})
	}
	if keys := m.Keys(); len(keys) == 0 {
		t.Errorf("miniredis holds no keys: the scenarios wrote nothing")
	}
}

// TestMiniredisQuotas plays quotas on miniredis and on real Redis: the
// speculative INCRBY and its undoing, window ends (PEXPIRETIME), usage
// reports, a lease call, a stray value and Reset answer alike. Durations
// within 2 s: miniredis's clock is frozen at the start, Redis's runs.
func TestMiniredisQuotas(t *testing.T) {
	_, onReal, onMini, realPrefix := realAndMini(t)
	ctx := context.Background()
	rate := Bucket{ID: "r", Limit: 100, Period: time.Hour}
	month := Bucket{ID: "m", Limit: 5, Period: time.Hour, Window: Monthly}
	day := Bucket{ID: "d", Limit: 3, Period: time.Hour, Window: Daily, Anchor: time.Date(2025, 1, 1, 6, 30, 0, 0, time.UTC)}
	shadowDay := day
	shadowDay.Shadow = true
	all := []Bucket{rate, month, day}

	play := func(c redis.UniversalClient, l *Limiter, prefix string) []any {
		var out []any
		allow := func(bs []Bucket, cost int64) {
			d, err := l.Allow(ctx, Request{Subject: "s", Buckets: bs, Cost: cost})
			out = append(out, d, err)
		}
		for range 4 {
			allow(all, 1) // the fourth: denied by the day, the month undone
		}
		allow([]Bucket{rate, month, shadowDay}, 1) // the shadow is not charged
		st, err := l.Peek(ctx, "s", all)
		out = append(out, st, err)
		u, err := l.Charge(ctx, "s", all, -2, "scope", "")
		out = append(out, u, err)
		res, err := l.evalLease(ctx, digestOf("s"), 1, all)
		if rd := (replyReader{s: res}); err == nil {
			r, perr := parseReply(&rd, len(all))
			var ends []int64
			for range all {
				ends = append(ends, rd.next()) // exact; not the ms until it, as the clocks differ
				rd.next()
			}
			out = append(out, r.allowed, r.index, r.remaining, perr, ends)
		}
		out = append(out, err)
		// A stray value: a fresh window.
		out = append(out, c.Set(ctx, bucketKey(prefix, "s", month), "x", time.Hour).Err())
		allow(all, 1)
		out = append(out, l.Reset(ctx, "s", all))
		allow(all, 1)
		return out
	}
	want := play(onReal.rdb.(redis.UniversalClient), onReal, realPrefix)
	got := play(onMini.rdb.(redis.UniversalClient), onMini, miniPrefix)
	if diff := cmp.Diff(want, got, durationsWithin(2*time.Second), cmp.Comparer(func(a, b error) bool {
		return (a == nil) == (b == nil)
	})); diff != "" {
		t.Errorf("miniredis differs from Redis (-redis +miniredis):\n%s", diff)
	}
}
