package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestRefundReachesWarmAuthorizer: a subject that exhausted its monthly
// quota is denied from the authorizer's local deny cache (the retry-after
// is weeks away). A refund through the admin API, another process, reaches
// the warm authorizer within DENY_CACHE_MAX_AGE, not at the month's end;
// until then the cache still answers without Redis. The test's max age is
// far enough below the default (1s) to tell that the setting is used.
func TestRefundReachesWarmAuthorizer(t *testing.T) {
	t.Parallel()
	const maxAge = 100 * time.Millisecond
	env := map[string]string{"REDIS_URL": testenv.RedisURL(t), "DATABASE_URL": pgtest.NewDatabase(t),
		"RULES_VERSION_POLL": "100ms", "DENY_CACHE_MAX_AGE": maxAge.String(),
		"REDIS_TIMEOUT": "1s"} // not a test of the budget: a loaded machine must not fail it open
	o := app.Options{Prefix: testenv.Prefix(t, "app")}
	adm, admLog := failoverAdmin(t, env, o)
	authz, authzLog := failoverDecider(t, env, o)
	logOnFailure(t, admLog, authzLog)

	if resp := adminCall(adm.Service, "POST", "/rules", nil, map[string]any{"api": loadAPI, "route": "*", "subject": "*",
		"kind": "quota", "limit": 2, "period": "1mo",
		// Its month started a day ago: weeks to go, whatever the date.
		"anchor": time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second).Format(time.RFC3339)}); resp.Status != http.StatusCreated {
		t.Fatalf("POST /rules = %d %s", resp.Status, resp.Body)
	}
	testenv.Await(t, 10*time.Second, 20*time.Millisecond, "the quota rule reaches the authorizer", func() bool { return probe(t, authz).Limit == 2 })

	subject := "refund-" + testenv.Random(t)
	req := &authorizer.Request{API: loadAPI, Method: loadMethod, Resource: loadResource,
		Headers: map[string]string{"x-api-key": subject}}
	decide := func() authorizer.Result {
		t.Helper()
		res, err := authz.Core.Decide(context.Background(), req)
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		return res
	}
	for i := range 2 {
		if res := decide(); !res.Allowed {
			t.Fatalf("request %d = %+v, want allowed", i+1, res)
		}
	}
	denied := time.Now()
	if res := decide(); res.Allowed || res.Cached || res.RetryAfter < 24*time.Hour {
		t.Fatalf("third request = %+v, want denied by Redis until the month ends", res)
	}
	if res := decide(); res.Allowed || !res.Cached {
		t.Fatalf("fourth request = %+v, want denied from the deny cache", res)
	}

	if resp := adminCall(adm.Service, "POST", "/usage", nil, map[string]any{"api": loadAPI, "route": "*",
		"subject": subject, "cost": -2}); resp.Status != http.StatusOK {
		t.Fatalf("POST /usage (refund) = %d %s", resp.Status, resp.Body)
	}
	lifted := testenv.AwaitLift(t, denied, maxAge, maxAge+600*time.Millisecond, func() (bool, bool, any) {
		res := decide()
		return res.Allowed, res.Cached, res
	})
	t.Logf("the refund reached the authorizer %v after its cached deny (max age %v)", lifted.Round(time.Millisecond), maxAge)
}
