package authorizer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// swappable is a snapshot source whose rules change between requests, as
// the refreshing cache's do when a rule moves to another plan.
type swappable struct {
	p atomic.Pointer[rules.Snapshot]
}

func (s *swappable) Snapshot(context.Context) *rules.Snapshot { return s.p.Load() }

// TestPlanSwitchKeepsUsed moves a subject's rule to another plan between
// requests. The bucket id is the rule id, so the Redis key stays the same
// and only its numbers change: what the subject used carries over. The
// issue's example: 100 requests an hour, all used, then 1,000 an hour
// leaves 900 at once; moving back down leaves none, refilling at the
// lower rate.
func TestPlanSwitchKeepsUsed(t *testing.T) {
	t.Parallel()
	basic := rules.Plan{Name: "basic", Limit: 100, Period: rules.Period(time.Hour)}
	pro := rules.Plan{Name: "pro", Limit: 1000, Period: rules.Period(time.Hour)}
	plans := []rules.Plan{basic, pro}
	onPlan := func(plan string) *rules.Snapshot {
		r := rules.Rule{ID: "r-user", API: "a1b2c3", Route: "*", Subject: "k1", Plan: plan}
		snap := rules.NewSnapshot([]rules.Rule{r}, plans, rules.SnapshotOptions{})
		if sk := snap.Skipped(); len(sk) > 0 {
			t.Fatalf("rules skipped: %+v", sk)
		}
		return snap
	}
	rdb := testenv.Client(t, testenv.RedisURL(t), func(o *redis.Options) { o.PoolSize = 4 })
	lim := limiter.New(rdb, limiter.Options{Prefix: testenv.Prefix(t, "auth"), Timeout: time.Second, DenyCacheSize: -1})
	src := &swappable{}
	a := authorizer.New(src, lim, authorizer.Options{})
	ctx := context.Background()
	decide := func() authorizer.Result {
		t.Helper()
		req := get("k1", "/orders")
		res, err := a.Decide(ctx, &req)
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		return res
	}

	steps := []struct {
		name  string
		plan  string
		times int // requests; the last is checked
		want  outcome
	}{
		{"basic: all 100 used", "basic", 100, outcome{Allowed: true, Rule: "r-user", Limit: 100, Remaining: 0}},
		{"basic: the 101st is denied", "basic", 1, outcome{Rule: "r-user", Limit: 100, RetryAfter: 36}},
		{"upgrade to pro: 900 left at once, one spent", "pro", 1, outcome{Allowed: true, Rule: "r-user", Limit: 1000, Remaining: 899}},
		{"pro: 98 more", "pro", 98, outcome{Allowed: true, Rule: "r-user", Limit: 1000, Remaining: 801}},
		// Used 199 (of 1,000): beyond basic's 100, so none left (no debt)
		// and the first token comes at basic's rate, 36 s.
		{"downgrade to basic: none left, 36 s to the next", "basic", 1, outcome{Rule: "r-user", Limit: 100, RetryAfter: 36}},
		// The downgrade's deny wrote used = 100 at basic's rate.
		{"back to pro: used 100, 900 left, one spent", "pro", 1, outcome{Allowed: true, Rule: "r-user", Limit: 1000, Remaining: 899}},
	}
	for _, s := range steps {
		src.p.Store(onPlan(s.plan))
		var res authorizer.Result
		for range s.times {
			res = decide()
		}
		got := outcome{Allowed: res.Allowed, Rule: res.Rule, Limit: res.Limit, Remaining: res.Remaining, RetryAfter: authorizer.Seconds(res.RetryAfter)}
		if got != s.want {
			t.Errorf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
}
