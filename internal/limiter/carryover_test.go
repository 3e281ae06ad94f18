package limiter

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestChangeOfNumbersKeepsUsed pins the issue "An upgrade takes effect at
// once": a bucket whose limit, burst or period changes keeps the tokens
// its subject used, not the time until it is full again. An upgrade leaves
// new burst - used at once; a downgrade leaves 0 (never a debt) and refills
// at the new rate from the first call that sees it, and that call writes
// the conversion even when it denies, so the next call counts from it.
//
// Each case spends used tokens under from, changes the bucket to to (same
// id, so the same key, as a rule moving to another plan), peeks, then
// calls Allow once. The refill during the test (milliseconds) is far below
// a token at these rates, so the whole-token figures are exact.
func TestChangeOfNumbersKeepsUsed(t *testing.T) {
	c := newClient(t, 4)
	prefix := testPrefix(t, c)
	l := New(c, Options{Prefix: prefix, DenyCacheSize: -1, BreakerThreshold: -1, Timeout: time.Second})
	const h, m = time.Hour, time.Minute
	tests := []struct {
		name          string
		from, to      Bucket
		used          int64
		wantRemaining int64         // Peek after the change
		wantAllowed   bool          // the next Allow of cost 1
		wantRetry     time.Duration // its RetryAfter when denied (within 10 ms below)
		wantReset     time.Duration // Peek's Reset after the change (within 10 ms below)
		// refillScale widens that: the old rate's refill between the
		// charge and the peek counts T_new/T_old times (60 for 1m to 1h),
		// so the tolerance is that many times the time measured between
		// them (17 ms under a loaded make test is a second here).
		refillScale time.Duration
		// then, when denied: this long later (the retry, a token at the
		// new rate) the next Allow passes (the conversion was written by
		// the deny; without it the bucket would be converted again from
		// the old rate and still deny).
		refill time.Duration
	}{
		{name: "upgrade 100/1h used 100 to 1000/1h", from: Bucket{Limit: 100, Period: h}, used: 100,
			to: Bucket{Limit: 1000, Period: h}, wantRemaining: 900, wantAllowed: true, wantReset: 100 * 3600 * time.Millisecond},
		{name: "upgrade 10/1m used 5 to 1000/1m", from: Bucket{Limit: 10, Period: m}, used: 5,
			to: Bucket{Limit: 1000, Period: m}, wantRemaining: 995, wantAllowed: true, wantReset: 5 * 60 * time.Millisecond},
		{name: "upgrade 1/1h used 1 to 100/1h", from: Bucket{Limit: 1, Period: h}, used: 1,
			to: Bucket{Limit: 100, Period: h}, wantRemaining: 99, wantAllowed: true, wantReset: 36 * time.Second},
		{name: "downgrade 1000/1m used 995 to 10/1m", from: Bucket{Limit: 1000, Period: m}, used: 995,
			to: Bucket{Limit: 10, Period: m}, wantRemaining: 0, wantRetry: 6 * time.Second, wantReset: m, refill: 6 * time.Second},
		{name: "period 10/1m used 4 to 10/1h", from: Bucket{Limit: 10, Period: m}, used: 4,
			to: Bucket{Limit: 10, Period: h}, wantRemaining: 6, wantAllowed: true, wantReset: 4 * 6 * time.Minute, refillScale: 60},
		{name: "burst down 10/1m burst 100 used 50 to burst 10", from: Bucket{Limit: 10, Period: m, Burst: 100}, used: 50,
			to: Bucket{Limit: 10, Period: m, Burst: 10}, wantRemaining: 0, wantRetry: 6 * time.Second, wantReset: m},
		{name: "burst up 10/1m used 10 to burst 100", from: Bucket{Limit: 10, Period: m}, used: 10,
			to: Bucket{Limit: 10, Period: m, Burst: 100}, wantRemaining: 90, wantAllowed: true, wantReset: m},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			subj := subject(t, i)
			tt.from.ID, tt.to.ID = "b", "b"
			charged := time.Now()
			if d, err := l.Allow(ctx, Request{Subject: subj, Buckets: []Bucket{tt.from}, Cost: tt.used}); err != nil || !d.Allowed {
				t.Fatalf("Allow(used %d) = %+v, %v", tt.used, d, err)
			}
			key := prefix + "{" + SubjectHash(subj) + "}:b"
			stored := c.Get(ctx, key).Val()

			// A peek reports the converted bucket and writes nothing.
			st, err := l.Peek(ctx, subj, []Bucket{tt.to})
			if err != nil {
				t.Fatal(err)
			}
			// The bucket refills from the charge on: its reset shrinks by
			// the time since (scaled), whatever a loaded machine takes.
			tol := 10*time.Millisecond + max(tt.refillScale, 1)*time.Since(charged)
			if st[0].Remaining != tt.wantRemaining || st[0].Reset > tt.wantReset || st[0].Reset < tt.wantReset-tol {
				t.Errorf("Peek after the change = %+v, want %d remaining, reset %v", st[0], tt.wantRemaining, tt.wantReset)
			}
			if v := c.Get(ctx, key).Val(); v != stored {
				t.Errorf("the peek wrote %q over %q", v, stored)
			}

			d, err := l.Allow(ctx, Request{Subject: subj, Buckets: []Bucket{tt.to}, Cost: 1})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tt.wantAllowed {
				t.Fatalf("Allow after the change = %+v, want allowed %v", d, tt.wantAllowed)
			}
			if d.Allowed {
				if d.Remaining != tt.wantRemaining-1 {
					t.Errorf("Allow after the change = %+v, want %d remaining", d, tt.wantRemaining-1)
				}
			} else if d.Remaining != 0 || d.RetryAfter > tt.wantRetry || d.RetryAfter < tt.wantRetry-10*time.Millisecond {
				t.Errorf("Allow after the change = %+v, want 0 remaining, retry %v", d, tt.wantRetry)
			}
			// Whatever the outcome, the key now holds the new numbers.
			T := strconv.FormatInt(periodMicros(tt.to.Period)/tt.to.Limit, 10)
			if f := strings.Fields(c.Get(ctx, key).Val()); len(f) != 3 || f[1] != T || f[2] != strconv.FormatInt(tt.to.capacity(), 10) {
				t.Errorf("key holds %q, want \"<tat> %s %d\"", f, T, tt.to.capacity())
			}
			if d.Allowed {
				return
			}
			// The deny wrote the conversion: a second later (of Redis TIME,
			// the scripts' clock) the wait is a second shorter (converted
			// again from the old rate it would still be the full wait).
			awaitRedisTime(t, c, redisNow(t, c).Add(time.Second), 10*time.Millisecond)
			d, err = l.Allow(ctx, Request{Subject: subj, Buckets: []Bucket{tt.to}, Cost: 1})
			if err != nil || d.Allowed || d.RetryAfter > tt.wantRetry-time.Second || d.RetryAfter < tt.wantRetry-time.Second-100*time.Millisecond {
				t.Errorf("Allow 1 s later = %+v, %v, want a deny with retry %v", d, err, tt.wantRetry-time.Second)
			}
			if tt.refill == 0 {
				return
			}
			// The bucket holds a token again at the retry, not before.
			took := testenv.Await(t, d.RetryAfter+5*time.Second, 10*time.Millisecond, "a token at the new rate", func() bool {
				st, err := l.Peek(ctx, subj, []Bucket{tt.to})
				if err != nil {
					t.Fatal(err)
				}
				return st[0].Remaining >= 1
			})
			if took < d.RetryAfter-250*time.Millisecond {
				t.Errorf("a token %v after a deny with retry %v: RetryAfter too long", took, d.RetryAfter)
			}
			if d, err := l.Allow(ctx, Request{Subject: subj, Buckets: []Bucket{tt.to}, Cost: 1}); err != nil || !d.Allowed || d.Remaining != 0 {
				t.Errorf("Allow at the retry, %v after the change = %+v, %v, want the first token at the new rate", tt.refill, d, err)
			}
		})
	}
}

