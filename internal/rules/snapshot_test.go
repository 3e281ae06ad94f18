package rules

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// rule builds an enabled inline rule: 10 per minute.
func rule(id, api, route, subject string) Rule {
	return Rule{ID: id, API: api, Route: route, Subject: subject, Limit: new(int64(10)), Period: Period(time.Minute)}
}

// ids returns the IDs of a Match, "-" for nil.
func ids(m Match) [2]string {
	id := func(e *Effective) string {
		if e == nil {
			return "-"
		}
		return e.ID
	}
	return [2]string{id(m.API), id(m.Route)}
}

// forSubsets calls check for each subset of candidates (a bit mask) with
// a snapshot of noise and that subset, and the ID of the subset's first
// rule ("-" when empty): the one Match must pick.
func forSubsets(candidates, noise []Rule, check func(mask int, s *Snapshot, want string)) {
	for mask := 0; mask < 1<<len(candidates); mask++ {
		rs := slices.Clone(noise)
		want := "-"
		for i, c := range candidates {
			if mask&(1<<i) != 0 {
				rs = append(rs, c)
				if want == "-" {
					want = c.ID
				}
			}
		}
		check(mask, NewSnapshot(rs, nil, SnapshotOptions{}), want)
	}
}

// TestMatchRoutePrecedence tries every subset of the eight route rules that
// could match GET /pets/{id} on api "a" for subject "u": the winner must be
// the first present in precedence order (exact subject, then exact api, then
// exact method).
func TestMatchRoutePrecedence(t *testing.T) {
	t.Parallel()
	candidates := []Rule{ // in precedence order
		rule("1", "a", "GET /pets/{id}", "u"),
		rule("2", "a", "ANY /pets/{id}", "u"),
		rule("3", "*", "GET /pets/{id}", "u"),
		rule("4", "*", "ANY /pets/{id}", "u"),
		rule("5", "a", "GET /pets/{id}", "*"),
		rule("6", "a", "ANY /pets/{id}", "*"),
		rule("7", "*", "GET /pets/{id}", "*"),
		rule("8", "*", "ANY /pets/{id}", "*"),
	}
	noise := []Rule{ // never match the request
		rule("n1", "b", "GET /pets/{id}", "u"),
		rule("n2", "a", "POST /pets/{id}", "u"),
		rule("n3", "a", "GET /pets", "u"),
		rule("n4", "a", "GET /pets/{id}", "v"),
		rule("n5", "*", "GET /pets/{id}/toys", "*"),
	}
	forSubsets(candidates, noise, func(mask int, s *Snapshot, want string) {
		if got := ids(s.Match("a", "GET", "/pets/{id}", "u")); got != [2]string{"-", want} {
			t.Errorf("rules %08b: Match(a, GET, /pets/{id}, u) = %v, want [- %s]", mask, got, want)
		}
	})
}

// TestMatchMethodCase: a method in any case is one method, HEAD included,
// so a rule on GET is not escaped by spelling ("get", "head"); a byte
// outside ASCII is no letter of a method.
func TestMatchMethodCase(t *testing.T) {
	t.Parallel()
	s := NewSnapshot([]Rule{
		rule("get", "a", "GET /x", "*"),
		rule("headY", "a", "HEAD /y", "*"),
		rule("getY", "a", "GET /y", "*"),
		rule("post", "a", "post /z", "*"), // stored as POST /z
	}, nil, SnapshotOptions{})
	for _, tc := range []struct{ method, resource, want string }{
		{"GET", "/x", "get"},
		{"get", "/x", "get"},
		{"Get", "/x", "get"},
		{"gEt", "/x", "get"},
		{"HEAD", "/x", "get"}, // HEAD is GET where no rule names HEAD
		{"head", "/x", "get"},
		{"Head", "/x", "get"},
		{"hEAD", "/y", "headY"}, // a rule names HEAD: it wins
		{"head", "/y", "headY"},
		{"get", "/y", "getY"},
		{"POST", "/x", "-"},
		{"Post", "/z", "post"},
		{"po\u017ft", "/z", "-"}, // Unicode would fold ſ to S
		{"GET\x00", "/x", "-"},
	} {
		if got := ids(s.Match("a", tc.method, tc.resource, "u"))[1]; got != tc.want {
			t.Errorf("Match(a, %q, %s, u) route rule = %s, want %s", tc.method, tc.resource, got, tc.want)
		}
	}
}

