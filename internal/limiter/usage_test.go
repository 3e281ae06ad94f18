package limiter

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestChargeDebtAndRefund: usage drives a bucket into debt; the next
// request is denied with the wait the debt takes to refill; a refund
// brings tokens back, never above full; the debt is bounded by one burst.
func TestChargeDebtAndRefund(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	l := New(c, Options{Prefix: testPrefix(t, c), BreakerThreshold: -1, Timeout: time.Second})
	ctx := context.Background()
	// 10 per 10 s: a token per second.
	rate := Bucket{ID: "r", Limit: 10, Period: 10 * time.Second}
	month := Bucket{ID: "q", Limit: 1000, Period: 24 * time.Hour, Window: Monthly}
	bs := []Bucket{rate, month}
	req := Request{Subject: "s", Buckets: bs, Cost: 1}
	if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("Allow() = %+v, %v", d, err)
	}
	// 14 more: rate 9 - 14 = -5, quota 999 - 14 = 985.
	u, err := l.Charge(ctx, "s", bs, 14, "a POST /x", "")
	if err != nil || u.Duplicate {
		t.Fatalf("Charge(14) = %+v, %v", u, err)
	}
	if u.Buckets[0].Remaining != -5 || u.Buckets[1].Remaining != 985 {
		t.Errorf("Charge(14) = %+v, want rate -5 (debt), quota 985", u.Buckets)
	}
	if r := u.Buckets[0].Reset; r < 14900*time.Millisecond || r > 15*time.Second+time.Millisecond {
		t.Errorf("Charge(14) rate reset = %v, want 15 s (15 tokens short of full at 1/s)", r)
	}
	// Denied until the debt and one token have refilled: 6 s.
	d, err := l.Allow(ctx, req)
	if err != nil || d.Allowed || d.Bucket != 0 {
		t.Fatalf("Allow() in debt = %+v, %v; want denied by the rate bucket", d, err)
	}
	if d.RetryAfter < 5900*time.Millisecond || d.RetryAfter > 6*time.Second {
		t.Errorf("RetryAfter in debt = %v, want 6 s (5 of debt and 1 token at 1/s)", d.RetryAfter)
	}
	// A refund of 10: rate -5 + 10 = 5, quota 995; the deny cache entry
	// of this process is dropped, so the next call asks Redis.
	u, err = l.Charge(ctx, "s", bs, -10, "a POST /x", "")
	if err != nil || u.Buckets[0].Remaining != 5 || u.Buckets[1].Remaining != 995 {
		t.Fatalf("Charge(-10) = %+v, %v; want rate 5, quota 995", u, err)
	}
	if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
		t.Errorf("Allow() after a refund = %+v, %v; want allowed", d, err)
	}
	// Refunds never go above full.
	u, err = l.Charge(ctx, "s", bs, -1_000_000, "a POST /x", "")
	if err != nil || u.Buckets[0].Remaining != 10 || u.Buckets[1].Remaining != 1000 || u.Buckets[0].Reset != 0 {
		t.Errorf("Charge(-1000000) = %+v, %v; want both full (10, 1000)", u, err)
	}
	// Debt is at most one burst (a quota: its limit): -10 and -1000.
	u, err = l.Charge(ctx, "s", bs, 1_000_000, "a POST /x", "")
	if err != nil || u.Buckets[0].Remaining != -10 || u.Buckets[1].Remaining != -1000 {
		t.Errorf("Charge(1000000) = %+v, %v; want the debt clamped at -10 and -1000", u, err)
	}
	if r := u.Buckets[0].Reset; r < 19900*time.Millisecond || r > 20*time.Second+time.Millisecond {
		t.Errorf("rate reset at the debt bound = %v, want 20 s (twice its horizon)", r)
	}
	pttl, err := c.PTTL(ctx, l.prefix+"{"+SubjectHash("s")+"}:r").Result()
	if err != nil || pttl < 19*time.Second || pttl > 20*time.Second+10*time.Millisecond {
		t.Errorf("PTTL in debt = %v, %v; want about 20 s", pttl, err)
	}
	d, err = l.Allow(ctx, req)
	if err != nil || d.Allowed {
		t.Fatalf("Allow() at the debt bound = %+v, %v; want denied", d, err)
	}
	// The quota in debt waits for its window's end, the longer wait.
	if d.Bucket != 1 || d.RetryAfter < time.Hour {
		t.Errorf("Allow() at the debt bound = %+v, want the quota limiting until its window ends", d)
	}
}

// TestChargeIdempotent: a retried report with the same Idempotency-Key
// counts once, also when the retries race; another key, or the same key
// on another route, counts again; a bad key is refused.
func TestChargeIdempotent(t *testing.T) {
	t.Parallel()
	c := newClient(t, 32)
	l := New(c, Options{Prefix: testPrefix(t, c), BreakerThreshold: -1, Timeout: 5 * time.Second})
	ctx := context.Background()
	bs := []Bucket{{ID: "r", Limit: 1_000_000, Period: 24 * time.Hour}, {ID: "q", Limit: 1_000_000, Period: 24 * time.Hour, Window: Daily}}
	const racers = 32
	var charged atomic.Int64
	var wg sync.WaitGroup
	for range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, err := l.Charge(ctx, "s", bs, 100, "a POST /x", "resp-1")
			if err != nil {
				t.Errorf("Charge() error = %v", err)
				return
			}
			if !u.Duplicate {
				charged.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := charged.Load(); n != 1 {
		t.Errorf("%d of %d concurrent retries charged, want exactly 1", n, racers)
	}
	st, err := l.Peek(ctx, "s", bs)
	if err != nil || st[1].Remaining != 1_000_000-100 {
		t.Errorf("quota after the retries = %+v, %v; want 999900 (charged once)", st, err)
	}
	// The key is kept 24 h.
	pttl, err := c.PTTL(ctx, l.prefix+"{"+SubjectHash("s")+"}:idem:"+idemDigest("a POST /x", "resp-1")).Result()
	if err != nil || pttl < IdempotencyTTL-time.Minute || pttl > IdempotencyTTL {
		t.Errorf("idempotency key PTTL = %v, %v; want about 24 h", pttl, err)
	}
	for _, tt := range []struct{ scope, key string }{{"a POST /x", "resp-2"}, {"a POST /y", "resp-1"}} {
		u, err := l.Charge(ctx, "s", bs, 100, tt.scope, tt.key)
		if err != nil || u.Duplicate {
			t.Errorf("Charge(%s, %s) = %+v, %v; want charged", tt.scope, tt.key, u, err)
		}
	}
	for _, bad := range []string{"has space", "tab\t", "é", string(make([]byte, MaxIdempotencyKeyLen+1))} {
		if _, err := l.Charge(ctx, "s", bs, 1, "a POST /x", bad); !errors.Is(err, ErrBadIdempotencyKey) {
			t.Errorf("Charge(key %q) error = %v, want ErrBadIdempotencyKey", bad, err)
		}
	}
	if st, _ := l.Peek(ctx, "s", bs); st[1].Remaining != 1_000_000-300 {
		t.Errorf("quota after 3 charges = %d, want 999700", st[1].Remaining)
	}
}
