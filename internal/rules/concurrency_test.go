package rules

import (
	"testing"
	"time"
)

// TestConcurrencyValidate checks what a concurrency rule may hold: a
// limit, a period that is its slots' lease TTL (at most a day), a mode and
// a failure mode; everything about tokens or windows is refused by name.
func TestConcurrencyValidate(t *testing.T) {
	t.Parallel()
	type fe = FieldError
	valid := func() Rule {
		return Rule{API: "a1b2c3d4e5", Route: "POST /exports", Subject: "*", Kind: Concurrency,
			Limit: new(int64(5)), Period: Period(15 * time.Minute)}
	}
	tests := []struct {
		name   string
		mutate func(*Rule)
		want   []FieldError
	}{
		{"five exports at once", func(*Rule) {}, nil},
		{"shadow, fail closed, one day", func(r *Rule) {
			r.Mode, r.FailureMode, r.Period = Shadow, FailClosed, Period(24*time.Hour)
		}, nil},
		{"blocked", func(r *Rule) { r.Limit = new(int64(0)) }, nil},
		{"cost 1 is the only cost", func(r *Rule) { r.Cost = new(int64(1)) }, nil},
		{"TTL over a day", func(r *Rule) { r.Period = Period(25 * time.Hour) }, []fe{{"period", `a concurrency rule's period is its slots' lease TTL: at most "1d"`}}},
		{"a month", func(r *Rule) { r.Period = Month }, []fe{{"period", `a concurrency rule's period is its slots' lease TTL: at most "1d"`}}},
		{"burst", func(r *Rule) { r.Burst = new(int64(10)) }, []fe{{"burst", burstConcurrency}}},
		{"cost", func(r *Rule) { r.Cost = new(int64(3)) }, []fe{{"cost", "must be empty for a concurrency rule: every request holds one slot"}}},
		{"floor", func(r *Rule) { r.MinRemaining = new(int64(1)) }, []fe{{"min_remaining", "must be empty for a concurrency rule"}}},
		{"anchor", func(r *Rule) { r.Anchor = "2026-01-01T00:00:00Z" }, []fe{{"anchor", "is for quota rules only"}}},
		{"durable", func(r *Rule) { r.Durable = true }, []fe{{"durable", "is for quota rules only"}}},
		{"global", func(r *Rule) { r.Global = true }, []fe{{"global", "cannot be combined with kind concurrency: requests in flight are counted in each Region's Redis, where they are released"}}},
	}
	for _, tt := range tests {
		r := valid()
		tt.mutate(&r)
		wantFields(t, tt.name+": Validate()", r.Validate(), tt.want)
	}

	p := Plan{Name: "exports", Kind: Concurrency, Limit: 3, Period: Period(time.Hour)}
	if err := p.Validate(); err != nil {
		t.Errorf("concurrency plan: %v", err)
	}
	p.Burst = new(int64(5))
	if err := p.Validate(); err == nil {
		t.Error("a concurrency plan with a burst passed")
	}
	p.Burst, p.Global = nil, true
	if err := p.Validate(); err == nil {
		t.Error("a global concurrency plan passed")
	}
}

// TestConcurrencyMatch: a concurrency rule stacks on the rate and quota
// rules of its scope, and the request's cost stays the rate rule's.
func TestConcurrencyMatch(t *testing.T) {
	t.Parallel()
	rs := []Rule{
		{ID: "r1", API: "api", Route: "POST /exports", Subject: "*", Limit: new(int64(100)), Period: Period(time.Minute), Cost: new(int64(10))},
		{ID: "r2", API: "api", Route: "POST /exports", Subject: "*", Kind: Concurrency, Limit: new(int64(5)), Period: Period(15 * time.Minute)},
		{ID: "r3", API: "api", Route: "*", Subject: "vip", Kind: Concurrency, Limit: new(int64(50)), Period: Period(time.Minute)},
	}
	s := NewSnapshot(rs, nil, SnapshotOptions{})
	if sk := s.Skipped(); len(sk) != 0 {
		t.Fatalf("skipped: %+v", sk)
	}
	m := s.Match("api", "POST", "/exports", "acme")
	if m.Route == nil || m.RouteConcurrency == nil || m.RouteConcurrency.ID != "r2" || m.APIConcurrency != nil || m.Cost() != 10 {
		t.Fatalf("Match = %+v", m)
	}
	if m.RouteConcurrency.Cost != 1 || m.RouteConcurrency.Burst != 5 {
		t.Errorf("concurrency rule: cost %d burst %d, want 1 and its limit", m.RouteConcurrency.Cost, m.RouteConcurrency.Burst)
	}
	if m := s.Match("api", "GET", "/x", "vip"); m.APIConcurrency == nil || m.APIConcurrency.ID != "r3" || !m.Any() {
		t.Errorf("API-wide concurrency for vip: %+v", m)
	}
	if got := s.ForSubject("acme", "api", ""); len(got) != 2 {
		t.Errorf("ForSubject(acme) = %d rules, want the rate and the concurrency rule", len(got))
	}
}
