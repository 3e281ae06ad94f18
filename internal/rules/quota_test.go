package rules

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// validQuota is a valid inline quota rule that each case changes.
func validQuota() Rule {
	return Rule{
		API: "a1b2c3d4e5", Route: "*", Subject: "key-1", Kind: Quota,
		Limit: new(int64(100_000)), Period: Month, Anchor: "2026-01-31T00:00:00Z",
	}
}

// TestQuotaValidate checks what a quota rule, and an admission floor on
// any rule, may hold: every problem is named by its JSON field.
func TestQuotaValidate(t *testing.T) {
	t.Parallel()
	type fe = FieldError
	tests := []struct {
		name   string
		mutate func(*Rule)
		want   []FieldError // nil: valid
	}{
		{"monthly quota", func(*Rule) {}, nil},
		{"daily, weekly, yearly", func(r *Rule) { r.Period = Period(Day) }, nil},
		{"yearly", func(r *Rule) { r.Period, r.Anchor = Period(Year), "" }, nil},
		{"weekly with an offset anchor", func(r *Rule) { r.Period, r.Anchor = Period(Week), "2026-12-03T10:00:00+01:00" }, nil},
		{"floor leaves room for the cost", func(r *Rule) { r.Cost, r.MinRemaining = new(int64(10)), new(int64(99_990)) }, nil},
		{"quota of 1h", func(r *Rule) { r.Period = Period(time.Hour) }, []fe{{"period", `a quota's period must be "1d", "1w", "1mo" or "1y"`}}},
		{"quota of 2d", func(r *Rule) { r.Period = Period(2 * Day) }, []fe{{"period", `a quota's period must be "1d", "1w", "1mo" or "1y"`}}},
		{"rate of 1mo", func(r *Rule) { r.Kind, r.Anchor = Rate, "" }, []fe{{"period", `"1mo" is a calendar month, for quotas only: use "30d" or "4w" for a rate`}}},
		{"unknown kind", func(r *Rule) { r.Kind = "bucket" }, []fe{{"kind", `must be "rate", "quota" or "concurrency"`}}},
		{"quota with a burst", func(r *Rule) { r.Burst = new(int64(200_000)) }, []fe{{"burst", "must be empty for a quota: its limit is the window's capacity"}}},
		{"anchor not RFC 3339", func(r *Rule) { r.Anchor = "2026-01-31" }, []fe{{"anchor", `must be an RFC 3339 time such as "2026-01-31T00:00:00Z"`}}},
		{"anchor fraction", func(r *Rule) { r.Anchor = "2026-01-31T00:00:00.5Z" }, []fe{{"anchor", "must be a whole second"}}},
		{"anchor 2100", func(r *Rule) { r.Anchor = "2100-01-01T00:00:00Z" }, []fe{{"anchor", "must be between 1970 and 2100"}}},
		{"anchor on a rate rule", func(r *Rule) { r.Kind, r.Period = Rate, Period(time.Hour) }, []fe{{"anchor", "is for quota rules only"}}},
		{"durable quota", func(r *Rule) { r.Durable = true }, nil},
		{"durable rate rule", func(r *Rule) { r.Kind, r.Period, r.Anchor, r.Durable = Rate, Period(time.Hour), "", true }, []fe{{"durable", "is for quota rules only"}}},
		{"cost over the quota", func(r *Rule) { r.Limit, r.Cost = new(int64(5)), new(int64(6)) }, []fe{{"cost", "must be at most the burst (5), or no request could pass"}}},
		{"floor at the quota", func(r *Rule) { r.MinRemaining = new(int64(100_000)) }, []fe{{"min_remaining", "must be at most the burst minus the cost (99999), or no request could pass"}}},
		{"negative floor", func(r *Rule) { r.MinRemaining = new(int64(-1)) }, []fe{{"min_remaining", "must be between 0 and 999999999"}}},
		{"floor at a rate burst", func(r *Rule) {
			r.Kind, r.Period, r.Anchor, r.Limit, r.Burst, r.MinRemaining = Rate, Period(time.Second), "", new(int64(10)), new(int64(20)), new(int64(20))
		}, []fe{{"min_remaining", "must be at most the burst minus the cost (19), or no request could pass"}}},
	}
	for _, tt := range tests {
		r := validQuota()
		tt.mutate(&r)
		wantFields(t, tt.name+": Validate()", r.Validate(), tt.want)
	}
}

