package app_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestShutdownReturnsLeases: the decision path leases a hot subject's tokens
// by default, and Shutdown (the Lambdas' SIGTERM hook) gives the unused
// ones back before the last EMF line, which counts them.
func TestShutdownReturnsLeases(t *testing.T) {
	t.Parallel()
	a, out := newApp(t, map[string]string{
		"REDIS_URL": testenv.RedisURL(t), "DATABASE_URL": pgtest.NewDatabase(t), "DEFAULT_LIMIT": "100000/1h",
	})
	req := &authorizer.Request{API: "x", Method: "GET", Resource: "/", Headers: map[string]string{"x-api-key": "hot"}}
	leased := 0
	for range 200 {
		res, err := a.Core.Decide(context.Background(), req)
		if err != nil || !res.Allowed {
			t.Fatalf("Decide = %+v, %v", res, err)
		}
		if res.LimiterTime == 0 {
			leased++ // no Redis call: a lease admitted it
		}
	}
	held := a.Limiter.Stats().LeaseOutstanding
	if leased == 0 || held == 0 {
		t.Fatalf("200 decisions in a row: %d leased, %d tokens held; want leases (LEASE_MAX defaults to 64)", leased, held)
	}
	a.Shutdown()
	s := a.Limiter.Stats()
	if s.LeaseOutstanding != 0 || s.LeaseReturned != uint64(held) {
		t.Errorf("after Shutdown: %d tokens held, %d returned; want 0 and %d", s.LeaseOutstanding, s.LeaseReturned, held)
	}
	for name, want := range map[string]int64{"LeaseTokensReturned": held, "LeasedAdmissions": int64(leased), "LeasesTaken": int64(s.Leases)} {
		m := regexp.MustCompile(`"` + name + `":(\d+)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Errorf("no %s in the EMF lines:\n%s", name, out)
			continue
		}
		if got, _ := strconv.ParseInt(m[1], 10, 64); got != want {
			t.Errorf("EMF %s = %d, want %d", name, got, want)
		}
	}
	// After Shutdown the limiter still decides, one Redis call a request.
	if res, err := a.Core.Decide(context.Background(), req); err != nil || !res.Allowed || res.LimiterTime == 0 {
		t.Errorf("Decide after Shutdown = %+v, %v; want allowed through Redis", res, err)
	}
}