// TestPreviousVersionValue pins the upgrade of Sluice itself: during a
// deploy both versions run, and the previous one stored "<tat>" alone. The
// new script reads such a value with the bucket's current numbers, as the
// previous version did (so a change of numbers during the deploy keeps the
// time until full, the old behaviour), and its next write stores the new
// form. Values neither form reads as a full bucket, never an error.
func TestPreviousVersionValue(t *testing.T) {
	c := newClient(t, 2)
	prefix := testPrefix(t, c)
	l := New(c, Options{Prefix: prefix, DenyCacheSize: -1, BreakerThreshold: -1, Timeout: time.Second})
	ctx := context.Background()
	b10 := Bucket{ID: "b", Limit: 10, Period: time.Minute}     // T = 6 s
	b1000 := Bucket{ID: "b", Limit: 1000, Period: time.Minute} // T = 60 ms
	tests := []struct {
		name   string
		value  func(now int64) string // now: µs since 2024 (Redis TIME)
		bucket Bucket
		want   int64 // Remaining of a Peek
	}{
		// Used 3 of 10/1m, written by the previous version.
		{"previous version, same numbers", func(now int64) string { return strconv.FormatInt(now+3*6_000_000, 10) }, b10, 7},
		{"previous version, fractional", func(now int64) string { return strconv.FormatFloat(float64(now)+2.5*6e6, 'f', -1, 64) }, b10, 7},
		// Used 5 of 10/1m (full in 30 s) under the previous version, read
		// with 1000/1m: 30 s is 500 tokens of the new rate.
		{"previous version, new numbers keep the time until full", func(now int64) string { return strconv.FormatInt(now+30_000_000, 10) }, b1000, 500},
		{"new form, new numbers keep what was used", func(now int64) string { return strconv.FormatInt(now+30_000_000, 10) + " 6000000 10" }, b1000, 995},
		{"garbage", func(int64) string { return "x y z" }, b10, 10},
		{"two fields", func(now int64) string { return strconv.FormatInt(now+30_000_000, 10) + " 6000000" }, b10, 10},
		{"T zero", func(now int64) string { return strconv.FormatInt(now+30_000_000, 10) + " 0 10" }, b10, 10},
		{"T negative", func(now int64) string { return strconv.FormatInt(now+30_000_000, 10) + " -6 10" }, b10, 10},
		{"T nan", func(now int64) string { return strconv.FormatInt(now+30_000_000, 10) + " nan 10" }, b10, 10},
		{"burst inf", func(now int64) string { return strconv.FormatInt(now+30_000_000, 10) + " 6000000 inf" }, b10, 10},
		{"tat inf, new numbers: empty", func(int64) string { return "inf 1 10" }, b10, 0},
		{"tiny T: used everything, clamped", func(now int64) string { return strconv.FormatInt(now+30_000_000, 10) + " 1e-300 10" }, b10, 0},
		{"huge T: used nothing", func(now int64) string { return strconv.FormatInt(now+30_000_000, 10) + " 1e300 10" }, b10, 10},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subj := subject(t, i)
			key := prefix + "{" + SubjectHash(subj) + "}:b"
			now := redisNow(t, c).UnixMicro() - 1704067200*1_000_000
			if err := c.Set(ctx, key, tt.value(now), time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			st, err := l.Peek(ctx, subj, []Bucket{tt.bucket})
			if err != nil || st[0].Remaining != tt.want {
				t.Fatalf("Peek = %+v, %v, want %d remaining", st, err, tt.want)
			}
			d, err := l.Allow(ctx, Request{Subject: subj, Buckets: []Bucket{tt.bucket}, Cost: 1})
			if err != nil {
				t.Fatalf("Allow: %v: the script must answer whatever a key holds", err)
			}
			if d.Allowed != (tt.want > 0) || (d.Allowed && d.Remaining != tt.want-1) {
				t.Errorf("Allow = %+v, want allowed %v with %d left", d, tt.want > 0, tt.want-1)
			}
			v, err := c.Get(ctx, key).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			// Written on an allow; on a deny only when converted (the
			// "inf" and tiny-T cases are).
			T := strconv.FormatInt(periodMicros(tt.bucket.Period)/tt.bucket.Limit, 10)
			if f := strings.Fields(v); len(f) != 3 || f[1] != T || f[2] != strconv.FormatInt(tt.bucket.capacity(), 10) {
				t.Errorf("key holds %q after the call, want \"<tat> %s %d\"", v, T, tt.bucket.capacity())
			}
		})
	}
}

