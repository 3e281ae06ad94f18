package authorizer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/rules"
)

// TestDecideExpiry: an override that expires stops applying at decision
// time, on the same snapshot, with no write: the clock the authorizer is
// given passes its expiry and the next request falls to the rule under
// it.
func TestDecideExpiry(t *testing.T) {
	t.Parallel()
	friday := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(friday.Add(-time.Minute).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }

	everyone := rule("everyone", "api", "*", "*", 1, time.Hour)
	override := rule("override", "api", "*", "customer-x", 100, time.Hour)
	override.ExpiresAt = &friday
	a := newStack(t, stackOpts{rules: []rules.Rule{everyone, override}, core: authorizer.Options{Now: now}}).a
	decide := func() authorizer.Result {
		t.Helper()
		res, err := a.Decide(context.Background(), &authorizer.Request{API: "api", Method: "GET", Resource: "/",
			Headers: map[string]string{"x-api-key": "customer-x"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i := range 3 {
		if res := decide(); !res.Allowed || res.Rule != "override" {
			t.Fatalf("request %d before the expiry = allowed %v by rule %q, want allowed by the override", i, res.Allowed, res.Rule)
		}
	}
	clock.Store(friday.UnixNano()) // the instant itself: expired
	if res := decide(); !res.Allowed || res.Rule != "everyone" {
		t.Errorf("first request at the expiry = allowed %v by rule %q, want allowed by everyone's rule", res.Allowed, res.Rule)
	}
	if res := decide(); res.Allowed || res.Rule != "everyone" {
		t.Errorf("second request after the expiry = allowed %v by rule %q, want denied by everyone's rule (1 an hour)", res.Allowed, res.Rule)
	}
}
