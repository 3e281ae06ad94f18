package limiter

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// Leases over quota buckets: lease_return.lua gives a quota's unused tokens
// back only to the window the lease charged, a lease never outlives its
// quota window, and floors, usage reports and debt meet leases as
// documented in docs/authorizer.md ("Token leases", Quotas).

// quotaUsed returns the used count of the quota at key, -1 when the key
// is missing, and its window end (Unix ms): 1 ms after the key's expiry.
func quotaUsed(t *testing.T, c redis.UniversalClient, key string) (used, end int64) {
	t.Helper()
	ctx := context.Background()
	v, err := c.Get(ctx, key).Result()
	if err == redis.Nil {
		return -1, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	used, err = strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s = %q, want a quota's used: %v", key, v, err)
	}
	at, err := c.PExpireTime(ctx, key).Result()
	if err != nil || at < 0 {
		t.Fatalf("%s: PEXPIRETIME = %v, %v; want the window's end", key, at, err)
	}
	return used, at.Milliseconds() + 1
}

// leaseCall charges cost to bs as a lease does and returns the reply's
// window ends.
func leaseCall(t *testing.T, l *Limiter, subj string, bs []Bucket, cost int64) []int64 {
	t.Helper()
	res, err := l.evalLease(context.Background(), digestOf(subj), cost, bs)
	if err != nil {
		t.Fatal(err)
	}
	rd := replyReader{s: res}
	r, err := parseReply(&rd, len(bs))
	if err != nil || !r.allowed {
		t.Fatalf("lease call = %q, %v; want allowed", res, err)
	}
	ends := make([]int64, len(bs))
	for i := range ends {
		ends[i] = rd.next()
		if u := rd.next(); ends[i] != 0 && (u < 0 || u > 31*24*3600*1000) {
			t.Errorf("bucket %d: %d ms until the window's end", i, u)
		}
	}
	if rd.err != nil {
		t.Fatal(rd.err)
	}
	return ends
}