// TestUpgradeBypassesDenyCache pins that an upgrade takes effect at once
// also for a subject the local deny cache holds: the cache key covers every
// bucket's numbers, so the new numbers miss it and Redis answers.
func TestUpgradeBypassesDenyCache(t *testing.T) {
	c := newClient(t, 2)
	l := New(c, Options{Prefix: testPrefix(t, c), Timeout: testTimeout}) // default deny cache
	ctx := context.Background()
	from := []Bucket{{ID: "b", Limit: 1, Period: time.Hour}}
	to := []Bucket{{ID: "b", Limit: 100, Period: time.Hour}}
	for i, want := range []bool{true, false, false} {
		d, err := l.Allow(ctx, Request{Subject: "s", Buckets: from, Cost: 1})
		if err != nil || d.Allowed != want || (i == 2 && !d.Cached) {
			t.Fatalf("Allow(1/1h) #%d = %+v, %v, want allowed %v (the third from the deny cache)", i+1, d, err, want)
		}
	}
	d, err := l.Allow(ctx, Request{Subject: "s", Buckets: to, Cost: 1})
	if err != nil || !d.Allowed || d.Cached || d.Remaining != 98 {
		t.Fatalf("Allow(100/1h) = %+v, %v, want allowed by Redis with 98 left", d, err)
	}
}
