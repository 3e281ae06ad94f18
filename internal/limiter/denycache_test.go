package limiter

import (
	"context"
	"testing"
	"time"
)

func TestDenyCache(t *testing.T) {
	c := newClient(t, 2)
	l := New(c, Options{Prefix: testPrefix(t, c)})
	ctx := context.Background()
	b := []Bucket{{ID: "a", Limit: 2, Period: time.Hour}}
	req := Request{Subject: "s", Buckets: b, Cost: 1}
	for range 2 {
		if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v, %v, want allowed", d, err)
		}
	}
	first, err := l.Allow(ctx, req)
	if err != nil || first.Allowed || first.Cached {
		t.Fatalf("Allow(exhausted) = %+v, %v, want a deny from Redis", first, err)
	}
	calls := l.Stats().RedisCalls
	for range 100 {
		d, err := l.Allow(ctx, req)
		if err != nil || d.Allowed || !d.Cached || d.Bucket != 0 || d.Limit != 2 ||
			d.RetryAfter > first.RetryAfter || d.RetryAfter < first.RetryAfter-time.Second {
			t.Fatalf("Allow(cached) = %+v, %v, want a cached deny like %+v", d, err, first)
		}
	}
	if s := l.Stats(); s.RedisCalls != calls || s.CacheHits != 100 {
		t.Errorf("Stats() = %+v, want %d Redis calls and 100 cache hits", s, calls)
	}

	// Another cost, another bucket set or another subject asks Redis.
	for _, other := range []Request{
		{Subject: "s", Buckets: b, Cost: 2},
		{Subject: "s", Buckets: []Bucket{{ID: "a", Limit: 3, Period: time.Hour}}, Cost: 1},
		{Subject: "t", Buckets: b, Cost: 1},
	} {
		if d, err := l.Allow(ctx, other); err != nil || d.Cached {
			t.Errorf("Allow(%+v) = %+v, %v, want an answer from Redis", other, d, err)
		}
	}

	// Reset unblocks at once.
	if err := l.Reset(ctx, "s", b); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if d, err := l.Allow(ctx, req); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Errorf("Allow after Reset = %+v, %v, want allowed with 1 left", d, err)
	}
	if got, err := l.Peek(ctx, "s", b); err != nil || got[0].Remaining != 1 {
		t.Errorf("Peek after Reset = %+v, %v, want 1 left", got, err)
	}
}

// TestDenyCacheNeverOutlivesRedis checks, on a fast-refilling bucket, that
// the cache stops denying before Redis's retry-after is over.
func TestDenyCacheNeverOutlivesRedis(t *testing.T) {
	c := newClient(t, 2)
	l := New(c, Options{Prefix: testPrefix(t, c)})
	ctx := context.Background()
	// One token every 50ms.
	req := Request{Subject: "s", Buckets: []Bucket{{ID: "f", Limit: 4, Period: 200 * time.Millisecond, Burst: 1}}, Cost: 1}
	var hits int
	for round := 0; round < 4; round++ {
		var sent time.Time
		var retry time.Duration
		for {
			sent = time.Now()
			d, err := l.Allow(ctx, req)
			if err != nil {
				t.Fatalf("Allow: %v", err)
			}
			if !d.Allowed && !d.Cached {
				retry = d.RetryAfter
				break
			}
		}
		for {
			asked := time.Now()
			d, err := l.Allow(ctx, req)
			if err != nil {
				t.Fatalf("Allow: %v", err)
			}
			if !d.Cached {
				break
			}
			hits++
			if late := asked.Sub(sent); late > retry {
				t.Fatalf("cached deny %v after a Redis deny with retry-after %v", late, retry)
			}
		}
	}
	if hits == 0 {
		t.Errorf("the deny cache never answered")
	}
}

func TestDenyCacheBoundedAndOptional(t *testing.T) {
	c := newClient(t, 2)
	prefix := testPrefix(t, c)
	ctx := context.Background()
	b := []Bucket{{ID: "a", Limit: 1, Period: time.Hour}}
	small := New(c, Options{Prefix: prefix, DenyCacheSize: 3})
	off := New(c, Options{Prefix: prefix, DenyCacheSize: -1})
	for i := range 10 {
		req := Request{Subject: subject(t, i), Buckets: b, Cost: 1}
		for range 3 {
			_, _ = small.Allow(ctx, req)
			_, _ = off.Allow(ctx, req)
		}
	}
	if n := small.cache.lru.Len(); n != 3 {
		t.Errorf("deny cache holds %d entries, want its size 3", n)
	}
	if s := off.Stats(); s.CacheHits != 0 || s.RedisCalls != 30 {
		t.Errorf("Stats() with the cache off = %+v, want 30 Redis calls and no hits", s)
	}
}
