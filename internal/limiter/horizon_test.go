package limiter

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// issueBuckets are the buckets of the issue's rule,
// {"limit":1,"period":"1y","burst":10000000,"cost":1000000}, behind an
// ordinary bucket that the script writes first: before MaxHorizon the
// third call's SET of the second bucket asked for PX 1.26e+17, Redis 7.0
// answered "ERR value is not an integer or out of range", and the first
// bucket kept its SET of that failed call.
var issueBuckets = []Bucket{
	{ID: "api", Limit: 1_000_000, Period: time.Minute, Burst: 100_000_000},
	{ID: "issue", Limit: 1, Period: 365 * 24 * time.Hour, Burst: 10_000_000},
}

const issueCost = 1_000_000

// TestScriptIssueRuleNeverErrors runs the issue's rule through the script
// itself, bypassing the Limiter's own check of the horizon: whatever it is
// sent, the script answers every call, each call is all or nothing, and
// every TTL and duration it produces is an integer within MAX_MS.
func TestScriptIssueRuleNeverErrors(t *testing.T) {
	c := newClient(t, 2)
	prefix := testPrefix(t, c)
	ctx := context.Background()
	call := getCall()
	defer putCall(call)
	call.build(prefix, &subjects{id: digestOf("issue-subject")}, issueCost, issueBuckets)
	keys := append([]string(nil), call.keys...)
	args := make([]any, len(call.args))
	for i, a := range call.args {
		args[i] = string(*a.(*argBytes))
	}

	read := func() [2]string {
		var out [2]string
		for i, k := range keys {
			v, err := c.Get(ctx, k).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("GET %s: %v", k, err)
			}
			out[i] = v
		}
		return out
	}
	allowed := 0
	for i := range 12 {
		before := read()
		res, err := chargeScript.Run(ctx, c, keys, args...).Text()
		after := read()
		if err != nil {
			if before != after {
				t.Errorf("call %d failed after a write: keys %q before, %q after: a partial write", i+1, before, after)
			}
			t.Fatalf("call %d: script error %v: it must answer every call", i+1, err)
		}
		rd := replyReader{s: res}
		r, err := parseReply(&rd, len(keys))
		if err != nil {
			t.Fatalf("call %d: reply %q: %v", i+1, res, err)
		}
		changed := [2]bool{before[0] != after[0], before[1] != after[1]}
		switch {
		case r.allowed && changed != [2]bool{true, true}:
			t.Errorf("call %d allowed, keys changed %v, want both charged", i+1, changed)
		case !r.allowed && changed != [2]bool{}:
			t.Errorf("call %d denied, keys changed %v, want none: a partial write", i+1, changed)
		}
		if r.allowed {
			allowed++
		}
		if r.reset < 0 || r.reset > maxMillis || r.retry < -1 || r.retry > maxMillis {
			t.Errorf("call %d: reply %q, want reset and retry within 0..%d ms", i+1, res, int64(maxMillis))
		}
		for _, k := range keys {
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil || ttl <= 0 || ttl > maxMillis*time.Millisecond {
				t.Errorf("call %d: PTTL %s = %v, %v, want 1ms..100y", i+1, k, ttl, err)
			}
		}
		for j, v := range after {
			f := strings.Fields(v)
			for _, x := range f {
				if _, err := strconv.ParseFloat(x, 64); err != nil || len(f) != 3 {
					t.Errorf("call %d: bucket %d holds %q, want \"<tat> <T> <burst>\", three numbers", i+1, j, v)
					break
				}
			}
		}
	}
	// The second bucket holds ten requests of 1,000,000 tokens.
	if allowed != 10 {
		t.Errorf("%d of 12 calls allowed, want 10", allowed)
	}
}