// wantFields checks err, what call returned: nil when want is, else a
// *ValidationError of exactly want's fields.
func wantFields(t *testing.T, call string, err error, want []FieldError) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s = %v, want nil", call, err)
		}
		return
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Errorf("%s = %v, want a *ValidationError", call, err)
		return
	}
	if diff := cmp.Diff(want, ve.Fields); diff != "" {
		t.Errorf("%s fields mismatch (-want +got):\n%s", call, diff)
	}
}

// TestQuotaPlans: a plan may be a quota; a rule naming it must be one, and
// its floor must fit the plan's limit.
func TestQuotaPlans(t *testing.T) {
	t.Parallel()
	monthly := Plan{Name: "gold-monthly", Kind: Quota, Limit: 1000, Period: Month}
	if err := monthly.Validate(); err != nil {
		t.Errorf("Validate(quota plan) = %v, want nil", err)
	}
	type fe = FieldError
	for _, tt := range []struct {
		name string
		p    Plan
		want []FieldError
	}{
		{"hourly quota plan", Plan{Name: "q", Kind: Quota, Limit: 1, Period: Period(time.Hour)}, []fe{{"period", `a quota's period must be "1d", "1w", "1mo" or "1y"`}}},
		{"quota plan with a burst", Plan{Name: "q", Kind: Quota, Limit: 1, Period: Period(Day), Burst: new(int64(2))}, []fe{{"burst", "must be empty for a quota: its limit is the window's capacity"}}},
		{"monthly rate plan", Plan{Name: "q", Limit: 1, Period: Month}, []fe{{"period", `"1mo" is a calendar month, for quotas only: use "30d" or "4w" for a rate`}}},
		{"unknown kind", Plan{Name: "q", Kind: "x", Limit: 1, Period: Period(Day)}, []fe{{"kind", `must be "rate", "quota" or "concurrency"`}}},
	} {
		wantFields(t, tt.name+": Validate()", tt.p.Validate(), tt.want)
	}

	r := Rule{API: "a", Route: "*", Subject: "k", Plan: "gold-monthly", Kind: Quota, Anchor: "2026-02-01T00:00:00Z"}
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate(quota rule naming a plan) = %v", err)
	}
	if err := r.ValidateWithPlan(monthly); err != nil {
		t.Errorf("ValidateWithPlan(quota plan) = %v, want nil", err)
	}
	rate := r
	rate.Kind, rate.Anchor = Rate, ""
	if err := rate.ValidateWithPlan(monthly); fieldOf(err) != "kind" {
		t.Errorf("ValidateWithPlan(rate rule, quota plan) = %v, want a problem on kind", err)
	}
	floor := r
	floor.MinRemaining = new(int64(1000))
	if err := floor.ValidateWithPlan(monthly); fieldOf(err) != "min_remaining" {
		t.Errorf("ValidateWithPlan(floor = the plan's limit) = %v, want a problem on min_remaining", err)
	}
	over := r
	over.Cost = new(int64(1001))
	if err := over.ValidateWithPlan(monthly); fieldOf(err) != "cost" {
		t.Errorf("ValidateWithPlan(cost over the plan's limit) = %v, want a problem on cost", err)
	}
	// The plan cannot become a rate plan under its quota rule.
	asRate := monthly
	asRate.Kind, asRate.Period = Rate, Period(time.Hour)
	if err := CheckPlanRules(asRate, []Rule{r}); !errors.Is(err, ErrConflict) {
		t.Errorf("CheckPlanRules(quota plan to rate) = %v, want ErrConflict", err)
	}
}

func fieldOf(err error) string {
	var ve *ValidationError
	if errors.As(err, &ve) && len(ve.Fields) > 0 {
		return ve.Fields[0].Field
	}
	return ""
}

