package stats_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/stats"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStats(o stats.Options) (*stats.Stats, *clock) {
	c := &clock{t: time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)}
	o.Now = c.now
	return stats.New(o), c
}

func deny(rule, subject string) stats.Decision {
	return stats.Decision{Rule: rule, API: "demo", SubjectHash: subject}
}

func TestReportCountsPerRule(t *testing.T) {
	t.Parallel()
	s, _ := newStats(stats.Options{})
	for range 3 {
		s.Record(stats.Decision{Rule: "a", API: "demo", Allowed: true})
	}
	s.Record(deny("a", "h1"))
	s.Record(stats.Decision{Rule: "b", API: "demo", Allowed: true, ShadowDenied: true})
	s.Record(stats.Decision{Rule: "b", API: "demo", Allowed: true, FailOpen: true})
	s.Record(stats.Decision{API: "demo", Allowed: true}) // no rule: not counted

	rep := s.Report(5*time.Minute, 10)
	if len(rep.Rules) != 2 {
		t.Fatalf("Report().Rules = %+v, want 2 rules", rep.Rules)
	}
	a, b := rep.Rules[0], rep.Rules[1]
	if a.Rule != "a" || *a.Allowed != 3 || a.Denied != 1 || a.ShadowDenied != 0 || a.FailOpen != 0 {
		t.Errorf("rule a = %+v (allowed %d), want allowed 3, denied 1", a, *a.Allowed)
	}
	if b.Rule != "b" || *b.Allowed != 1 || b.Denied != 0 || b.ShadowDenied != 1 || b.FailOpen != 1 {
		t.Errorf("rule b = %+v (allowed %d), want allowed 1, shadow 1, fail-open 1", b, *b.Allowed)
	}
	if len(rep.Subjects) != 1 || rep.Subjects[0] != (stats.SubjectStat{Subject: "h1", Rule: "a", API: "demo", Denied: 1}) {
		t.Errorf("Report().Subjects = %+v, want h1 denied once by a", rep.Subjects)
	}
	if len(rep.Series) != 5 || rep.Series[4].Denied != 1 || *rep.Series[4].Allowed != 4 {
		t.Errorf("Report().Series = %+v, want 5 points, the last with 1 denied, 4 allowed", rep.Series)
	}
}

func TestWindowRollsOver(t *testing.T) {
	t.Parallel()
	s, c := newStats(stats.Options{}) // 15 slots of 1m
	s.Record(deny("old", "h"))
	c.add(3 * time.Minute)
	s.Record(deny("new", "h"))

	tests := []struct {
		window time.Duration
		want   []string
	}{
		{time.Minute, []string{"new"}},
		{3 * time.Minute, []string{"new"}},
		{4 * time.Minute, []string{"new", "old"}},
		{time.Hour, []string{"new", "old"}}, // clamped to 15m
	}
	for _, tt := range tests {
		rep := s.Report(tt.window, 10)
		var got []string
		for _, r := range rep.Rules {
			got = append(got, r.Rule)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Report(%s) rules = %v, want %v", tt.window, got, tt.want)
		}
	}
	// 15 minutes on, the old slot is reused and forgotten.
	c.add(15 * time.Minute)
	s.Record(deny("newest", "h"))
	if rep := s.Report(15*time.Minute, 10); len(rep.Rules) != 1 || rep.Rules[0].Rule != "newest" || len(rep.Series) != 15 {
		t.Errorf("after 15m, Report(15m) = %+v, want only newest over 15 points", rep.Rules)
	}
}