// TestAllowRefusesHorizonBeyondMax pins the Limiter's side: a bucket whose
// refill horizon is beyond MaxHorizon is an invalid request, answered
// without Redis, and it does not count as a Redis failure, so it can never
// open the breaker for every other subject. At MaxHorizon exactly it works.
func TestAllowRefusesHorizonBeyondMax(t *testing.T) {
	c := newClient(t, 2)
	l := New(c, Options{Prefix: testPrefix(t, c), Timeout: testTimeout})
	ctx := context.Background()
	for i := range 2 * DefaultBreakerThreshold {
		d, err := l.Allow(ctx, Request{Subject: "s", Buckets: issueBuckets, Cost: issueCost})
		if !errors.Is(err, ErrInvalidRequest) || d.Allowed {
			t.Fatalf("Allow(issue rule) #%d = %+v, %v, want a deny with ErrInvalidRequest", i+1, d, err)
		}
		if !strings.Contains(err.Error(), `bucket "issue"`) {
			t.Errorf("Allow(issue rule) error = %v, want it to name the bucket", err)
		}
	}
	if _, err := l.Peek(ctx, "s", issueBuckets); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("Peek(issue rule) error = %v, want ErrInvalidRequest", err)
	}
	if err := l.Reset(ctx, "s", issueBuckets); err != nil {
		t.Errorf("Reset(issue rule) = %v, want nil: deleting keys needs no horizon", err)
	}
	if s := l.Stats(); s.RedisCalls != 0 || s.Errors != 0 || s.Breaker != BreakerClosed {
		t.Errorf("Stats() = %+v, want no Redis call, no error, breaker closed", s)
	}

	year := 365 * 24 * time.Hour
	atMax := []Bucket{{ID: "max", Limit: 1, Period: year, Burst: 10}}
	for want := int64(9); want >= 0; want-- {
		d, err := l.Allow(ctx, Request{Subject: "s", Buckets: atMax, Cost: 1})
		if err != nil || !d.Allowed || d.Remaining != want {
			t.Fatalf("Allow(1/1y burst 10) = %+v, %v, want allowed with %d left", d, err, want)
		}
		if d.Reset <= 0 || d.Reset > MaxHorizon+time.Millisecond {
			t.Errorf("Allow(1/1y burst 10).Reset = %v, want within MaxHorizon", d.Reset)
		}
	}
	d, err := l.Allow(ctx, Request{Subject: "s", Buckets: atMax, Cost: 1})
	if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > d.Reset || d.Reset > MaxHorizon+time.Millisecond {
		t.Errorf("Allow(exhausted 1/1y burst 10) = %+v, %v, want a deny with 0 < RetryAfter <= Reset <= MaxHorizon", d, err)
	}
	over := []Bucket{{ID: "over", Limit: 1, Period: year, Burst: 11}}
	if _, err := l.Allow(ctx, Request{Subject: "s", Buckets: over, Cost: 1}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("Allow(1/1y burst 11) error = %v, want ErrInvalidRequest", err)
	}
}

// TestWithinHorizon pins the Limiter's bound against the exact products,
// on both sides of MaxHorizon, with periods the script sees in
// microseconds.
func TestWithinHorizon(t *testing.T) {
	year := 365 * 24 * time.Hour
	for _, tt := range []struct {
		b    Bucket
		want bool
	}{
		{Bucket{Limit: 1, Period: year, Burst: 10}, true},
		{Bucket{Limit: 1, Period: year, Burst: 11}, false},
		{Bucket{Limit: 1, Period: year}, true},                                   // burst = limit
		{Bucket{Limit: 0, Period: year, Burst: math.MaxInt64}, true},             // blocked
		{Bucket{Limit: 1, Period: time.Second, Burst: 315_360_000}, true},        // 10 years of seconds
		{Bucket{Limit: 1, Period: time.Second, Burst: 315_360_001}, false},       // one second more
		{Bucket{Limit: 1_000_000_000, Period: year, Burst: 1_000_000_000}, true}, // the largest numbers
		{Bucket{Limit: 1, Period: year, Burst: 1_000_000_000}, false},            // 1e9 × 3.15e13µs overflows 64 bits
		{Bucket{Limit: 3, Period: time.Nanosecond, Burst: math.MaxInt64}, false},
	} {
		if got := withinHorizon(tt.b); got != tt.want {
			t.Errorf("withinHorizon(%+v) = %v, want %v", tt.b, got, tt.want)
		}
	}
}

// TestMsClamps pins the Go side of the issue: a reply beyond ~292 years of
// milliseconds overflowed time.Duration, which gave a negative Reset,
// Retry-After 0 and denials the deny cache dropped at once.
func TestMsClamps(t *testing.T) {
	for _, tt := range []struct {
		in   int64
		want time.Duration
	}{
		{0, 0},
		{-1, 0},
		{1500, 1500 * time.Millisecond},
		{maxMillis, maxMillis * time.Millisecond},
		{63071999999995344, maxMillis * time.Millisecond}, // the reply of the issue's third call
		{math.MaxInt64, maxMillis * time.Millisecond},
	} {
		if got := ms(tt.in); got != tt.want {
			t.Errorf("ms(%d) = %v, want %v", tt.in, got, tt.want)
		}
	}
	// A deny cached for the longest retry-after neither overflows nor
	// expires at once.
	l := New(nil, Options{})
	if until := l.cacheUntil(l.now(), ms(math.MaxInt64)); until <= l.now() {
		t.Errorf("cacheUntil(now, ms(MaxInt64)) = %d <= now: the entry is dropped at once", until)
	}
}