// TestCanonicalMethod: ASCII letters upper-cased, other bytes kept, and
// no allocation for a method already in upper case (not parallel:
// AllocsPerRun).
func TestCanonicalMethod(t *testing.T) {
	for in, want := range map[string]string{"": "", "GET": "GET", "get": "GET", "gEt": "GET", "m-Search": "M-SEARCH",
		"po\u017ft": "PO\u017fT", "\xffget": "\xffGET"} {
		if got := CanonicalMethod(in); got != want {
			t.Errorf("CanonicalMethod(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { CanonicalMethod("DELETE") }); n != 0 {
		t.Errorf("CanonicalMethod(DELETE) allocates %v times, want 0", n)
	}
}

func TestMatchAPIPrecedence(t *testing.T) {
	t.Parallel()
	candidates := []Rule{
		rule("1", "a", "*", "u"),
		rule("2", "*", "*", "u"),
		rule("3", "a", "*", "*"),
		rule("4", "*", "*", "*"),
	}
	noise := []Rule{rule("n1", "b", "*", "u"), rule("n2", "a", "*", "v"), rule("n3", "b", "*", "*")}
	forSubsets(candidates, noise, func(mask int, s *Snapshot, want string) {
		if got := ids(s.Match("a", "GET", "/x", "u")); got != [2]string{want, "-"} {
			t.Errorf("rules %04b: Match(a, GET, /x, u) = %v, want [%s -]", mask, got, want)
		}
	})
}

func TestMatchScopesAndDefault(t *testing.T) {
	t.Parallel()
	disabled := rule("off", "a", "*", "u")
	disabled.Enabled = new(false)
	disabledRoute := rule("off2", "a", "GET /x", "*")
	disabledRoute.Enabled = new(false)
	rs := []Rule{
		rule("api-a", "a", "*", "*"),
		rule("route-x", "a", "GET /x", "*"),
		rule("route-y-any", "*", "ANY /y", "*"),
		rule("vip", "a", "*", "vip"),
		disabled, disabledRoute,
	}
	def := &Effective{Limit: 5, Period: time.Second}
	tests := []struct {
		api, method, resource, subject string
		want                           [2]string
		isDefault                      bool
	}{
		{"a", "GET", "/x", "u", [2]string{"api-a", "route-x"}, false}, // stacked: both scopes charge
		{"a", "GET", "/x", "vip", [2]string{"vip", "route-x"}, false},
		{"a", "POST", "/x", "u", [2]string{"api-a", "-"}, false},
		{"a", "DELETE", "/y", "u", [2]string{"api-a", "route-y-any"}, false},
		{"b", "GET", "/y", "u", [2]string{"-", "route-y-any"}, false}, // route scope alone: no default
		{"b", "GET", "/x", "u", [2]string{"default", "-"}, true},
		{"", "", "", "", [2]string{"default", "-"}, true},
		{"a", "get", "/x", "u", [2]string{"api-a", "route-x"}, false}, // a method in any case is one (CanonicalMethod)
		{"a", "GET", "/x/", "u", [2]string{"api-a", "-"}, false},      // resources match exactly
	}
	for _, withDefault := range []bool{true, false} {
		opt := SnapshotOptions{}
		if withDefault {
			opt.Default = def
		}
		s := NewSnapshot(rs, nil, opt)
		if s.Len() != 4 {
			t.Errorf("Len() = %d, want 4 (disabled rules left out)", s.Len())
		}
		for _, tt := range tests {
			m := s.Match(tt.api, tt.method, tt.resource, tt.subject)
			want, wantDefault := tt.want, tt.isDefault
			if !withDefault && tt.isDefault {
				want, wantDefault = [2]string{"-", "-"}, false
			}
			if got := ids(m); got != want || m.Default != wantDefault {
				t.Errorf("default %v: Match(%q, %q, %q, %q) = %v default %v, want %v default %v",
					withDefault, tt.api, tt.method, tt.resource, tt.subject, got, m.Default, want, wantDefault)
			}
		}
	}
}

func TestMatchEffective(t *testing.T) {
	t.Parallel()
	block := rule("blocked", "a", "*", "bad")
	block.Limit = new(int64(0))
	shadow := Rule{ID: "gold-rule", API: "a", Route: "POST /orders", Subject: "*", Plan: "gold", Cost: new(int64(5)), Mode: Shadow, FailureMode: FailClosed}
	burstless := Rule{ID: "silver-rule", API: "a", Route: "*", Subject: "*", Plan: "silver"}
	plans := []Plan{
		{Name: "gold", Limit: 1000, Period: Period(time.Minute), Burst: new(int64(2000))},
		{Name: "silver", Limit: 100, Period: Period(time.Hour)},
	}
	s := NewSnapshot([]Rule{block, shadow, burstless}, plans, SnapshotOptions{})

	got := s.Match("a", "POST", "/orders", "bad")
	want := Match{
		API: &Effective{
			ID: "blocked", API: "a", Route: "*", Subject: "bad", Limit: 0, Burst: 0, Cost: 1, Period: time.Minute,
			FailureMode: FailOpen, Mode: Enforce, Kind: Rate, PolicyName: `"blocked"`, Policy: `"blocked";q=0;w=60`,
		},
		Route: &Effective{
			ID: "gold-rule", API: "a", Route: "POST /orders", Subject: "*", Plan: "gold", Limit: 1000, Burst: 2000, Cost: 5,
			Period: time.Minute, FailureMode: FailClosed, Mode: Shadow, Kind: Rate, PolicyName: `"gold-rule"`, Policy: `"gold-rule";q=2000;w=60`,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Match(a, POST, /orders, bad) mismatch (-want +got):\n%s", diff)
	}
	if !got.API.Blocked() || got.Route.Blocked() {
		t.Errorf("Blocked() = %v, %v, want true, false", got.API.Blocked(), got.Route.Blocked())
	}
	if got.Cost() != 5 {
		t.Errorf("Match.Cost() = %d, want 5 (the route rule's)", got.Cost())
	}

	silver := s.Match("a", "GET", "/", "good")
	if silver.API == nil || silver.API.Burst != 100 || silver.API.Period != time.Hour || silver.API.Plan != "silver" {
		t.Errorf("Match(a, GET, /, good).API = %+v, want plan silver: burst 100 per hour", silver.API)
	}
	if silver.Cost() != 1 || (Match{}).Cost() != 1 {
		t.Errorf("Cost() = %d, %d, want 1, 1", silver.Cost(), Match{}.Cost())
	}
}

func TestNewSnapshotSkips(t *testing.T) {
	t.Parallel()
	invalid := rule("r-invalid", "a", "GET x", "*")
	noID := rule("", "a", "GET /noid", "*")
	unknownPlan := Rule{ID: "r-unknown", API: "a", Route: "GET /u", Subject: "*", Plan: "nope"}
	badPlanRule := Rule{ID: "r-badplan", API: "a", Route: "GET /b", Subject: "*", Plan: "broken"}
	disabledBad := Rule{ID: "r-off", Enabled: new(false)} // disabled: not even validated
	rs := []Rule{
		rule("r2", "a", "*", "*"),
		rule("r1", "a", "*", "*"), // same scope, smaller id: wins
		rule("r3", "a", "GET /x", "u"),
		rule("r3", "a", "GET /y", "u"), // same id
		invalid, noID, unknownPlan, badPlanRule, disabledBad,
		{ID: "r4", API: "a", Route: "GET /p", Subject: "*", Plan: "ok"}, // the first plan "ok"
	}
	ps := []Plan{
		{Name: "ok", Limit: 1, Period: Period(time.Second)},
		{Name: "ok", Limit: 2, Period: Period(time.Second)},
		{Name: "broken", Limit: 1},
	}
	s := NewSnapshot(rs, ps, SnapshotOptions{Default: &Effective{Limit: 1}})
	want := []Skip{
		{Kind: KindPlan, ID: "ok", Reason: "another plan has the same name"},
		{Kind: KindPlan, ID: "broken", Reason: "invalid period: is required"},
		{Kind: KindRule, ID: "", Reason: "has no id"},
		{Kind: KindRule, ID: "r-badplan", Reason: `plan "broken" is invalid: invalid period: is required`},
		{Kind: KindRule, ID: "r-invalid", Reason: "invalid route: path must start with '/'"},
		{Kind: KindRule, ID: "r-unknown", Reason: `unknown plan "nope"`},
		{Kind: KindRule, ID: "r2", Reason: "another rule with a smaller id holds the scope (api, route, subject, kind)"},
		{Kind: KindRule, ID: "r3", Reason: "another rule has the same id"},
		{Kind: "default", Reason: "period must be at least 1s"},
	}
	if diff := cmp.Diff(want, s.Skipped()); diff != "" {
		t.Errorf("Skipped() mismatch (-want +got):\n%s", diff)
	}
	var gotIDs []string
	for _, e := range s.Rules() {
		gotIDs = append(gotIDs, e.ID+" "+e.Route)
	}
	if diff := cmp.Diff([]string{"r1 *", "r3 GET /x", "r4 GET /p"}, gotIDs); diff != "" {
		t.Errorf("Rules() mismatch (-want +got):\n%s", diff)
	}
	if s.Len() != 3 || s.Rules()[2].Limit != 1 || s.Default() != nil {
		t.Errorf("Len() = %d, r4's limit %d, Default() = %v; want 3, 1 (the first plan ok), nil", s.Len(), s.Rules()[2].Limit, s.Default())
	}
	if got := s.Match("a", "GET", "/u", "x"); got.API == nil || got.API.ID != "r1" || got.Route != nil {
		t.Errorf("Match(a, GET, /u, x) = %v, want [r1 -]: the unknown-plan rule is skipped", ids(got))
	}
}

// TestNewSnapshotSkipsOutOfBounds pins that rows the admin API would refuse
// today but a store may still hold (written before a bound, or a plan
// changed under its rules) never reach the limiter: a rule whose cost
// exceeds its plan's burst, a plan whose refill horizon is beyond
// MaxHorizon and the rules naming it, an inline rule beyond it.
func TestNewSnapshotSkipsOutOfBounds(t *testing.T) {
	t.Parallel()
	onPlan := func(id, route, plan string, cost int64) Rule {
		return Rule{ID: id, API: "a", Route: route, Subject: "*", Plan: plan, Cost: new(cost)}
	}
	issue := rule("r-issue", "a", "GET /issue", "*")
	issue.Limit, issue.Period, issue.Burst, issue.Cost = new(int64(1)), Period(Year), new(int64(10_000_000)), new(int64(1_000_000))
	rs := []Rule{
		onPlan("r-fits", "GET /fits", "small", 5),
		onPlan("r-over", "GET /over", "small", 6),
		onPlan("r-far", "GET /far", "far", 1),
		issue,
	}
	ps := []Plan{
		{Name: "small", Limit: 1, Period: Period(time.Second), Burst: new(int64(5))},
		{Name: "far", Limit: 1, Period: Period(Year), Burst: new(int64(11))},
	}
	s := NewSnapshot(rs, ps, SnapshotOptions{})
	far := "invalid burst: must be at most 10 at 1 per 1y: an empty bucket refills in burst × period ÷ limit, at most 10y, and here in about 11.0 years"
	want := []Skip{
		{Kind: KindPlan, ID: "far", Reason: far},
		{Kind: KindRule, ID: "r-far", Reason: `plan "far" is invalid: ` + far},
		{Kind: KindRule, ID: "r-issue", Reason: "invalid input: 2 field errors, first burst: must be at most 10 at 1 per 1y: an empty bucket refills in burst × period ÷ limit, at most 10y, and here in about 10000000 years"},
		{Kind: KindRule, ID: "r-over", Reason: `invalid cost: must be at most the burst (5) of plan "small", or no request could pass`},
	}
	if diff := cmp.Diff(want, s.Skipped()); diff != "" {
		t.Errorf("Skipped() mismatch (-want +got):\n%s", diff)
	}
	for _, e := range s.Rules() {
		if e.ID != "r-fits" {
			t.Errorf("Rules() holds %s, want r-fits only", e.ID)
		}
		if e.Cost > e.Burst || !WithinHorizon(e.Burst, e.Limit, e.Period) {
			t.Errorf("Rules() holds %+v, out of bounds", e)
		}
	}
}

// TestNewSnapshotNormalizes pins that rules are normalised on a copy: the
// caller's rules are untouched and a lower-case route still matches.
func TestNewSnapshotNormalizes(t *testing.T) {
	t.Parallel()
	r := rule("r1", " a ", "get /x/", "u")
	rs := []Rule{r}
	s := NewSnapshot(rs, nil, SnapshotOptions{})
	if got := ids(s.Match("a", "GET", "/x", "u")); got != [2]string{"-", "r1"} {
		t.Errorf("Match(a, GET, /x, u) = %v, want [- r1]", got)
	}
	if diff := cmp.Diff(r, rs[0]); diff != "" {
		t.Errorf("NewSnapshot changed its input (-want +got):\n%s", diff)
	}
}

func TestDefaultEffective(t *testing.T) {
	t.Parallel()
	s := NewSnapshot(nil, nil, SnapshotOptions{Default: &Effective{Limit: 100, Period: time.Minute}})
	want := &Effective{
		ID: "default", API: "*", Route: "*", Subject: "*", Limit: 100, Burst: 100, Cost: 1, Period: time.Minute,
		FailureMode: FailOpen, Mode: Enforce, Kind: Rate, PolicyName: `"default"`, Policy: `"default";q=100;w=60`,
	}
	if diff := cmp.Diff(want, s.Default()); diff != "" {
		t.Errorf("Default() mismatch (-want +got):\n%s", diff)
	}
	m := s.Match("a", "GET", "/", "u")
	if m.API != s.Default() || !m.Default || m.Route != nil {
		t.Errorf("Match() = %+v, want the default", m)
	}
}

// TestDefaultRejected pins that a default with numbers the limiter cannot
// apply is left out and reported, never half-applied.
func TestDefaultRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		def    Effective
		reason string
	}{
		{"negative limit", Effective{Limit: -1, Period: time.Minute}, "limit must be between 0 (block) and 1000000000"},
		{"burst below limit", Effective{Limit: 10, Burst: 5, Period: time.Minute}, "burst must be between limit and 1000000000"},
		{"burst too large", Effective{Limit: 10, Burst: MaxBurst + 1, Period: time.Minute}, "burst must be between limit and 1000000000"},
		{"negative cost", Effective{Limit: 10, Cost: -1, Period: time.Minute}, "cost must be between 1 and 1000000"},
		{"cost too large", Effective{Limit: 10, Cost: MaxCost + 1, Period: time.Minute}, "cost must be between 1 and 1000000"},
		{"cost over burst", Effective{Limit: 10, Cost: 11, Period: time.Minute}, "cost must be at most the burst, or no request could pass"},
		{"refill horizon", Effective{Limit: 1, Burst: 11, Period: Year}, "burst must be at most 10 at 1 per 1y: an empty bucket refills in burst × period ÷ limit, at most 10y, and here in about 11.0 years"},
	} {
		s := NewSnapshot(nil, nil, SnapshotOptions{Default: &tc.def})
		if s.Default() != nil {
			t.Errorf("%s: Default() = %+v, want nil", tc.name, s.Default())
		}
		if diff := cmp.Diff([]Skip{{Kind: "default", Reason: tc.reason}}, s.Skipped()); diff != "" {
			t.Errorf("%s: Skipped() mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestRateLimitStrings(t *testing.T) {
	e := Effective{ID: `odd"id\` + "\x01é", Burst: 7, Period: 90 * time.Second}
	e.finish()
	if want := `"odd\"id\\";q=7;w=90`; e.Policy != want {
		t.Errorf("Policy = %s, want %s", e.Policy, want)
	}
	tests := []struct {
		remaining int64
		reset     time.Duration
		want      string
	}{
		{3, 1500 * time.Millisecond, `"odd\"id\\";r=3;t=2`},
		{0, 0, `"odd\"id\\";r=0;t=0`},
		{-1, time.Millisecond, `"odd\"id\\";r=0;t=1`},
		{10, 60 * time.Second, `"odd\"id\\";r=10;t=60`},
	}
	for _, tt := range tests {
		if got := string(e.AppendRateLimit(nil, tt.remaining, tt.reset)); got != tt.want {
			t.Errorf("AppendRateLimit(%d, %v) = %s, want %s", tt.remaining, tt.reset, got, tt.want)
		}
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = e.AppendRateLimit(buf[:0], 12345, time.Minute) }); n != 0 {
		t.Errorf("AppendRateLimit allocations = %v, want 0", n)
	}
}

func TestForSubject(t *testing.T) {
	t.Parallel()
	rs := []Rule{
		rule("api-a", "a", "*", "*"),
		rule("api-a-vip", "a", "*", "vip"),
		rule("x-get", "a", "GET /x", "*"),
		rule("x-any", "a", "ANY /x", "*"),
		rule("y-vip", "*", "GET /y", "vip"),
		rule("b-api", "b", "*", "*"),
	}
	s := NewSnapshot(rs, nil, SnapshotOptions{Default: &Effective{Limit: 1, Period: time.Second}})
	tests := []struct {
		subject, api, route string
		want                []string
	}{
		{"u", "a", "", []string{"api-a", "x-any", "x-get"}},
		{"vip", "a", "", []string{"api-a-vip", "x-any", "x-get", "y-vip"}},
		{"vip", "a", "*", []string{"api-a-vip"}},
		{"u", "a", "GET /x", []string{"api-a", "x-get"}},
		{"u", "a", "post /x", []string{"api-a", "x-any"}},
		{"u", "c", "GET /x", []string{"default"}},
		{"vip", "c", "GET /y", []string{"y-vip"}},
		{"vip", "c", "", []string{"y-vip", "default"}},
		{"u", "", "", []string{"api-a", "x-any", "x-get", "b-api", "default"}}, // api "*" has no API-wide rule
		{"u", "", "*", []string{"api-a", "b-api", "default"}},
	}
	for _, tt := range tests {
		var got []string
		for _, e := range s.ForSubject(tt.subject, tt.api, tt.route) {
			got = append(got, e.ID)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ForSubject(%q, %q, %q) mismatch (-want +got):\n%s", tt.subject, tt.api, tt.route, diff)
		}
	}
	empty := NewSnapshot(nil, nil, SnapshotOptions{Default: &Effective{Limit: 1, Period: time.Second}})
	if got := empty.ForSubject("u", "", ""); len(got) != 1 || got[0].ID != "default" {
		t.Errorf("ForSubject on an empty snapshot = %v, want [default]", got)
	}
}

func TestMatchAllocs(t *testing.T) {
	s, reqs := benchSnapshot(1000)
	i := 0
	n := testing.AllocsPerRun(1000, func() {
		r := reqs[i%len(reqs)]
		s.Match(r[0], r[1], r[2], r[3])
		i++
	})
	if n != 0 {
		t.Errorf("Match allocations = %v, want 0", n)
	}
}

// benchSnapshot builds n rules over 10 apis and n/20 routes, a tenth of
// them API-wide, most with exact subjects (the worst case: every probe
// shape is live), and requests that hit them.
func benchSnapshot(n int) (*Snapshot, [][4]string) {
	rs := make([]Rule, 0, n+4)
	methods := []string{"GET", "POST", "ANY"}
	for i := range n {
		api := fmt.Sprintf("api%05d", i%10)
		route := fmt.Sprintf("%s /v1/res%d/{id}", methods[i%3], i/20)
		if i%10 == 0 {
			route = Wildcard
		}
		rs = append(rs, rule(fmt.Sprintf("r%06d", i), api, route, fmt.Sprintf("subject-%d", i)))
	}
	rs = append(rs,
		rule("w1", "*", "*", "*"), rule("w2", "*", "ANY /v1/res0/{id}", "*"),
		rule("w3", "api00001", "*", "*"), rule("w4", "*", "GET /v1/res1/{id}", "*"))
	s := NewSnapshot(rs, nil, SnapshotOptions{})
	var reqs [][4]string
	for i := range 64 {
		j := i * (n / 64)
		reqs = append(reqs, [4]string{
			fmt.Sprintf("api%05d", j%10), "GET", fmt.Sprintf("/v1/res%d/{id}", j/20), fmt.Sprintf("subject-%d", j+i%2),
		})
	}
	return s, reqs
}

func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			s, reqs := benchSnapshot(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r := reqs[i%len(reqs)]
				s.Match(r[0], r[1], r[2], r[3])
				i++
			}
		})
	}
}

// refMatch is the reference the fuzz test holds Match to: a scan of every
// rule that scores each match by its specificity.
func refMatch(rules []Effective, def *Effective, api, method, resource, subject string) Match {
	var m Match
	bestAPI, bestRoute := -1, -1
	for i := range rules {
		e := &rules[i]
		score := 0
		switch e.Subject {
		case subject:
			score += 4
		case Wildcard:
		default:
			continue
		}
		switch e.API {
		case api:
			score += 2
		case Wildcard:
		default:
			continue
		}
		if e.Route == Wildcard {
			if score > bestAPI {
				m.API, bestAPI = e, score
			}
			continue
		}
		meth, res, _ := strings.Cut(e.Route, " ")
		if res != resource {
			continue
		}
		switch {
		case strings.EqualFold(meth, method): // a method in any case is one method
			score++
		case meth == AnyMethod:
		default:
			continue
		}
		if score > bestRoute {
			m.Route, bestRoute = e, score
		}
	}
	if m.API == nil && m.Route == nil && def != nil {
		m.API, m.Default = def, true
	}
	return m
}

// FuzzMatch builds a small rule set from the input, then checks Match
// against refMatch for a request drawn from the same small alphabets.
func FuzzMatch(f *testing.F) {
	f.Add([]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}, uint16(0), true)
	f.Add([]byte{0xff, 0x7f, 0x3f, 0x1f, 0x0f, 0x07, 0x03, 0x01}, uint16(0x1234), false)
	f.Add([]byte("rules"), uint16(0xffff), true)
	apis := []string{"a", "b", "*", ""}
	methods := []string{"GET", "POST", "ANY", "get"}
	resources := []string{"/x", "/y", "/x/{id}", "/"}
	subjects := []string{"u", "v", "*", "u "}
	plans := []Plan{{Name: "p", Limit: 3, Period: Period(time.Second)}}
	f.Fuzz(func(t *testing.T, data []byte, query uint16, withDefault bool) {
		var rs []Rule
		for i := 0; i+1 < len(data) && len(rs) < 32; i += 2 {
			a, b := data[i], data[i+1]
			route := Wildcard
			if b&3 != 3 {
				route = methods[b&3] + " " + resources[b>>2&3]
			}
			r := rule(fmt.Sprintf("r%02d", len(rs)), apis[a&3], route, subjects[a>>2&3])
			switch a >> 4 & 3 {
			case 1:
				r.Enabled = new(false)
			case 2:
				r.Plan, r.Limit, r.Period = "p", nil, 0
			case 3:
				r.Plan, r.Limit, r.Period = "missing", nil, 0
			}
			if a&0x40 != 0 { // a later rule may contest an earlier one's scope
				r.ID = fmt.Sprintf("q%02d", b)
			}
			rs = append(rs, r)
		}
		var opt SnapshotOptions
		if withDefault {
			opt.Default = &Effective{Limit: 1, Period: time.Second}
		}
		s := NewSnapshot(rs, plans, opt)
		q := int(query)
		api, method, resource, subject := apis[q&3], methods[q>>2&3], resources[q>>4&3], subjects[q>>6&3]
		got := s.Match(api, method, resource, subject)
		want := refMatch(s.Rules(), s.Default(), api, method, resource, subject)
		if ids(got) != ids(want) || got.Default != want.Default {
			t.Fatalf("Match(%q, %q, %q, %q) = %v default %v, want %v default %v", api, method, resource, subject, ids(got), got.Default, ids(want), want.Default)
		}
		// Every rule the snapshot kept must be one of the input's, enabled.
		for _, e := range s.Rules() {
			if !slices.ContainsFunc(rs, func(r Rule) bool { return r.ID == e.ID && (r.Enabled == nil || *r.Enabled) }) {
				t.Fatalf("Rules() holds %q, not an enabled input rule", e.ID)
			}
		}
		// ForSubject must list what Match charges, in any case of method.
		if api != Wildcard && api != "" {
			listed := s.ForSubject(subject, api, method+" "+resource)
			for _, e := range []*Effective{got.API, got.Route} {
				if e != nil && !slices.Contains(listed, e) {
					t.Fatalf("ForSubject(%q, %q, %q) = %v, missing %q", subject, api, method+" "+resource, listed, e.ID)
				}
			}
		}
	})
}

// BenchmarkNewSnapshot measures a reload: what an authorizer pays when the
// rules version moves.
func BenchmarkNewSnapshot(b *testing.B) {
	rs := make([]Rule, 0, 10_000)
	for i := range 10_000 {
		route := Wildcard
		if i%10 != 0 {
			route = fmt.Sprintf("GET /v1/res%d/{id}", i/20)
		}
		rs = append(rs, rule(fmt.Sprintf("r%06d", i), fmt.Sprintf("api%05d", i%10), route, fmt.Sprintf("subject-%d", i)))
	}
	b.ReportAllocs()
	for b.Loop() {
		NewSnapshot(rs, nil, SnapshotOptions{})
	}
}

// TestSnapshotDimensions: rules of a named dimension match only through
// Dimension(name), never the default dimension's Match; each dimension
// has its own scopes.
func TestSnapshotDimensions(t *testing.T) {
	t.Parallel()
	lim := int64(5)
	mk := func(id, dim string) Rule {
		return Rule{ID: id, API: "a", Route: "*", Subject: "*", Limit: &lim, Period: Period(time.Minute), Dimension: dim}
	}
	s := NewSnapshot([]Rule{mk("r1", ""), mk("r2", "ip"), mk("r3", "default"), mk("r4", "IP")}, nil, SnapshotOptions{})
	if got := s.Match("a", "GET", "/", "x").API; got == nil || got.ID != "r1" {
		t.Errorf("default Match = %v, want r1", got)
	}
	if got := s.Dimension("ip").Match("a", "GET", "/", "192.0.2.1").API; got == nil || got.ID != "r2" {
		t.Errorf("Dimension(ip) Match = %v, want r2", got)
	}
	if got := s.Dimension("tenant").Match("a", "GET", "/", "x").API; got != nil {
		t.Errorf("Dimension(tenant) Match = %v, want none", got)
	}
	if s.Dimension("default") != s {
		t.Error(`Dimension("default") is not the snapshot itself`)
	}
	// r3 ("default") contests r1's scope; r4 ("IP") r2's.
	if sk := s.Skipped(); len(sk) != 2 {
		t.Errorf("Skipped = %+v, want r3 and r4", sk)
	}
	if s.Len() != 2 {
		t.Errorf("Len = %d, want 2", s.Len())
	}
}

// TestMatchExpiry: a rule past its ExpiresAt is passed over at match time,
// so the wildcard rule under it applies, with no new snapshot.
func TestMatchExpiry(t *testing.T) {
	friday := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	rs := []Rule{
		{ID: "1", API: "api", Route: "*", Subject: "*", Limit: new(int64(100)), Period: Period(time.Minute)},
		{ID: "2", API: "api", Route: "*", Subject: "customer-x", Limit: new(int64(500)), Period: Period(time.Minute), ExpiresAt: &friday},
	}
	s := NewSnapshot(rs, nil, SnapshotOptions{})
	for _, tc := range []struct {
		now  time.Time
		want string
	}{
		{friday.Add(-time.Second), "2"},
		{friday, "1"},
		{friday.Add(time.Hour), "1"},
	} {
		m := s.MatchAt("api", "GET", "/x", "customer-x", tc.now)
		if m.API == nil || m.API.ID != tc.want {
			t.Errorf("MatchAt(customer-x, %v).API = %+v, want rule %s", tc.now, m.API, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { s.MatchAt("api", "GET", "/x", "customer-x", friday) }); n != 0 {
		t.Errorf("MatchAt allocates %v times, want 0", n)
	}
}
