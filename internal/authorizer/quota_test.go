package authorizer_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestDecideQuota: a rate rule, a route rate rule and a daily quota on the
// API stack; RateLimit-Policy lists all three; the exhausted quota limits,
// denying until the next UTC midnight (Redis's); a route with a floor
// (min_remaining) admits only while the floor is left.
func TestDecideQuota(t *testing.T) {
	t.Parallel()
	quota := rule("r-day", "a1b2c3", "*", "*", 3, 0)
	quota.Kind, quota.Period = rules.Quota, rules.Period(rules.Day)
	floor := rule("r-chat", "a1b2c3", "POST /chat", "*", 10, time.Hour)
	floor.MinRemaining = new(int64(8))
	s := newStack(t, stackOpts{rules: []rules.Rule{
		rule("r-api", "a1b2c3", "*", "*", 100, time.Minute),
		rule("r-orders", "a1b2c3", "GET /orders", "*", 50, time.Minute),
		quota, floor,
	}})
	ctx := context.Background()
	req := get("k1", "/orders")
	var res authorizer.Result
	for i := range 3 {
		var err error
		if res, err = s.a.Decide(ctx, &req); err != nil || !res.Allowed {
			t.Fatalf("Decide #%d = %+v, %v; want allowed", i+1, res, err)
		}
	}
	if got, want := res.Policy(), `"r-api";q=100;w=60, "r-orders";q=50;w=60, "r-day";q=3;w=86400`; got != want {
		t.Errorf("Policy() = %s, want %s", got, want)
	}
	if res.Rule != "r-day" || res.Remaining != 0 {
		t.Errorf("Decide #3 = rule %s, remaining %d; want the quota with 0 left", res.Rule, res.Remaining)
	}
	res, err := s.a.Decide(ctx, &req)
	now := testenv.Redis(t).Time(ctx).Val()
	midnight := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	if err != nil || res.Allowed || res.Rule != "r-day" {
		t.Fatalf("Decide #4 = %+v, %v; want denied by the quota", res, err)
	}
	if want := midnight.Sub(now); res.RetryAfter < want-time.Second || res.RetryAfter > want+time.Second {
		t.Errorf("RetryAfter = %v, want the time to UTC midnight, %v", res.RetryAfter, want)
	}
	if got := string(res.AppendRateLimit(nil)); got != `"r-day";r=0;t=`+itoa(authorizer.Seconds(res.Reset)) {
		t.Errorf("RateLimit = %s, want the quota's", got)
	}

	// The floor: 10 tokens, 8 kept back, so 2 requests of another subject
	// pass (its own quota, 3 a day, is not the limit here).
	chat := authorizer.Request{API: "a1b2c3", Method: "POST", Resource: "/chat", Headers: map[string]string{"x-api-key": "k2"}}
	for i := range 3 {
		res, err := s.a.Decide(ctx, &chat)
		if err != nil || res.Allowed != (i < 2) {
			t.Errorf("Decide(POST /chat) #%d = %+v, %v; want allowed %v", i+1, res, err, i < 2)
		}
		if i == 2 && (res.Rule != "r-chat" || res.RetryAfter < 5*time.Minute) {
			t.Errorf("Decide(POST /chat) #3 = %+v, want r-chat's floor limiting for a token's refill (6 min)", res)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
