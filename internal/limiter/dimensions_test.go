package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestDimensions pins what a request of two dimensions does, a per-IP floor
// (bucket 0, the IP's own subject) and a per-key limit (bucket 1, the
// request's subject), on a single node and on Redis Cluster:
//
//   - single node: one script call, all or nothing. A deny by the key
//     bucket leaves the IP floor uncharged; a deny by the floor writes no
//     key bucket.
//   - Cluster: the floor first, then the key, one call each. A deny by the
//     key bucket leaves the floor charged; a deny by the floor never asks
//     (or writes) the key bucket.
func TestDimensions(t *testing.T) {
	t.Parallel()
	const ip = "203.0.113.9"
	type step struct {
		key     string
		allowed bool
		bucket  int   // the limiting bucket
		ipLeft  int64 // tokens in the floor after the step
	}
	// Floor 3/h, key 2/h.
	single := []step{
		{"k1", true, 1, 2}, {"k1", true, 1, 1},
		{"k1", false, 1, 1}, // key denies: the floor is not charged
		{"k2", true, 0, 0},  // ... so k2 still gets its token
		{"k3", false, 0, 0}, // the floor denies: k3's bucket is never written
	}
	cluster := []step{
		{"k1", true, 1, 2}, {"k1", true, 1, 1},
		{"k1", false, 1, 0}, // key denies after the floor was charged
		{"k2", false, 0, 0}, // the floor denies: k2 is never asked
		{"k3", false, 0, 0},
	}
	run := func(t *testing.T, c redis.UniversalClient, prefix string, steps []step) {
		l := New(c, Options{Prefix: prefix, Timeout: time.Second, DenyCacheSize: -1, SubjectKey: []byte("dimensions-test-key")})
		ctx := context.Background()
		bs := []Bucket{
			{ID: "floor", Limit: 3, Period: time.Hour, Subject: ip},
			{ID: "key", Limit: 2, Period: time.Hour},
		}
		for i, s := range steps {
			d, err := l.Allow(ctx, Request{Subject: s.key, Buckets: bs, Cost: 1})
			if err != nil {
				t.Fatalf("step %d Allow(%s): %v", i, s.key, err)
			}
			if d.Allowed != s.allowed || d.Bucket != s.bucket {
				t.Errorf("step %d Allow(%s) = allowed %v by bucket %d, want %v by %d (%+v)", i, s.key, d.Allowed, d.Bucket, s.allowed, s.bucket, d)
			}
			st, err := l.Peek(ctx, ip, bs[:1])
			if err != nil {
				t.Fatal(err)
			}
			if st[0].Remaining != s.ipLeft {
				t.Errorf("step %d: floor has %d tokens, want %d", i, st[0].Remaining, s.ipLeft)
			}
		}
		// k3 was only ever denied by the floor: no key of it exists.
		k3 := prefix + "{" + l.SubjectHash("k3") + "}:key"
		if n, err := c.Exists(ctx, k3).Result(); err != nil || n != 0 {
			t.Errorf("EXISTS %s = %d, %v; want 0: a floor deny writes nothing", k3, n, err)
		}
	}
	t.Run("single node", func(t *testing.T) {
		t.Parallel()
		c := testenv.Redis(t)
		prefix := testenv.Prefix(t, "dims")
		t.Cleanup(func() { testenv.DeleteKeys(t, c, prefix) })
		run(t, c, prefix, single)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: startCluster(t), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		run(t, c, "t:dims:", cluster)
	})
}

// TestDimensionsDenyCache: a denial of a two-subject request is cached
// under both subjects together: the same key from another IP is not
// denied by it.
func TestDimensionsDenyCache(t *testing.T) {
	t.Parallel()
	c := testenv.Redis(t)
	prefix := testenv.Prefix(t, "dimcache")
	t.Cleanup(func() { testenv.DeleteKeys(t, c, prefix) })
	l := New(c, Options{Prefix: prefix, Timeout: time.Second})
	ctx := context.Background()
	req := func(ip string) Request {
		return Request{Subject: "k", Cost: 1, Buckets: []Bucket{
			{ID: "floor", Limit: 1, Period: time.Hour, Subject: ip},
			{ID: "key", Limit: 100, Period: time.Hour},
		}}
	}
	l.Allow(ctx, req("192.0.2.1"))
	if d, _ := l.Allow(ctx, req("192.0.2.1")); d.Allowed {
		t.Fatal("second request from the same IP allowed, want the floor to deny")
	}
	if d, _ := l.Allow(ctx, req("192.0.2.1")); !d.Cached {
		t.Error("third request from the same IP not denied by the cache")
	}
	if d, _ := l.Allow(ctx, req("192.0.2.2")); !d.Allowed || d.Cached {
		t.Errorf("same key from another IP = %+v, want allowed by Redis", d)
	}
}

// TestDimensionsNotLeased: a hot request of two subjects under leasing is
// charged a request at a time, exactly, on the two subjects' own keys: a
// lease names one subject's buckets, and leasing this request would charge
// keys under a hash of both.
func TestDimensionsNotLeased(t *testing.T) {
	t.Parallel()
	c := testenv.Redis(t)
	prefix := testenv.Prefix(t, "dimlease")
	t.Cleanup(func() { testenv.DeleteKeys(t, c, prefix) })
	l := newLeasing(t, c, prefix, Options{LeaseMax: 64, DenyCacheSize: -1, SubjectKey: []byte("dimensions-lease-key")})
	ctx := context.Background()
	const ip, n = "198.51.100.7", 300
	bs := []Bucket{
		{ID: "floor", Limit: 1, Period: time.Hour, Burst: 1000, Subject: ip},
		{ID: "key", Limit: 1, Period: time.Hour, Burst: 1000},
	}
	for i := range n {
		d, err := l.Allow(ctx, Request{Subject: "hot-key", Buckets: bs, Cost: 1})
		if err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
	}
	if s := l.Stats(); s.Leased != 0 || s.Leases != 0 {
		t.Errorf("Stats = %d leased admissions, %d leases; want none", s.Leased, s.Leases)
	}
	floor, err := l.Peek(ctx, ip, bs[:1])
	if err != nil {
		t.Fatal(err)
	}
	key, err := l.Peek(ctx, "hot-key", []Bucket{{ID: "key", Limit: 1, Period: time.Hour, Burst: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	// Within the test's run a token at most refills (1 an hour).
	if got := floor[0].Remaining; got < 1000-n || got > 1000-n+1 {
		t.Errorf("floor has %d tokens, want %d", got, 1000-n)
	}
	if got := key[0].Remaining; got < 1000-n || got > 1000-n+1 {
		t.Errorf("key bucket has %d tokens, want %d", got, 1000-n)
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Errorf("keys under the prefix = %v, want the floor's and the key's only", keys)
	}
}