// TestHeavyHitterSurvivesFlood is the reason for Space-Saving: an attacker
// sending one denial each from thousands of fresh subjects, before and
// after the real offender, does not push it out of the summary.
func TestHeavyHitterSurvivesFlood(t *testing.T) {
	t.Parallel()
	s, _ := newStats(stats.Options{Subjects: 64})
	for i := range 5000 {
		s.Record(deny("r", fmt.Sprintf("flood-%d", i)))
	}
	for range 400 {
		s.Record(deny("r", "offender"))
	}
	for i := range 5000 {
		s.Record(deny("r", fmt.Sprintf("flood2-%d", i)))
	}
	rep := s.Report(time.Minute, 3)
	if len(rep.Subjects) == 0 || rep.Subjects[0].Subject != "offender" {
		t.Fatalf("top subject = %+v, want offender", rep.Subjects)
	}
	// Over by at most denials/capacity = 10400/64 = 162.
	if got := rep.Subjects[0].Denied; got < 400 || got > 400+10400/64 {
		t.Errorf("offender denied = %d, want 400..%d", got, 400+10400/64)
	}
	if len(rep.Subjects) != 3 {
		t.Errorf("Report(n=3) gave %d subjects", len(rep.Subjects))
	}
}

func TestRulesAreCapped(t *testing.T) {
	t.Parallel()
	s, _ := newStats(stats.Options{MaxRules: 3})
	for i := range 10 {
		s.Record(deny(fmt.Sprintf("r%d", i), "h"))
	}
	rep := s.Report(time.Minute, 100)
	if len(rep.Rules) != 4 {
		t.Fatalf("Report().Rules = %+v, want 3 rules and %s", rep.Rules, stats.OtherRule)
	}
	if rep.Rules[0].Rule != stats.OtherRule || rep.Rules[0].Denied != 7 {
		t.Errorf("first rule = %+v, want %s with 7 denials", rep.Rules[0], stats.OtherRule)
	}
}

func TestNilStatsRecords(t *testing.T) {
	var s *stats.Stats
	s.Record(deny("r", "h")) // must not panic
}

func TestConcurrentRecord(t *testing.T) {
	t.Parallel()
	s, _ := newStats(stats.Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				s.Record(deny("r", fmt.Sprintf("s%d-%d", g, i%10)))
			}
		})
	}
	wg.Wait()
	if rep := s.Report(time.Minute, 1); rep.Rules[0].Denied != 8000 {
		t.Errorf("denied = %d, want 8000", rep.Rules[0].Denied)
	}
}

// BenchmarkRecord is sluice local's cost per decision: nine allowed to one
// denied, over 1000 denied subjects, from parallel goroutines.
func BenchmarkRecord(b *testing.B) {
	s := stats.New(stats.Options{})
	subjects := make([]string, 1000)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("%032x", i)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if i%10 == 0 {
				s.Record(deny("r", subjects[i%len(subjects)]))
			} else {
				s.Record(stats.Decision{Rule: "r", API: "demo", Allowed: true})
			}
		}
	})
}

// TestShadowDenialIsTheShadowRules: a shadow rule's would-be denial beside
// an enforcing rule is counted under the shadow rule, and the decision's
// allow under the enforcing one; the totals count the decision once.
func TestShadowDenialIsTheShadowRules(t *testing.T) {
	t.Parallel()
	s, _ := newStats(stats.Options{})
	s.Record(stats.Decision{Rule: "api-wide", API: "demo", Allowed: true})
	s.Record(stats.Decision{Rule: "api-wide", ShadowRule: "new-route", API: "demo", Allowed: true, ShadowDenied: true})
	s.Record(stats.Decision{Rule: "new-route", ShadowRule: "new-route", API: "demo", Allowed: true, ShadowDenied: true})
	rep := s.Report(5*time.Minute, 10)
	got := map[string][2]int64{}
	for _, r := range rep.Rules {
		got[r.Rule] = [2]int64{*r.Allowed, r.ShadowDenied}
	}
	want := map[string][2]int64{"api-wide": {2, 0}, "new-route": {0, 2}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Report().Rules (allowed, shadow denied) = %v, want %v", got, want)
	}
	last := rep.Series[len(rep.Series)-1]
	if *last.Allowed != 1 || last.ShadowDenied != 2 {
		t.Errorf("totals: allowed %d, shadow denied %d; want 1, 2 (three decisions)", *last.Allowed, last.ShadowDenied)
	}
}
