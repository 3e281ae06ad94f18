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
func TestMiniredisMatchesRedis(t *testing.T) {
	real := newClient(t, 2)
	m := miniredis.RunT(t)
	// A frozen clock: the real Redis runs fast enough to stay within the
	// tolerance of exact answers, miniredis under -race might not.
	m.SetTime(time.Now())
	mini := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = mini.Close() })

	onReal := New(real, Options{Prefix: testPrefix(t, real), DenyCacheSize: -1, Timeout: time.Second})
	onMini := New(mini, Options{Prefix: "t:sl:", DenyCacheSize: -1, Timeout: time.Second})
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
