package authorizer_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestDecideDimensions: with an "ip" dimension and a per-IP floor rule, a
// caller sending a new key on every request gets the floor, not a fresh
// bucket each time; another IP has its own floor; the key's own limit still
// applies; default-dimension rules ignore the IP rules and vice versa.
func TestDecideDimensions(t *testing.T) {
	t.Parallel()
	dims, err := identity.ParseDimensions("ip=ip")
	if err != nil {
		t.Fatal(err)
	}
	floor := rule("floor", "api", "*", "*", 3, time.Minute)
	floor.Dimension = "ip"
	perKey := rule("key", "api", "*", "*", 2, time.Minute)
	s := newStack(t, stackOpts{rules: []rules.Rule{floor, perKey}, core: authorizer.Options{Dimensions: dims}})
	a := s.a
	ctx := context.Background()
	decide := func(key, ip string) authorizer.Result {
		t.Helper()
		res, err := a.Decide(ctx, &authorizer.Request{API: "api", Method: "GET", Resource: "/",
			Headers: map[string]string{"x-api-key": key}, SourceIP: ip})
		if err != nil {
			t.Fatalf("Decide(%s, %s): %v", key, ip, err)
		}
		return res
	}
	for i := range 6 {
		res := decide("random-"+strconv.Itoa(i), "198.51.100.1")
		if want := i < 3; res.Allowed != want {
			t.Errorf("request %d with a fresh key = allowed %v, want %v", i, res.Allowed, want)
		}
		if i >= 3 && (res.Rule != "floor" || res.Dimension != "ip" || res.DimensionSubject != "198.51.100.1") {
			t.Errorf("request %d denied by rule %q of dimension %q, subject %q; want the floor, ip, 198.51.100.1",
				i, res.Rule, res.Dimension, res.DimensionSubject)
		}
	}
	if res := decide("random-x", "198.51.100.2"); !res.Allowed {
		t.Error("another IP denied, want its own floor")
	}
	decide("k", "198.51.100.3")
	decide("k", "198.51.100.4")
	if res := decide("k", "198.51.100.5"); res.Allowed || res.Rule != "key" || res.Dimension != identity.DefaultDimension || res.DimensionSubject != "k" {
		t.Errorf("third request of one key from three IPs = %+v, want denied by the key rule, in the default dimension", res)
	}
	// Redis holds one bucket per key that got through (random-0..2,
	// random-x, k) and one per IP that was charged (.1 to .4); the keys the
	// floor denied and the floor of .5 (denied by the key, all or nothing)
	// were never written.
	if keys := testenv.Keys(ctx, t, s.rdb, s.prefix); len(keys) != 9 {
		t.Errorf("%d Redis keys, want 9 (5 keys, 4 IPs): %v", len(keys), keys)
	}
}

// TestDecideDimensionQuotaBehindUpstream: the features meet. A caller an
// upstream authorizer named (Request.Upstream and the principal source,
// as ratelimit.Wrap* and UPSTREAM_AUTHORIZER do) is still held by the per-IP floor, and a
// dimension whose only rule is a quota (a tenant's daily budget, read
// from the upstream's context) is charged: its match has no rate rule.
func TestDecideDimensionQuotaBehindUpstream(t *testing.T) {
	t.Parallel()
	dims, err := identity.ParseDimensions("ip=ip;tenant=context:tenant")
	if err != nil {
		t.Fatal(err)
	}
	floor := rule("floor", "api", "*", "*", 5, time.Minute)
	floor.Dimension = "ip"
	budget := rule("budget", "api", "*", "*", 3, 0)
	budget.Dimension, budget.Kind, budget.Period = "tenant", rules.Quota, rules.Period(rules.Day)
	perUser := rule("user", "api", "*", "*", 100, time.Minute)
	a := newStack(t, stackOpts{rules: []rules.Rule{floor, budget, perUser}, sources: []identity.Source{{Kind: identity.SourcePrincipal}},
		lim: limiter.Options{DenyCacheSize: -1}, core: authorizer.Options{Dimensions: dims}}).a
	ctx := context.Background()
	decide := func(user, tenant, ip string) authorizer.Result {
		t.Helper()
		up := identity.NewUpstreamIdentity(user, map[string]any{"tenant": tenant})
		res, err := a.Decide(ctx, &authorizer.Request{API: "api", Method: "GET", Resource: "/", SourceIP: ip, Upstream: &up})
		if err != nil {
			t.Fatalf("Decide(%s, %s, %s): %v", user, tenant, ip, err)
		}
		return res
	}
	// Three users of tenant acme from three IPs share its budget of 3.
	for i := range 3 {
		if res := decide("u"+strconv.Itoa(i), "acme", "192.0.2."+strconv.Itoa(i)); !res.Allowed {
			t.Fatalf("request %d of acme = %+v, want allowed", i, res)
		}
	}
	res := decide("u9", "acme", "192.0.2.9")
	if res.Allowed || res.Rule != "budget" || res.RetryAfter <= time.Minute {
		t.Errorf("4th request of acme = %+v, want denied by the tenant's daily budget until the day ends", res)
	}
	// Another tenant from one IP: its budget allows 3, then the floor (5
	// a minute from 192.0.2.50) is what the 6th request of the IP meets.
	for i := range 5 {
		tenant := "t" + strconv.Itoa(i) // a fresh tenant each time: only the floor binds
		if res := decide("v"+strconv.Itoa(i), tenant, "192.0.2.50"); !res.Allowed {
			t.Fatalf("request %d from 192.0.2.50 = %+v, want allowed", i, res)
		}
	}
	if res := decide("v9", "t9", "192.0.2.50"); res.Allowed || res.Rule != "floor" {
		t.Errorf("6th request from one IP behind the upstream = %+v, want denied by the per-IP floor", res)
	}
}