// TestLeaseReturnQuota runs lease_return.lua on quotas charged by a lease
// call: tokens go back to the window the lease charged, never below 0, and
// never to another window, unit or anchor.
func TestLeaseReturnQuota(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	prefix := testPrefix(t, c)
	ctx := context.Background()
	l := New(c, Options{Prefix: prefix, DenyCacheSize: -1, Timeout: time.Second})
	month := Bucket{ID: "q", Limit: 100, Period: time.Hour, Window: Monthly}
	rate := Bucket{ID: "r", Limit: 100, Period: time.Hour}
	anchored := month
	anchored.Anchor = time.Date(2024, 1, 15, 0, 0, 0, 0, time.UTC)

	tests := []struct {
		name   string
		charge int64
		after  func(key string, ends []int64) []int64 // runs before the return; may change the ends given
		give   []Bucket
		n      int64
		want   []int64
		used   int64  // the quota's used afterwards; -1 missing
		raw    string // else: the key's value afterwards
	}{
		{name: "same window", charge: 30, give: []Bucket{month}, n: 10, want: []int64{10}, used: 20},
		{name: "never below 0", charge: 5, give: []Bucket{month}, n: 12, want: []int64{5}, used: 0},
		{name: "stacked with a rate bucket", charge: 20, give: []Bucket{rate, month}, n: 15, want: []int64{15, 15}, used: 5},
		{name: "a limit change keeps the window", charge: 30, give: []Bucket{{ID: "q", Limit: 500, Period: time.Hour, Window: Monthly}}, n: 10, want: []int64{10}, used: 20},
		{
			name: "another window: nothing back", charge: 30, give: []Bucket{month}, n: 10, want: []int64{0}, used: 30,
			after: func(_ string, ends []int64) []int64 { return []int64{ends[0] - 24*3600*1000} },
		},
		{name: "no window given: nothing back", charge: 30, give: []Bucket{month}, n: 10, want: []int64{0}, used: 30,
			after: func(string, []int64) []int64 { return []int64{0} }},
		{name: "anchor changed: nothing back", charge: 30, give: []Bucket{anchored}, n: 10, want: []int64{0}, used: 30},
		{name: "unit changed: nothing back", charge: 30, give: []Bucket{{ID: "q", Limit: 100, Period: time.Hour, Window: Yearly}}, n: 10, want: []int64{0}, used: 30},
		{
			name: "window ended (key gone): nothing written", charge: 30, give: []Bucket{month}, n: 10, want: []int64{0}, used: -1,
			after: func(key string, ends []int64) []int64 {
				if err := c.Del(ctx, key).Err(); err != nil {
					t.Fatal(err)
				}
				return ends
			},
		},
		{
			name: "a later window: nothing back", charge: 30, give: []Bucket{month}, n: 10, want: []int64{0}, used: 30,
			after: func(key string, ends []int64) []int64 {
				// The key as the next window would hold it: another end.
				next := time.UnixMilli(ends[0]).Add(28 * 24 * time.Hour)
				if err := c.Set(ctx, key, "30", 0).Err(); err != nil {
					t.Fatal(err)
				}
				if err := c.PExpireAt(ctx, key, next).Err(); err != nil {
					t.Fatal(err)
				}
				return ends
			},
		},
		{
			name: "no expiry: nothing back", charge: 30, give: []Bucket{month}, n: 10, want: []int64{0}, raw: "30",
			after: func(key string, ends []int64) []int64 {
				if err := c.Persist(ctx, key).Err(); err != nil {
					t.Fatal(err)
				}
				return ends
			},
		},
		{
			name: "not an integer: nothing back", charge: 30, give: []Bucket{month}, n: 10, want: []int64{0}, raw: "30.5",
			after: func(key string, ends []int64) []int64 {
				if err := c.Set(ctx, key, "30.5", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				return ends
			},
		},
	}
	for i, tt := range tests {
		subj := subject(t, i)
		charged := []Bucket{month}
		if len(tt.give) == 2 {
			charged = []Bucket{rate, month}
		}
		ends := leaseCall(t, l, subj, charged, tt.charge)
		key := bucketKey(prefix, subj, month)
		if tt.after != nil {
			ends = tt.after(key, ends)
		}
		got, err := l.returnTokens(ctx, digestOf(subj), tt.give, ends, tt.n)
		if err != nil {
			t.Fatalf("%s: returnTokens: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: tokens taken back (-want +got):\n%s", tt.name, diff)
		}
		if tt.raw != "" {
			if v, err := c.Get(ctx, key).Result(); v != tt.raw {
				t.Errorf("%s: %s = %q, %v; want %q untouched", tt.name, key, v, err, tt.raw)
			}
		} else if used, _ := quotaUsed(t, c, key); used != tt.used {
			t.Errorf("%s: used = %d, want %d", tt.name, used, tt.used)
		}
	}
}

// TestLeaseQuotaWindowBoundary: a lease taken just before a daily window
// ends is not used after the end, and what it held goes back to nothing:
// the new window, which never charged it, keeps exactly what it used.
func TestLeaseQuotaWindowBoundary(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	prefix := testPrefix(t, c)
	ctx := context.Background()
	q, end := dailyEndingIn(t, c, "q", 100000, 2*time.Second)
	// A long TTL: without the window bound the lease would still be used
	// after the end, and the sweeper does not run during the test.
	l := newLeasing(t, c, prefix, Options{LeaseMax: 64, LeaseTTL: time.Minute, DenyCacheSize: -1})
	other := New(c, Options{Prefix: prefix, DenyCacheSize: -1, Timeout: time.Second})
	req := Request{Subject: "s", Buckets: []Bucket{q}, Cost: 1}
	key := bucketKey(prefix, "s", q)

	for i := 0; l.Stats().LeaseOutstanding == 0; i++ {
		if i == 200 || !redisNow(t, c).Before(end.Add(-500*time.Millisecond)) {
			t.Fatalf("no lease after %d requests", i)
		}
		if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("Allow() = %+v, %v", d, err)
		}
	}
	held := l.Stats().LeaseOutstanding
	if used, e := quotaUsed(t, c, key); e != end.UnixMilli() || used < held {
		t.Fatalf("before the end: used %d, end %d; want the lease's %d charged to the window ending %d", used, e, held, end.UnixMilli())
	}
	awaitRedisTime(t, c, end.Add(100*time.Millisecond), 10*time.Millisecond)
	// The new window: 5 requests elsewhere.
	for i := range 5 {
		if d, err := other.Allow(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("other Allow() #%d = %+v, %v", i, d, err)
		}
	}
	// The lease is not used after its window's end.
	d, err := l.Allow(ctx, req)
	if err != nil || !d.Allowed || d.Leased {
		t.Fatalf("Allow() after the end = %+v, %v; want allowed, not from the old lease", d, err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	used, e := quotaUsed(t, c, key)
	if e != end.Add(24*time.Hour).UnixMilli() || used != 6 {
		t.Errorf("new window: used %d, end %d; want 6 (5 + 1, nothing of the old lease), end %d", used, e, end.Add(24*time.Hour).UnixMilli())
	}
	t.Logf("old lease held %d tokens at the end; returned %d, lost %d", held, l.Stats().LeaseReturned, l.Stats().LeaseLost)
}

// TestLeaseQuotaInteractions: floors, usage reports and debt with leases
// on a quota, one Limiter calling sequentially; after Close the quota's
// used is exactly what was admitted plus the usage reported.
func TestLeaseQuotaInteractions(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	prefix := testPrefix(t, c)
	ctx := context.Background()

	t.Run("floor", func(t *testing.T) {
		l := newLeasing(t, c, prefix, Options{LeaseMax: 64, DenyCacheSize: -1})
		q := Bucket{ID: "q", Limit: 400, Period: time.Hour, Window: Monthly, MinRemaining: 100}
		req := Request{Subject: "floor", Buckets: []Bucket{q}, Cost: 1}
		var admitted int64
		for range 500 {
			d, err := l.Allow(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
		}
		st := l.Stats()
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		used, _ := quotaUsed(t, c, bucketKey(prefix, "floor", q))
		t.Logf("admitted %d, used %d; leases %d, leased admissions %d, script calls %d", admitted, used, st.Leases, st.Leased, st.RedisCalls)
		if admitted != 300 || used != 300 {
			t.Errorf("admitted %d, used %d; want 300 each (limit 400 less the floor 100)", admitted, used)
		}
		if st.Leases == 0 {
			t.Errorf("no lease: the test did not lease")
		}
	})

	t.Run("usage while leased", func(t *testing.T) {
		l := newLeasing(t, c, prefix, Options{LeaseMax: 64, LeaseTTL: time.Minute, DenyCacheSize: -1})
		q := Bucket{ID: "q", Limit: 1000, Period: time.Hour, Window: Monthly}
		req := Request{Subject: "usage", Buckets: []Bucket{q}, Cost: 1}
		var admitted int64
		for range 40 {
			if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
				t.Fatalf("Allow() = %+v, %v", d, err)
			}
			admitted++
		}
		if l.Stats().LeaseOutstanding == 0 {
			t.Fatal("no lease out")
		}
		for _, cost := range []int64{100, -30} {
			if _, err := l.Charge(ctx, "usage", req.Buckets, cost, "api", ""); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if used, _ := quotaUsed(t, c, bucketKey(prefix, "usage", q)); used != admitted+70 {
			t.Errorf("used %d, want admitted %d + 100 - 30", used, admitted)
		}
	})

	t.Run("debt: no lease", func(t *testing.T) {
		l := newLeasing(t, c, prefix, Options{LeaseMax: 64, DenyCacheSize: -1})
		for i, b := range []Bucket{
			{ID: "q", Limit: 100, Period: time.Hour, Window: Monthly},
			{ID: "r", Limit: 100, Period: time.Hour},
		} {
			subj := "debt-" + strconv.Itoa(i)
			req := Request{Subject: subj, Buckets: []Bucket{b}, Cost: 1}
			if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
				t.Fatalf("Allow() = %+v, %v", d, err)
			}
			if _, err := l.Charge(ctx, subj, req.Buckets, 150, "api", ""); err != nil {
				t.Fatal(err)
			}
			for range 50 {
				if d, err := l.Allow(ctx, req); err != nil || d.Allowed {
					t.Fatalf("%s: Allow() in debt = %+v, %v; want denied", b.ID, d, err)
				}
			}
		}
		if st := l.Stats(); st.Leases != 0 || st.LeaseOutstanding != 0 {
			t.Errorf("leases %d, outstanding %d; want no lease for a subject in debt", st.Leases, st.LeaseOutstanding)
		}
	})
}

// TestLeaseSizeFloor: a lease is sized from what the limiting bucket holds
// above the request's largest floor, so the script never denies it for a
// floor (each such deny costs a round trip).
func TestLeaseSizeFloor(t *testing.T) {
	tests := []struct {
		remaining, floor, want int64
	}{
		{1000, 0, 64},
		{1000, 900, 25},
		{1000, 990, 1},
		{100, 100, 1},
		{50, 100, 1},
		{-1, 0, 1},
	}
	for _, tt := range tests {
		var s leaseSlot
		s.remaining.Store(tt.remaining)
		if got := s.size(1000, 64, 1, tt.floor); got != tt.want {
			t.Errorf("size(remaining %d, floor %d) = %d, want %d", tt.remaining, tt.floor, got, tt.want)
		}
	}
}
