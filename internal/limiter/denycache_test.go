package limiter

import (
	"context"
	"encoding/hex"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

func TestDenyCache(t *testing.T) {
	c := newClient(t, 2)
	l := New(c, Options{Prefix: testPrefix(t, c), Timeout: testTimeout})
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
	l := New(c, Options{Prefix: testPrefix(t, c), Timeout: testTimeout})
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

// TestDenyCacheMaxAge: a denial that lasts long (an exhausted monthly
// quota: weeks) is cached for at most DenyCacheMaxAge, so a refund or a
// reset made by another process (the admin API, its own Limiter) reaches
// an authorizer's Limiter within it; until then the cache still answers
// the flood without Redis.
func TestDenyCacheMaxAge(t *testing.T) {
	c := newClient(t, 2)
	prefix := testPrefix(t, c)
	ctx := context.Background()
	const maxAge = 300 * time.Millisecond
	monthAgo := time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second)
	for _, lift := range []string{"refund", "reset"} {
		t.Run(lift, func(t *testing.T) {
			authz := New(c, Options{Prefix: prefix, DenyCacheMaxAge: maxAge, Timeout: testTimeout})
			admin := New(c, Options{Prefix: prefix, DenyCacheSize: -1, Timeout: testTimeout})
			// Its month started a day ago: weeks to go, whatever the date.
			b := []Bucket{{ID: "month", Limit: 2, Period: time.Hour, Window: Monthly, Anchor: monthAgo}}
			req := Request{Subject: subject(t, 0), Buckets: b, Cost: 1}
			for range 2 {
				if d, err := authz.Allow(ctx, req); err != nil || !d.Allowed {
					t.Fatalf("Allow = %+v, %v, want allowed", d, err)
				}
			}
			sent := time.Now()
			first, err := authz.Allow(ctx, req)
			if err != nil || first.Allowed || first.Cached || first.RetryAfter < 24*time.Hour {
				t.Fatalf("Allow(exhausted) = %+v, %v, want a deny from Redis until the month ends", first, err)
			}
			calls := authz.Stats().RedisCalls
			var cached int
			for time.Since(sent) < maxAge/2 {
				d, err := authz.Allow(ctx, req)
				if err != nil || d.Allowed || !d.Cached {
					t.Fatalf("Allow %v after the deny = %+v, %v, want a cached deny", time.Since(sent), d, err)
				}
				cached++
			}
			if n := authz.Stats().RedisCalls - calls; n != 0 {
				t.Errorf("%d of %d denied requests within the max age reached Redis, want 0", n, cached)
			}

			// Another process lifts the deny; this Limiter's cache learns
			// it within the max age, from Redis.
			switch lift {
			case "refund":
				if _, err := admin.Charge(ctx, req.Subject, b, -2, "scope", ""); err != nil {
					t.Fatalf("Charge(-2): %v", err)
				}
			case "reset":
				if err := admin.Reset(ctx, req.Subject, b); err != nil {
					t.Fatalf("Reset: %v", err)
				}
			}
			lifted := testenv.AwaitLift(t, sent, maxAge, maxAge+5*time.Second, func() (bool, bool, any) {
				d, err := authz.Allow(ctx, req)
				if err != nil {
					t.Fatalf("Allow: %v", err)
				}
				return d.Allowed, d.Cached, d
			})
			t.Logf("allowed again %v after the deny (max age %v)", lifted.Round(time.Millisecond), maxAge)
		})
	}

	// The default max age bounds a deny of weeks at one second.
	l := New(c, Options{Prefix: prefix, Timeout: testTimeout})
	if got := l.cacheUntil(0, 30*24*time.Hour); got != int64(DefaultDenyCacheMaxAge) {
		t.Errorf("cacheUntil(0, 30 days) = %v, want the default max age %v", time.Duration(got), DefaultDenyCacheMaxAge)
	}
	if got, want := l.cacheUntil(0, 100*time.Millisecond), int64(100*time.Millisecond-3*time.Millisecond); got != want {
		t.Errorf("cacheUntil(0, 100ms) = %v, want %v (the retry-after less its margin)", time.Duration(got), time.Duration(want))
	}
}

func TestDenyCacheBoundedAndOptional(t *testing.T) {
	c := newClient(t, 2)
	prefix := testPrefix(t, c)
	ctx := context.Background()
	b := []Bucket{{ID: "a", Limit: 1, Period: time.Hour}}
	small := New(c, Options{Prefix: prefix, DenyCacheSize: 3, Timeout: testTimeout})
	off := New(c, Options{Prefix: prefix, DenyCacheSize: -1, Timeout: testTimeout})
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

// TestDenyCacheKey: every field a denial depends on changes the key, and
// the subject part is the digest the Redis keys are named by.
func TestDenyCacheKey(t *testing.T) {
	// Not parallel: AllocsPerRun.
	c := newDenyCache(1)
	b := Bucket{ID: "a", Limit: 2, Period: time.Hour, Burst: 3}
	base := c.key(digestOf("s"), []Bucket{b}, 1)
	if got, want := hex.EncodeToString(base.subject[:]), SubjectHash("s"); got != want {
		t.Errorf("key(s).subject = %s, want SubjectHash %s", got, want)
	}
	with := func(f func(*Bucket)) []Bucket {
		o := b
		f(&o)
		return []Bucket{o}
	}
	for name, k := range map[string]denyKey{
		"subject":     c.key(digestOf("t"), []Bucket{b}, 1),
		"cost":        c.key(digestOf("s"), []Bucket{b}, 2),
		"id":          c.key(digestOf("s"), with(func(o *Bucket) { o.ID = "b" }), 1),
		"limit":       c.key(digestOf("s"), with(func(o *Bucket) { o.Limit = 3 }), 1),
		"period":      c.key(digestOf("s"), with(func(o *Bucket) { o.Period = time.Minute }), 1),
		"burst":       c.key(digestOf("s"), with(func(o *Bucket) { o.Burst = 4 }), 1),
		"shadow":      c.key(digestOf("s"), with(func(o *Bucket) { o.Shadow = true }), 1),
		"fail-closed": c.key(digestOf("s"), with(func(o *Bucket) { o.FailClosed = true }), 1),
		"two buckets": c.key(digestOf("s"), []Bucket{b, b}, 1),
	} {
		if k == base {
			t.Errorf("key with another %s = key of the base request", name)
		}
	}
	split := c.key(digestOf("s"), []Bucket{{ID: "a", Limit: 2, Period: time.Hour}, {ID: "bc", Limit: 2, Period: time.Hour}}, 1)
	if split == c.key(digestOf("s"), []Bucket{{ID: "ab", Limit: 2, Period: time.Hour}, {ID: "c", Limit: 2, Period: time.Hour}}, 1) {
		t.Error(`key(buckets "a","bc") = key(buckets "ab","c")`)
	}
	if c.key(digestOf("s"), []Bucket{b}, 1) != base {
		t.Error("key is not deterministic")
	}
	long := strings.Repeat("k", 10_000)
	if n := testing.AllocsPerRun(100, func() { c.key(digestOf(long), []Bucket{b, b}, 1) }); n != 0 {
		t.Errorf("key(digestOf(10 KB subject)) allocates %v times, want 0", n)
	}
}

// TestDenyCacheBytesPerEntry fills a cache with denials of 10 KB subjects
// and measures the heap it holds: an entry must cost a bounded number of
// bytes (denyEntryBytes), not its subject's length.
func TestDenyCacheBytesPerEntry(t *testing.T) {
	const n = 10_000
	c := newDenyCache(n)
	bs := []Bucket{
		{ID: "0b7f3c52-9a4e-4f1a-8d2b-6e5c4a3b2c1d", Limit: 1, Period: time.Hour},
		{ID: "9a4e0b7f-3c52-4f1a-8d2b-6e5c4a3b2c1d", Limit: 1, Period: time.Hour},
	}
	pad := strings.Repeat("x", 10<<10)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := range n {
		// A fresh 10 KB string each time, garbage once the entry is added
		// (unless the cache keeps it).
		subject := strconv.Itoa(i) + pad
		c.add(c.key(digestOf(subject), bs, 1), Decision{Limit: 1, RetryAfter: time.Hour}, 0, int64(time.Hour))
	}
	after := heap()
	runtime.KeepAlive(c)
	if c.lru.Len() != n {
		t.Fatalf("cache holds %d entries, want %d", c.lru.Len(), n)
	}
	per := (int64(after) - int64(before)) / n
	t.Logf("deny cache: %d entries with 10 KB subjects hold %d B of heap, %d B per entry", n, int64(after)-int64(before), per)
	if per > denyEntryBytes {
		t.Errorf("a deny cache entry costs %d B of heap, want <= %d (denyEntryBytes)", per, denyEntryBytes)
	}
}
