package limiter

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// calendarScript runs bucket.lua's window function alone, with a given
// now: the one implementation, as every script has it, so the table below
// tests exactly what runs. It is called as a peek of one quota whose
// amount, ARGV[1], is the now to compute at; its key (KEYS[1]) is never
// written (a peek writes nothing) and never exists.
func calendarScript(t *testing.T) *redis.Script {
	t.Helper()
	return redis.NewScript("local charging, every_end = false, true\n" + bucketSrc + "local s, e = window(ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[1]))\nreturn string.format('%d %d', s, e)")
}

// us2024 is t in the script's time: microseconds since 2024-01-01 UTC.
func us2024(t time.Time) int64 { return t.UnixMicro() - epoch2024 }

// TestCalendarWindows is the table of the script's window arithmetic:
// UTC alignment, anchors before and after now, day 31 clamped to the
// month's end, leap years, Feb 29 anniversaries, and exact boundaries.
func TestCalendarWindows(t *testing.T) {
	t.Parallel()
	c := newClient(t, 2)
	script := calendarScript(t)
	d := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name        string
		unit        byte
		anchor      string // "" = UTC alignment (anchor 0)
		now         string
		start, stop string
	}{
		{"day, UTC", 'd', "", "2026-12-01T05:00:00Z", "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"},
		{"day at midnight exactly", 'd', "", "2026-12-01T00:00:00Z", "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"},
		{"day, a microsecond before midnight", 'd', "", "2026-11-30T23:59:59.999999Z", "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"day, anchored 08:30", 'd', "2026-06-01T08:30:00Z", "2026-12-01T05:00:00Z", "2026-11-30T08:30:00Z", "2026-12-01T08:30:00Z"},
		{"day, anchor in the future", 'd', "2030-01-01T12:00:00Z", "2026-12-01T13:00:00Z", "2026-12-01T12:00:00Z", "2026-12-02T12:00:00Z"},
		{"week, UTC: Monday", 'w', "", "2026-12-01T05:00:00Z", "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"},
		{"week, anchored Thursday 10:00+01:00", 'w', "2026-12-03T10:00:00+01:00", "2026-12-01T05:00:00Z", "2026-11-26T09:00:00Z", "2026-12-03T09:00:00Z"},
		{"month, UTC", 'm', "", "2026-12-01T00:00:00Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"month, a microsecond before the 1st", 'm', "", "2026-11-30T23:59:59.999999Z", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"month from Jan 31, before Feb's end", 'm', "2026-01-31T10:00:00Z", "2026-02-28T09:00:00Z", "2026-01-31T10:00:00Z", "2026-02-28T10:00:00Z"},
		{"month from Jan 31, Feb clamped", 'm', "2026-01-31T10:00:00Z", "2026-02-28T10:00:00Z", "2026-02-28T10:00:00Z", "2026-03-31T10:00:00Z"},
		{"month from Jan 31, leap Feb 29", 'm', "2024-01-31T00:00:00Z", "2024-02-29T12:00:00Z", "2024-02-29T00:00:00Z", "2024-03-31T00:00:00Z"},
		{"month from Jan 31, April 30", 'm', "2024-01-31T00:00:00Z", "2024-04-30T00:00:00Z", "2024-04-30T00:00:00Z", "2024-05-31T00:00:00Z"},
		{"month from Dec 31 across the year", 'm', "2026-12-31T00:00:00Z", "2027-01-15T00:00:00Z", "2026-12-31T00:00:00Z", "2027-01-31T00:00:00Z"},
		{"month, anchor before 2024", 'm', "1999-12-31T00:00:00Z", "2026-02-15T00:00:00Z", "2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z"},
		{"month, anchor in the future", 'm', "2027-03-31T00:00:00Z", "2026-12-15T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-31T00:00:00Z"},
		{"month, anchored on the 15th", 'm', "2026-01-15T00:00:00Z", "2026-12-01T05:00:00Z", "2026-11-15T00:00:00Z", "2026-12-15T00:00:00Z"},
		{"year, UTC", 'y', "", "2026-12-31T23:59:59Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"year from Feb 29, common year", 'y', "2024-02-29T00:00:00Z", "2025-03-01T00:00:00Z", "2025-02-28T00:00:00Z", "2026-02-28T00:00:00Z"},
		{"year from Feb 29, leap year again", 'y', "2024-02-29T00:00:00Z", "2028-02-29T00:00:00Z", "2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"},
		{"year, leap day of 2100 absent", 'y', "2096-02-29T00:00:00Z", "2100-03-01T00:00:00Z", "2100-02-28T00:00:00Z", "2101-02-28T00:00:00Z"},
		{"year from 2000 (a leap century)", 'y', "2000-02-29T00:00:00Z", "2026-12-01T00:00:00Z", "2026-02-28T00:00:00Z", "2027-02-28T00:00:00Z"},
	}
	for _, tt := range tests {
		anchor := int64(0)
		if tt.anchor != "" {
			anchor = us2024(d(tt.anchor))
		}
		got, err := script.Run(context.Background(), c, []string{"calendar-test:{}:never-touched"}, us2024(d(tt.now)), 1, string(tt.unit), anchor, 0).Text()
		if err != nil {
			t.Fatalf("%s: window script error = %v", tt.name, err)
		}
		want := formatWindow(us2024(d(tt.start)), us2024(d(tt.stop)))
		if got != want {
			t.Errorf("%s: window(%c, %s, %s) = %s, want [%s, %s) = %s", tt.name, tt.unit, tt.anchor, tt.now,
				describeWindow(got), tt.start, tt.stop, want)
		}
	}
}

func formatWindow(start, stop int64) string {
	return strconv.FormatInt(start, 10) + " " + strconv.FormatInt(stop, 10)
}

// describeWindow turns the script's "<start> <stop>" into RFC 3339 times.
func describeWindow(s string) string {
	var out []string
	for _, f := range strings.Fields(s) {
		v, _ := strconv.ParseInt(f, 10, 64)
		out = append(out, time.UnixMicro(v+epoch2024).UTC().Format(time.RFC3339Nano))
	}
	return strings.Join(out, " .. ")
}

// dailyEndingIn returns a daily quota bucket whose current window ends d
// after Redis's now: its anchor is that end, less a day.
func dailyEndingIn(t *testing.T, c redis.UniversalClient, id string, limit int64, d time.Duration) (Bucket, time.Time) {
	t.Helper()
	end := redisNow(t, c).Add(d).Truncate(time.Second)
	if end.Before(redisNow(t, c).Add(d - time.Second)) {
		end = end.Add(time.Second)
	}
	return Bucket{ID: id, Limit: limit, Period: 24 * time.Hour, Window: Daily, Anchor: end.Add(-24 * time.Hour)}, end
}

// awaitRedisTime polls Redis TIME every interval until it reaches at: the
// scripts' clock, which the test cannot move.
func awaitRedisTime(t *testing.T, c redis.UniversalClient, at time.Time, every time.Duration) {
	t.Helper()
	within := time.Until(at) + 5*time.Second
	testenv.Await(t, within, every, "Redis TIME at "+at.Format(time.RFC3339Nano), func() bool {
		return !redisNow(t, c).Before(at)
	})
}

// TestQuotaExact: 4 clients × 32 goroutines hammer one subject's 2 rate and
// 2 quota buckets; exactly the smallest quota's worth is admitted, and
// every bucket was charged exactly as many times (all or nothing).
func TestQuotaExact(t *testing.T) {
	t.Parallel()
	const clients, goroutines, tries = 4, 32, 12
	var ls []*Limiter
	var prefix string
	for i := range clients {
		c := newClient(t, goroutines)
		if i == 0 {
			prefix = testPrefix(t, c)
		}
		ls = append(ls, New(c, Options{Prefix: prefix, DenyCacheSize: -1, BreakerThreshold: -1, Timeout: 5 * time.Second}))
	}
	c := newClient(t, 2)
	// The daily window ends 12 h from now, so no test run crosses it.
	day, _ := dailyEndingIn(t, c, "q-day", 500, 12*time.Hour)
	buckets := []Bucket{
		// Slow enough (116/s) that the charges show after the run.
		{ID: "r-api", Limit: 10_000_000, Period: 24 * time.Hour},
		{ID: "r-route", Limit: 10_000_000, Period: 24 * time.Hour, Burst: 20_000_000},
		day,
		{ID: "q-month", Limit: 100_000, Period: 30 * 24 * time.Hour, Window: Monthly},
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for _, l := range ls {
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range tries {
					d, err := l.Allow(context.Background(), Request{Subject: "exact", Buckets: buckets, Cost: 1})
					if err != nil {
						t.Errorf("Allow() error = %v", err)
						return
					}
					if d.Allowed {
						admitted.Add(1)
					} else if d.Bucket != 2 {
						t.Errorf("denied by bucket %d, want the daily quota (2)", d.Bucket)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if got := admitted.Load(); got != 500 {
		t.Errorf("admitted %d of %d tries, want exactly the quota, 500", got, clients*goroutines*tries)
	}
	st, err := ls[0].Peek(context.Background(), "exact", buckets)
	if err != nil {
		t.Fatal(err)
	}
	// Every bucket was charged exactly 500 times.
	for i, want := range []int64{10_000_000 - 500, 20_000_000 - 500} {
		if st[i].Remaining < want || st[i].Remaining > want+1000 {
			t.Errorf("Peek() bucket %d = %+v, want %d plus the refill since", i, st[i], want)
		}
	}
	if st[2].Remaining != 0 || st[3].Remaining != 100_000-500 {
		t.Errorf("Peek() = %+v, want day 0, month 99500", st)
	}
}

// TestQuotaWindowReset: a daily quota anchored so that its window ends 2 s
// into the test is exhausted, denied with a retry up to that end, still
// denied just before it, and full again right after it (polling Redis
// TIME: no long sleep). Its key expires with the window.
func TestQuotaWindowReset(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	l := New(c, Options{Prefix: testPrefix(t, c), DenyCacheSize: -1, BreakerThreshold: -1, Timeout: time.Second})
	ctx := context.Background()
	q, end := dailyEndingIn(t, c, "q", 3, 2*time.Second)
	req := Request{Subject: "s", Buckets: []Bucket{{ID: "r", Limit: 1000, Period: time.Second}, q}, Cost: 1}
	for i := range 3 {
		if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("Allow() #%d = %+v, %v; want allowed", i+1, d, err)
		}
	}
	d, err := l.Allow(ctx, req)
	now := redisNow(t, c)
	if err != nil || d.Allowed || d.Bucket != 1 {
		t.Fatalf("Allow() #4 = %+v, %v; want denied by the quota", d, err)
	}
	if want := end.Sub(now); d.RetryAfter < want-50*time.Millisecond || d.RetryAfter > want+50*time.Millisecond {
		t.Errorf("RetryAfter = %v, want the time to the window's end, %v", d.RetryAfter, want)
	}
	if d.Reset != d.RetryAfter || d.Limit != 3 || d.Remaining != 0 {
		t.Errorf("deny = %+v, want reset = retry, limit 3, remaining 0", d)
	}
	pttl, err := c.PTTL(ctx, bucketKey(l.prefix, "s", q)).Result()
	if err != nil || pttl < end.Sub(now)-100*time.Millisecond || pttl > end.Sub(now)+10*time.Millisecond {
		t.Errorf("PTTL = %v, %v; want the key to expire with the window, in %v", pttl, err, end.Sub(now))
	}
	// Just before the end: still denied.
	awaitRedisTime(t, c, end.Add(-150*time.Millisecond), 20*time.Millisecond)
	if d, err := l.Allow(ctx, req); err != nil || d.Allowed {
		t.Errorf("Allow() just before the end = %+v, %v; want denied", d, err)
	}
	// Right after it: a fresh window.
	awaitRedisTime(t, c, end, 5*time.Millisecond)
	d, err = l.Allow(ctx, req)
	if err != nil || !d.Allowed || d.Bucket != 1 || d.Remaining != 2 {
		t.Errorf("Allow() after the end = %+v, %v; want allowed by a fresh quota with 2 left", d, err)
	}
	if d.Reset < 24*time.Hour-time.Second || d.Reset > 24*time.Hour {
		t.Errorf("Reset after the end = %v, want about a day", d.Reset)
	}
}

// TestQuotaStacked: with rate and quota buckets, a deny by either kind
// charges neither; a change of the quota's limit keeps what it used.
func TestQuotaStacked(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	l := New(c, Options{Prefix: testPrefix(t, c), DenyCacheSize: -1, BreakerThreshold: -1, Timeout: time.Second})
	ctx := context.Background()
	rate := Bucket{ID: "r", Limit: 2, Period: time.Hour}
	month := Bucket{ID: "q", Limit: 3, Period: 30 * 24 * time.Hour, Window: Monthly}
	peek := func(bs ...Bucket) []BucketState {
		st, err := l.Peek(ctx, "s", bs)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	allow := func(bs ...Bucket) Decision {
		d, err := l.Allow(ctx, Request{Subject: "s", Buckets: bs, Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for range 2 {
		if d := allow(rate, month); !d.Allowed {
			t.Fatalf("Allow() = %+v, want allowed", d)
		}
	}
	// The rate bucket denies: the quota is not charged.
	if d := allow(rate, month); d.Allowed || d.Bucket != 0 {
		t.Fatalf("Allow() = %+v, want denied by the rate bucket", d)
	}
	if st := peek(month); st[0].Remaining != 1 {
		t.Errorf("quota after a rate deny = %+v, want 1 left (not charged)", st)
	}
	// The quota denies: the (bigger) rate bucket is not charged.
	big := Bucket{ID: "r2", Limit: 100, Period: time.Hour}
	if d := allow(big, month); !d.Allowed || d.Bucket != 1 || d.Remaining != 0 {
		t.Fatalf("Allow() = %+v, want allowed, the quota limiting with 0 left", d)
	}
	d := allow(big, month)
	if d.Allowed || d.Bucket != 1 || d.RetryAfter < time.Hour {
		t.Fatalf("Allow() = %+v, want denied by the quota until the month ends", d)
	}
	if st := peek(big); st[0].Remaining != 99 {
		t.Errorf("rate bucket after a quota deny = %+v, want 99 (not charged)", st)
	}
	// An upgrade of the monthly quota keeps what the month used (3).
	up := month
	up.Limit = 1000
	if d := allow(big, up); !d.Allowed || d.Bucket != 0 && d.Remaining != 996 {
		t.Fatalf("Allow() after an upgrade = %+v, want allowed", d)
	}
	if st := peek(up); st[0].Remaining != 996 {
		t.Errorf("quota after an upgrade to 1000 = %+v, want 996 (used 4 carried over)", st)
	}
	// A downgrade below what was used: 0 left, until the window ends.
	down := month
	down.Limit = 2
	if d := allow(down); d.Allowed || d.RetryAfter < time.Hour {
		t.Errorf("Allow() after a downgrade to 2 = %+v, want denied until the window ends", d)
	}
}

// TestMinRemaining: a floor of 3 on a bucket of 10 admits 7 requests, then
// denies with the retry one token takes; a quota's floor the same, until
// its window ends.
func TestMinRemaining(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	l := New(c, Options{Prefix: testPrefix(t, c), DenyCacheSize: -1, BreakerThreshold: -1, Timeout: time.Second})
	ctx := context.Background()
	for _, b := range []Bucket{
		{ID: "rate", Limit: 10, Period: 10 * time.Second, MinRemaining: 3},
		{ID: "quota", Limit: 10, Period: 24 * time.Hour, Window: Weekly, MinRemaining: 3},
	} {
		req := Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1}
		for i := range 7 {
			if d, err := l.Allow(ctx, req); err != nil || !d.Allowed || d.Remaining != int64(9-i) {
				t.Fatalf("%s: Allow() #%d = %+v, %v; want allowed with %d left", b.ID, i+1, d, err, 9-i)
			}
		}
		d, err := l.Allow(ctx, req)
		if err != nil || d.Allowed || d.Remaining != 3 {
			t.Fatalf("%s: Allow() #8 = %+v, %v; want denied with 3 left (the floor)", b.ID, d, err)
		}
		if b.Window == NoWindow && (d.RetryAfter < 900*time.Millisecond || d.RetryAfter > time.Second) {
			t.Errorf("%s: RetryAfter = %v, want about a token's refill, 1s", b.ID, d.RetryAfter)
		}
		if b.Window != NoWindow && d.RetryAfter != d.Reset {
			t.Errorf("%s: RetryAfter = %v, want the window's end %v", b.ID, d.RetryAfter, d.Reset)
		}
	}
}

// TestQuotaKeys: what a call leaves in a quota's key. A deny leaves every
// key as it was (the quotas charged before the denying bucket, rate or
// quota, are undone, and a window the call opened leaves no key); a shadow quota without the
// tokens is not charged; a value INCRBY would refuse, or a key without an
// expiry, is a fresh window, never an error; another unit or anchor is
// another key (a fresh window), another limit the same one.
func TestQuotaKeys(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	prefix := testPrefix(t, c)
	l := New(c, Options{Prefix: prefix, DenyCacheSize: -1, BreakerThreshold: -1, Timeout: time.Second})
	ctx := context.Background()
	month := Bucket{ID: "m", Limit: 10, Period: time.Hour, Window: Monthly}
	day := Bucket{ID: "d", Limit: 5, Period: time.Hour, Window: Daily}
	rate := Bucket{ID: "r", Limit: 100, Period: time.Hour}
	type key struct {
		b     Bucket
		value string // "" = no key
		ttl   bool   // with the window's expiry
	}
	type test struct {
		name    string
		before  []key // set before the call (ttl: expiring in an hour)
		buckets []Bucket
		cost    int64
		allowed bool
		after   []key
	}
	tests := []test{
		{name: "a later quota denies: the earlier one is undone",
			before: []key{{month, "4", true}, {day, "5", true}}, buckets: []Bucket{month, day}, cost: 1,
			after: []key{{month, "4", true}, {day, "5", true}}},
		{name: "a later quota denies: a window the call opened leaves no key",
			before: []key{{day, "5", true}}, buckets: []Bucket{month, day}, cost: 1,
			after: []key{{month, "", false}, {day, "5", true}}},
		{name: "a later rate bucket denies: the quota is undone",
			before: []key{{month, "4", true}}, buckets: []Bucket{month, {ID: "r", Limit: 1, Period: time.Hour}}, cost: 2,
			after: []key{{month, "4", true}, {day, "", false}}},
		{name: "a later rate bucket denies: a window the call opened leaves no key",
			buckets: []Bucket{month, {ID: "r", Limit: 1, Period: time.Hour}}, cost: 2,
			after: []key{{month, "", false}}},
		{name: "an earlier rate bucket denies: the quota is not charged",
			before: []key{{month, "4", true}}, buckets: []Bucket{{ID: "r", Limit: 1, Period: time.Hour}, month}, cost: 2,
			after: []key{{month, "4", true}}},
		{name: "a shadow quota without the tokens is not charged",
			before: []key{{day, "5", true}}, buckets: []Bucket{month, {ID: "d", Limit: 5, Period: time.Hour, Window: Daily, Shadow: true}}, cost: 1, allowed: true,
			after: []key{{month, "1", true}, {day, "5", true}}},
		{name: "both charged", before: []key{{month, "4", true}}, buckets: []Bucket{rate, month, day}, cost: 2, allowed: true,
			after: []key{{month, "6", true}, {day, "2", true}}},
		{name: "a cost above the quota", buckets: []Bucket{month}, cost: 11, after: []key{{month, "", false}}},
	}
	for _, v := range []string{"abc", "007", "1.5", "-3", " 5", "1e3", "+5", "0x10", "99999999999999999999", "1234567890123456"} {
		tests = append(tests, test{name: "a value INCRBY refuses: " + v, before: []key{{month, v, true}}, buckets: []Bucket{month}, cost: 3, allowed: true,
			after: []key{{month, "3", true}}})
	}
	tests = append(tests, []test{
		{name: "no expiry, would deny: a fresh window", before: []key{{month, "1000", false}}, buckets: []Bucket{month}, cost: 1, allowed: true,
			after: []key{{month, "1", true}}},
		{name: "no expiry, a deny elsewhere: the key is dropped", before: []key{{month, "1000", false}, {day, "5", true}}, buckets: []Bucket{month, day}, cost: 1,
			after: []key{{month, "", false}, {day, "5", true}}},
		{name: "a limit change keeps the window", before: []key{{month, "4", true}}, buckets: []Bucket{{ID: "m", Limit: 5, Period: time.Hour, Window: Monthly}}, cost: 1, allowed: true,
			after: []key{{month, "5", true}}},
	}...)
	anchored := month
	anchored.Anchor = time.Date(2025, 3, 31, 0, 0, 0, 0, time.UTC)
	yearly := month
	yearly.Window = Yearly
	if k1, k2, k3 := bucketKey(prefix, "s", month), bucketKey(prefix, "s", anchored), bucketKey(prefix, "s", yearly); k1 == k2 || k1 == k3 || k2 == k3 {
		t.Errorf("keys %s, %s, %s: another unit or anchor must be another key", k1, k2, k3)
	}

	for i, tt := range tests {
		subj := subject(t, i)
		for _, k := range tt.before {
			var ttl time.Duration
			if k.ttl {
				ttl = time.Hour
			}
			if err := c.Set(ctx, bucketKey(prefix, subj, k.b), k.value, ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
		d, err := l.Allow(ctx, Request{Subject: subj, Buckets: tt.buckets, Cost: tt.cost})
		if err != nil || d.Allowed != tt.allowed {
			t.Errorf("%s: Allow() = %+v, %v; want allowed %v", tt.name, d, err, tt.allowed)
		}
		for _, k := range tt.after {
			key := bucketKey(prefix, subj, k.b)
			v, err := c.Get(ctx, key).Result()
			if err == redis.Nil {
				v = ""
			} else if err != nil {
				t.Fatal(err)
			}
			ttl := c.PTTL(ctx, key).Val()
			// The window's expiry: the test's hour, or the calendar's
			// (at most a month).
			if v != k.value || k.ttl != (ttl > 0 && ttl <= 31*24*time.Hour) {
				t.Errorf("%s: %s = %q (PTTL %v), want %q with an expiry %v", tt.name, k.b.ID, v, ttl, k.value, k.ttl)
			}
		}
	}
}

// TestQuotaLastMillisecond: a quota window's first charge in its last
// millisecond is not lost. Its key would expire as it is written (its
// PXAT, the end less 1 ms, has come), so it counts in the next window: a
// quota of 1 then denies the next call. The test spins on Redis TIME to
// land a call there, and retries when the call misses it.
func TestQuotaLastMillisecond(t *testing.T) {
	t.Parallel()
	c := newClient(t, 2)
	l := New(c, Options{Prefix: testPrefix(t, c), DenyCacheSize: -1, BreakerThreshold: -1, Timeout: time.Second})
	ctx := context.Background()
	for attempt := range 10 {
		q, end := dailyEndingIn(t, c, "last-ms-"+strconv.Itoa(attempt), 1, 2*time.Second)
		for redisNow(t, c).Before(end.Add(-900 * time.Microsecond)) {
		}
		d, err := l.Allow(ctx, Request{Subject: "s", Buckets: []Bucket{q}, Cost: 1})
		if after := redisNow(t, c); !after.Before(end) {
			continue // the call may have read TIME after the end: again
		}
		if err != nil || !d.Allowed {
			t.Fatalf("the first charge in a window's last ms = %+v, %v", d, err)
		}
		if n, err := c.Exists(ctx, bucketKey(l.prefix, "s", q)).Result(); err != nil || n != 1 {
			t.Fatalf("after a charge in the window's last ms the key is gone (%d, %v): the charge was lost", n, err)
		}
		if d, err := l.Allow(ctx, Request{Subject: "s", Buckets: []Bucket{q}, Cost: 1}); err != nil || d.Allowed {
			t.Fatalf("a second call = %+v, %v; want denied: the first counted in the next window", d, err)
		}
		return
	}
	t.Skip("no call landed in a window's last millisecond in 10 tries (a loaded machine)")
}