// TestQuotaJSON: "1mo" and the anchor read and write back; the anchor is
// stored in UTC.
func TestQuotaJSON(t *testing.T) {
	t.Parallel()
	var r Rule
	in := `{"api":"a","route":"*","subject":"k","kind":"quota","limit":5,"period":"1mo","anchor":"2026-01-31T00:00:00+02:00","min_remaining":1}`
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatalf("Unmarshal() error = %v", err)
	}
	r.Normalize()
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	if r.Period != Month || r.Anchor != "2026-01-30T22:00:00Z" || *r.MinRemaining != 1 {
		t.Errorf("Unmarshal+Normalize = period %v, anchor %q, min_remaining %d", r.Period, r.Anchor, *r.MinRemaining)
	}
	b, _ := json.Marshal(r)
	var back Rule
	if err := json.Unmarshal(b, &back); err != nil || back.Period != Month || back.Anchor != r.Anchor || back.Kind != Quota {
		t.Errorf("round trip of %s = %+v, %v", b, back, err)
	}
}

// TestQuotaMatch: a rate rule and a quota rule on one scope both apply;
// the default rate stacks with a quota; the policies name the window.
func TestQuotaMatch(t *testing.T) {
	t.Parallel()
	rate := Rule{ID: "r-rate", API: "a", Route: "*", Subject: "*", Limit: new(int64(10)), Period: Period(time.Second), Burst: new(int64(20))}
	quota := Rule{ID: "r-quota", API: "a", Route: "*", Subject: "*", Kind: Quota, Limit: new(int64(100_000)), Period: Month}
	routeQ := Rule{ID: "r-route-quota", API: "a", Route: "POST /chat", Subject: "gold", Kind: Quota, Limit: new(int64(50)), Period: Period(Day),
		Anchor: "2026-06-01T08:00:00Z", MinRemaining: new(int64(5))}
	s := NewSnapshot([]Rule{rate, quota, routeQ}, nil, SnapshotOptions{Default: &Effective{Limit: 1, Period: time.Second}})
	if sk := s.Skipped(); len(sk) != 0 {
		t.Fatalf("Skipped() = %+v", sk)
	}
	m := s.Match("a", "POST", "/chat", "gold")
	if m.API == nil || m.API.ID != "r-rate" || m.APIQuota == nil || m.APIQuota.ID != "r-quota" ||
		m.RouteQuota == nil || m.RouteQuota.ID != "r-route-quota" || m.Route != nil || m.Default {
		t.Fatalf("Match() = %+v, want the rate rule and both quotas", m)
	}
	if got, want := m.APIQuota.Policy, `"r-quota";q=100000;w=2629746`; got != want {
		t.Errorf("quota Policy = %s, want %s", got, want)
	}
	if e := m.RouteQuota; e.Kind != Quota || e.MinRemaining != 5 || !e.Anchor.Equal(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)) || e.Burst != 50 {
		t.Errorf("route quota = %+v", e)
	}
	if m.Cost() != 1 {
		t.Errorf("Cost() = %d, want 1", m.Cost())
	}
	// Another api: no rate rule, so the default, and no quota.
	if m := s.Match("b", "GET", "/", "k"); !m.Default || m.APIQuota != nil {
		t.Errorf("Match(other api) = %+v, want the default alone", m)
	}
	// Quota-only scope: the default rate limit stacks on the quota.
	s2 := NewSnapshot([]Rule{quota}, nil, SnapshotOptions{Default: &Effective{Limit: 1, Period: time.Second}})
	if m := s2.Match("a", "GET", "/", "k"); !m.Default || m.APIQuota == nil {
		t.Errorf("Match(quota only) = %+v, want the default and the quota", m)
	}
	// ForSubject lists both kinds.
	if got := s.ForSubject("gold", "a", ""); len(got) != 3 {
		t.Errorf("ForSubject(gold) = %d rules, want 3", len(got))
	}
	// Two quotas on one scope: the larger id is skipped.
	dup := quota
	dup.ID = "r-quota-2"
	s3 := NewSnapshot([]Rule{quota, dup, rate}, nil, SnapshotOptions{})
	if sk := s3.Skipped(); len(sk) != 1 || sk[0].ID != "r-quota-2" {
		t.Errorf("Skipped() = %+v, want r-quota-2", sk)
	}
}
