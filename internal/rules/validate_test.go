package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// validRule is a valid inline rule that each validation case breaks in one
// or more ways.
func validRule() Rule {
	return Rule{
		API: "a1b2c3d4e5", Route: "GET /pets/{id}", Subject: "key-1",
		Limit: new(int64(100)), Period: Period(time.Minute), Burst: new(int64(200)), Cost: new(int64(2)),
		FailureMode: FailClosed, Mode: Shadow, Description: "pets per key",
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	in := Rule{
		API: "  abc ", Route: " get   /pets/{id}/ ", Subject: "\tkey ", Plan: " gold ",
		FailureMode: " Closed", Mode: "SHADOW ", Description: " hi\n",
	}
	in.Normalize()
	want := Rule{
		API: "abc", Route: "GET /pets/{id}", Subject: "key", Plan: "gold",
		FailureMode: FailClosed, Mode: Shadow, Enabled: new(true), Description: "hi", Kind: Rate,
	}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("Normalize() mismatch (-want +got):\n%s", diff)
	}

	defaults := Rule{Route: "*", Enabled: new(false)}
	defaults.Normalize()
	want = Rule{Route: "*", FailureMode: FailOpen, Mode: Enforce, Enabled: new(false), Kind: Rate}
	if diff := cmp.Diff(want, defaults); diff != "" {
		t.Errorf("Normalize() of defaults mismatch (-want +got):\n%s", diff)
	}

	root := Rule{Route: "post /"}
	root.Normalize()
	if root.Route != "POST /" {
		t.Errorf("Normalize() route = %q, want %q", root.Route, "POST /")
	}

	p := Plan{Name: " gold ", Description: " x "}
	p.Normalize()
	if diff := cmp.Diff(Plan{Name: "gold", Description: "x", Kind: Rate}, p); diff != "" {
		t.Errorf("Plan.Normalize() mismatch (-want +got):\n%s", diff)
	}
}

func TestValidateValid(t *testing.T) {
	t.Parallel()
	tests := map[string]func(*Rule){
		"as is":              func(*Rule) {},
		"wildcards":          func(r *Rule) { r.API, r.Route, r.Subject = "*", "*", "*" },
		"root resource":      func(r *Rule) { r.Route = "ANY /" },
		"greedy last":        func(r *Rule) { r.Route = "ANY /files/{proxy+}" },
		"literal characters": func(r *Rule) { r.Route = "OPTIONS /v1.2/a_b-c" },
		"every method":       func(r *Rule) { r.Route = "PATCH /x" },
		"head":               func(r *Rule) { r.Route = "HEAD /x" },
		"defaults empty":     func(r *Rule) { r.FailureMode, r.Mode, r.Burst, r.Cost = "", "", nil, nil },
		"block":              func(r *Rule) { r.Limit, r.Burst, r.Cost = new(int64(0)), nil, nil },
		"block with burst 0": func(r *Rule) { r.Limit, r.Burst = new(int64(0)), new(int64(0)) },
		"block with a cost":  func(r *Rule) { r.Limit, r.Burst, r.Cost = new(int64(0)), nil, new(int64(5)) },
		"plan":               func(r *Rule) { r.Plan, r.Limit, r.Period, r.Burst = "gold-2_x", nil, 0, nil },
		"plan with cost":     func(r *Rule) { r.Plan, r.Limit, r.Period, r.Burst, r.Cost = "g", nil, 0, nil, new(int64(MaxCost)) },
		"max numbers": func(r *Rule) {
			r.Limit, r.Burst, r.Cost = new(int64(MaxLimit)), new(int64(MaxBurst)), new(int64(MaxCost))
		},
		"cost equals burst": func(r *Rule) { r.Limit, r.Burst, r.Cost = new(int64(1)), nil, new(int64(1)) },
		"horizon at the cap": func(r *Rule) {
			r.Limit, r.Period, r.Burst, r.Cost = new(int64(1)), Period(Year), new(int64(10)), new(int64(10))
		},
		"horizon just under": func(r *Rule) {
			r.Limit, r.Period, r.Burst, r.Cost = new(int64(7)), Period(30*Day), new(int64(851)), nil
		},
		"period bounds": func(r *Rule) { r.Period = MinPeriod },
		"period max":    func(r *Rule) { r.Period = MaxPeriod },
		"utf-8 subject": func(r *Rule) { r.Subject = "usér:日本" },
		"long strings": func(r *Rule) {
			r.API, r.Subject, r.Description = strings.Repeat("a", MaxAPILen), strings.Repeat("s", MaxSubjectLen), strings.Repeat("d", MaxDescriptionLen)
		},
		"description with newline":  func(r *Rule) { r.Description = "line 1\nline 2\ttab" },
		"subject with inner spaces": func(r *Rule) { r.Subject = "a b" },
	}
	for name, mutate := range tests {
		r := validRule()
		mutate(&r)
		if err := r.Validate(); err != nil {
			t.Errorf("%s: Validate(%+v) = %v, want nil", name, r, err)
		}
	}
}

func TestValidateErrors(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return strings.Repeat("x", n) }
	type fe = FieldError
	tests := []struct {
		name   string
		mutate func(*Rule)
		want   []FieldError
	}{
		{"empty rule", func(r *Rule) { *r = Rule{} }, []fe{
			{"api", `is required: an API Gateway REST API id or "*"`},
			{"route", `is required: "*" or "METHOD /resource", such as "GET /pets/{id}"`},
			{"subject", `is required: an exact subject or "*"`},
			{"limit", "is required unless plan is set"},
			{"period", "is required unless plan is set"},
		}},
		{"every field", func(r *Rule) {
			*r = Rule{
				API: "a b", Route: "FETCH /x", Subject: "a\x00b", Limit: new(int64(-1)), Period: Period(time.Millisecond),
				Burst: new(int64(0)), Cost: new(int64(0)), FailureMode: "maybe", Mode: "loud", Description: "\xff",
			}
		}, []fe{
			{"api", `must be "*" or an API id of letters, digits, '-' and '_'`},
			{"route", "method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, ANY"},
			{"subject", "must not contain control characters"},
			{"limit", "must be between 0 (block) and 1000000000"},
			{"period", "must be a whole number of seconds"},
			{"burst", "must be between 1 and 1000000000"},
			{"cost", "must be between 1 and 1000000"},
			{"failure_mode", `must be "open" or "closed"`},
			{"mode", `must be "enforce" or "shadow"`},
			{"description", "must be valid UTF-8"},
		}},
		{"api too long", func(r *Rule) { r.API = long(MaxAPILen + 1) }, []fe{{"api", "must be at most 128 characters"}}},
		{"api unicode", func(r *Rule) { r.API = "é" }, []fe{{"api", `must be "*" or an API id of letters, digits, '-' and '_'`}}},
		{"api wildcard inside", func(r *Rule) { r.API = "a*" }, []fe{{"api", `must be "*" or an API id of letters, digits, '-' and '_'`}}},
		{"route no path", func(r *Rule) { r.Route = "GET" }, []fe{{"route", `must be "*" or "METHOD /resource", such as "GET /pets/{id}"`}}},
		{"route lower method", func(r *Rule) { r.Route = "get /x" }, []fe{{"route", "method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, ANY"}}},
		{"route two spaces", func(r *Rule) { r.Route = "GET  /x" }, []fe{{"route", "path must start with '/'"}}},
		{"route relative", func(r *Rule) { r.Route = "GET x" }, []fe{{"route", "path must start with '/'"}}},
		{"route trailing slash", func(r *Rule) { r.Route = "GET /x/" }, []fe{{"route", "path must not end with '/'"}}},
		{"route empty part", func(r *Rule) { r.Route = "GET /x//y" }, []fe{{"route", "path must not contain an empty part ('//')"}}},
		{"route dot dot", func(r *Rule) { r.Route = "GET /x/../y" }, []fe{{"route", "path must not contain '.' or '..' parts"}}},
		{"route query", func(r *Rule) { r.Route = "GET /x?y=1" }, []fe{{"route", `path part "x?y=1" may hold only letters, digits, '.', '-', '_' or be a {parameter}`}}},
		{"route space in path", func(r *Rule) { r.Route = "GET /x y" }, []fe{{"route", `path part "x y" may hold only letters, digits, '.', '-', '_' or be a {parameter}`}}},
		{"route unicode", func(r *Rule) { r.Route = "GET /é" }, []fe{{"route", `path part "\u00e9" may hold only letters, digits, '.', '-', '_' or be a {parameter}`}}},
		{"route partial param", func(r *Rule) { r.Route = "GET /file.{ext}" }, []fe{{"route", `path parameter "file.{ext}" must be "{name}" or "{name+}" with a name of letters, digits, '.', '-' and '_'`}}},
		{"route empty param", func(r *Rule) { r.Route = "GET /{}" }, []fe{{"route", `path parameter "{}" must be "{name}" or "{name+}" with a name of letters, digits, '.', '-' and '_'`}}},
		{"route plus only", func(r *Rule) { r.Route = "GET /{+}" }, []fe{{"route", `path parameter "{+}" must be "{name}" or "{name+}" with a name of letters, digits, '.', '-' and '_'`}}},
		{"route unclosed", func(r *Rule) { r.Route = "GET /{id" }, []fe{{"route", `path parameter "{id" must be "{name}" or "{name+}" with a name of letters, digits, '.', '-' and '_'`}}},
		{"route greedy not last", func(r *Rule) { r.Route = "ANY /{proxy+}/x" }, []fe{{"route", `greedy path parameter "{proxy+}" must be the last part`}}},
		{"route duplicate param", func(r *Rule) { r.Route = "GET /{id}/x/{id}" }, []fe{{"route", `path parameter "id" appears twice`}}},
		{"route too long", func(r *Rule) { r.Route = "GET /" + long(MaxRouteLen) }, []fe{{"route", "must be at most 1024 bytes"}}},
		{"route sql", func(r *Rule) { r.Route = "GET /x'; DROP TABLE rules;--" }, []fe{{"route", `path part "x'; DROP TABLE rules;--" may hold only letters, digits, '.', '-', '_' or be a {parameter}`}}},
		{"subject too long", func(r *Rule) { r.Subject = long(MaxSubjectLen + 1) }, []fe{{"subject", "must be at most 256 bytes"}}},
		{"subject invalid utf-8", func(r *Rule) { r.Subject = "a\xc3" }, []fe{{"subject", "must be valid UTF-8"}}},
		{"subject newline", func(r *Rule) { r.Subject = "a\nb" }, []fe{{"subject", "must not contain control characters"}}},
		{"subject C1 control", func(r *Rule) { r.Subject = "a\u0085b" }, []fe{{"subject", "must not contain control characters"}}},
		{"subject padded", func(r *Rule) { r.Subject = " a" }, []fe{{"subject", "must not start or end with white space"}}},
		{"plan and inline", func(r *Rule) { r.Plan = "gold" }, []fe{
			{"limit", "must be empty when plan is set"},
			{"period", "must be empty when plan is set"},
			{"burst", "must be empty when plan is set: the plan's burst applies"},
		}},
		{"plan bad name", func(r *Rule) { r.Plan, r.Limit, r.Period, r.Burst = "Gold", nil, 0, nil }, []fe{{"plan", "must start with a lower-case letter and hold only a-z, 0-9, '-' and '_'"}}},
		{"plan digit first", func(r *Rule) { r.Plan, r.Limit, r.Period, r.Burst = "1gold", nil, 0, nil }, []fe{{"plan", "must start with a lower-case letter and hold only a-z, 0-9, '-' and '_'"}}},
		{"plan too long", func(r *Rule) { r.Plan, r.Limit, r.Period, r.Burst = "g"+long(MaxPlanNameLen), nil, 0, nil }, []fe{{"plan", "must be at most 64 characters"}}},
		{"no limit", func(r *Rule) { r.Limit = nil }, []fe{{"limit", "is required unless plan is set"}}},
		{"no period", func(r *Rule) { r.Period = 0 }, []fe{{"period", "is required unless plan is set"}}},
		{"limit too big", func(r *Rule) { r.Limit, r.Burst = new(int64(MaxLimit+1)), nil }, []fe{{"limit", "must be between 0 (block) and 1000000000"}}},
		{"period negative", func(r *Rule) { r.Period = Period(-time.Second) }, []fe{{"period", "must not be negative"}}},
		{"period too long", func(r *Rule) { r.Period = MaxPeriod + Period(time.Second) }, []fe{{"period", "is longer than 1 year"}}},
		{"period fraction", func(r *Rule) { r.Period = Period(1500 * time.Millisecond) }, []fe{{"period", "must be a whole number of seconds"}}},
		{"burst below limit", func(r *Rule) { r.Burst = new(int64(99)) }, []fe{{"burst", "must be at least limit (100)"}}},
		{"burst too big", func(r *Rule) { r.Burst = new(int64(MaxBurst + 1)) }, []fe{{"burst", "must be between 1 and 1000000000"}}},
		{"burst with block", func(r *Rule) { r.Limit, r.Cost = new(int64(0)), nil }, []fe{{"burst", "must be 0 or empty when limit is 0: the rule blocks"}}},
		{"cost over burst", func(r *Rule) { r.Cost = new(int64(201)) }, []fe{{"cost", "must be at most the burst (200), or no request could pass"}}},
		{"cost over limit as burst", func(r *Rule) { r.Burst, r.Cost = nil, new(int64(101)) }, []fe{{"cost", "must be at most the burst (100), or no request could pass"}}},
		{"cost too big", func(r *Rule) { r.Limit, r.Burst, r.Cost = new(int64(MaxLimit)), nil, new(int64(MaxCost+1)) }, []fe{{"cost", "must be between 1 and 1000000"}}},
		{"cost negative", func(r *Rule) { r.Cost = new(int64(-1)) }, []fe{{"cost", "must be between 1 and 1000000"}}},
		// The rule: accepted before MaxHorizon, then every SET of its
		// bucket failed (PX 1.26e+17) and the subject failed open.
		{"refill horizon beyond the cap", func(r *Rule) {
			r.Limit, r.Period, r.Burst, r.Cost = new(int64(1)), Period(Year), new(int64(10_000_000)), new(int64(1_000_000))
		}, []fe{
			{"burst", "must be at most 10 at 1 per 1y: an empty bucket refills in burst × period ÷ limit, at most 10y, and here in about 10000000 years"},
			{"cost", "must be at most 10 at 1 per 1y: one request's tokens come back in cost × period ÷ limit, at most 10y, and here in about 1000000 years"},
		}},
		{"refill horizon one over", func(r *Rule) {
			r.Limit, r.Period, r.Burst, r.Cost = new(int64(7)), Period(30*Day), new(int64(852)), nil
		}, []fe{{"burst", "must be at most 851 at 7 per 30d: an empty bucket refills in burst × period ÷ limit, at most 10y, and here in about 10.0 years"}}},
		{"failure mode case", func(r *Rule) { r.FailureMode = "Open" }, []fe{{"failure_mode", `must be "open" or "closed"`}}},
		{"mode", func(r *Rule) { r.Mode = "dry-run" }, []fe{{"mode", `must be "enforce" or "shadow"`}}},
		{"description too long", func(r *Rule) { r.Description = long(MaxDescriptionLen + 1) }, []fe{{"description", "must be at most 1024 bytes"}}},
		{"description NUL", func(r *Rule) { r.Description = "a\x00" }, []fe{{"description", "must not contain NUL characters"}}},
	}
	for _, tt := range tests {
		r := validRule()
		tt.mutate(&r)
		wantFields(t, tt.name+": Validate()", r.Validate(), tt.want)
	}
}

func TestPlanValidate(t *testing.T) {
	t.Parallel()
	valid := Plan{Name: "gold", Limit: 1000, Period: Period(time.Minute), Burst: new(int64(2000))}
	if err := valid.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", valid, err)
	}
	blocked := Plan{Name: "banned", Period: Period(time.Second)}
	if err := blocked.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", blocked, err)
	}
	type fe = FieldError
	tests := []struct {
		p    Plan
		want []FieldError
	}{
		{Plan{}, []fe{{"name", "is required"}, {"period", "is required"}}},
		{Plan{Name: "Gold", Limit: -1, Period: Period(2 * Year), Burst: new(int64(-1)), Description: "\x00"}, []fe{
			{"name", "must start with a lower-case letter and hold only a-z, 0-9, '-' and '_'"},
			{"limit", "must be between 0 (block) and 1000000000"},
			{"period", "is longer than 1 year"},
			{"burst", "must be between 1 and 1000000000"},
			{"description", "must not contain NUL characters"},
		}},
		{Plan{Name: "g", Limit: 10, Period: Period(time.Second), Burst: new(int64(9))}, []fe{{"burst", "must be at least limit (10)"}}},
		{Plan{Name: "g", Limit: 0, Period: Period(time.Second), Burst: new(int64(9))}, []fe{{"burst", "must be 0 or empty when limit is 0: the rule blocks"}}},
		{Plan{Name: "g-" + strings.Repeat("x", MaxPlanNameLen), Limit: 1, Period: Period(time.Second)}, []fe{{"name", "must be at most 64 characters"}}},
		{Plan{Name: "g", Limit: 1, Period: Period(Year), Burst: new(int64(11))}, []fe{{"burst", "must be at most 10 at 1 per 1y: an empty bucket refills in burst × period ÷ limit, at most 10y, and here in about 11.0 years"}}},
	}
	for _, tt := range tests {
		wantFields(t, fmt.Sprintf("Validate(%+v)", tt.p), tt.p.Validate(), tt.want)
	}
}

// TestValidateWithPlan checks a rule against the plan it names: what
// Validate cannot see on its own.
func TestValidateWithPlan(t *testing.T) {
	t.Parallel()
	planRule := func(cost int64) Rule {
		r := validRule()
		r.Plan, r.Limit, r.Period, r.Burst, r.Cost = "gold", nil, 0, nil, new(cost)
		return r
	}
	gold := Plan{Name: "gold", Limit: 10, Period: Period(time.Minute), Burst: new(int64(50))}
	yearly := Plan{Name: "gold", Limit: 1, Period: Period(Year), Burst: new(int64(10))}
	type fe = FieldError
	tests := []struct {
		name string
		r    Rule
		p    Plan
		want []FieldError // nil: valid
	}{
		{"cost within burst", planRule(50), gold, nil},
		{"default cost", func() Rule { r := planRule(1); r.Cost = nil; return r }(), gold, nil},
		{"cost over burst", planRule(51), gold, []fe{{"cost", `must be at most the burst (50) of plan "gold", or no request could pass`}}},
		{"cost over limit as burst", planRule(11), Plan{Name: "gold", Limit: 10, Period: Period(time.Minute)}, []fe{{"cost", `must be at most the burst (10) of plan "gold", or no request could pass`}}},
		{"blocking plan takes any cost", planRule(MaxCost), Plan{Name: "gold", Period: Period(time.Second)}, nil},
		{"cost at the horizon", planRule(10), yearly, nil},
		{"plan out of bounds", planRule(1), Plan{Name: "gold", Limit: 1, Period: Period(Year), Burst: new(int64(10_000_000))}, []fe{
			{"plan", `the burst of plan "gold" must be at most 10 at 1 per 1y: an empty bucket refills in burst × period ÷ limit, at most 10y, and here in about 10000000 years`},
		}},
		{"plan invalid otherwise is not this check's", planRule(1), Plan{Name: "gold", Limit: 3000, Period: Period(time.Minute), Burst: new(int64(2000))}, nil},
	}
	for _, tt := range tests {
		wantFields(t, tt.name+": ValidateWithPlan()", tt.r.ValidateWithPlan(tt.p), tt.want)
	}
}

// TestCheckPlanRules checks a plan's new numbers against every rule naming
// it, disabled ones included: the plan write that would break one is a
// conflict.
func TestCheckPlanRules(t *testing.T) {
	t.Parallel()
	named := func(id, plan string, cost int64, enabled bool) Rule {
		return Rule{ID: id, Plan: plan, Cost: new(cost), Enabled: new(enabled)}
	}
	rs := []Rule{
		named("r1", "gold", 5, true),
		named("r2", "gold", 20, false),
		named("r3", "silver", 1000, true), // another plan: not checked
		named("r4", "gold", 30, true),
	}
	p := Plan{Name: "gold", Limit: 10, Period: Period(time.Minute), Burst: new(int64(25))}
	err := CheckPlanRules(p, rs)
	var pc *PlanConflictError
	if !errors.As(err, &pc) || !errors.Is(err, ErrConflict) {
		t.Fatalf("CheckPlanRules() = %v, want a *PlanConflictError wrapping ErrConflict", err)
	}
	want := &PlanConflictError{Plan: "gold", Rules: []BrokenRule{
		{ID: "r4", Reason: `cost: must be at most the burst (25) of plan "gold", or no request could pass`},
	}}
	if diff := cmp.Diff(want, pc); diff != "" {
		t.Errorf("CheckPlanRules() mismatch (-want +got):\n%s", diff)
	}
	if got, want := err.Error(), `plan "gold" would break 1 rule(s) that name it; rule r4: cost: must be at most the burst (25) of plan "gold", or no request could pass`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	p.Burst = new(int64(19)) // now the disabled r2 breaks too
	if err := CheckPlanRules(p, rs); !errors.As(err, &pc) || len(pc.Rules) != 2 || pc.Rules[0].ID != "r2" {
		t.Errorf("CheckPlanRules(burst 19) = %v, want r2 and r4", err)
	}
	p.Burst = new(int64(30))
	if err := CheckPlanRules(p, rs); err != nil {
		t.Errorf("CheckPlanRules(burst 30) = %v, want nil", err)
	}

	many := make([]Rule, 5)
	for i := range many {
		many[i] = named("m"+strconv.Itoa(i), "gold", 100, true)
	}
	if err := CheckPlanRules(p, many); err == nil || !strings.HasSuffix(err.Error(), "; and 2 more") {
		t.Errorf("CheckPlanRules(5 broken) = %v, want the first 3 and \"and 2 more\"", err)
	}
}

// TestWithinHorizon pins the exact boundary, including products that
// overflow 64 bits.
func TestWithinHorizon(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		tokens, limit int64
		period        time.Duration
		want          bool
	}{
		{10, 1, Year, true},
		{11, 1, Year, false},
		{MaxBurst, MaxLimit, Year, true},
		{MaxBurst, MaxLimit / 10, Year, true},
		{MaxBurst, MaxLimit/10 - 1, Year, false},
		{MaxBurst, 1, Year, false}, // 1e9 × 3.15e16 ns overflows int64
		{MaxBurst, 1, time.Second, false},
		{315_360_000, 1, time.Second, true}, // exactly 10 years of seconds
		{315_360_001, 1, time.Second, false},
		{1 << 62, 0, Year, true}, // blocked: no horizon
		{0, 1, Year, true},
		{-1, 1, Year, true},
	} {
		if got := WithinHorizon(tt.tokens, tt.limit, tt.period); got != tt.want {
			t.Errorf("WithinHorizon(%d, %d, %v) = %v, want %v", tt.tokens, tt.limit, tt.period, got, tt.want)
		}
	}
}

// TestValidateNilError pins that a valid rule gives an untyped nil, so that
// err != nil means a problem.
func TestValidateNilError(t *testing.T) {
	t.Parallel()
	var err error = validRule().Validate()
	if err != nil {
		t.Errorf("Validate() = %#v, want nil", err)
	}
}

func TestRuleJSON(t *testing.T) {
	t.Parallel()
	in := `{"api":"abc","route":"get /pets/{id}","subject":"*","limit":10,"period":"3600s","burst":20}`
	var r Rule
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatalf("Unmarshal(%s) error = %v", in, err)
	}
	r.Normalize()
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v, want nil", r, err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Rule
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal(%s) error = %v", b, err)
	}
	if diff := cmp.Diff(r, back); diff != "" {
		t.Errorf("JSON round trip mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(b), `"period":"1h"`) {
		t.Errorf("Marshal() = %s, want period \"1h\"", b)
	}
}

// FuzzValidate decodes arbitrary JSON into a Rule and a Plan, normalises and
// validates them: nothing may panic, a ValidationError always names known
// fields, and a valid rule stays valid after a JSON round trip.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		`{"api":"abc","route":"GET /pets/{id}","subject":"*","limit":10,"period":"1m"}`,
		`{"api":"*","route":"*","subject":"k","plan":"gold","cost":3}`,
		`{"api":"a","route":"ANY /{proxy+}","subject":"u","limit":0,"period":"1d","mode":"shadow","failure_mode":"closed"}`,
		`{"api":"a","route":"get /x/","subject":" u ","limit":5,"period":"1h30m","burst":10,"cost":10}`,
		`{"name":"gold","limit":1000,"period":"1m","burst":2000}`,
		`{"limit":-1,"period":0,"burst":1e30}`,
		`{"route":"GET /{a}/{a}","subject":"\u0000","description":"\ud800"}`,
		`[]`, `null`, `{"enabled":false}`,
		`{"api":"a","route":"*","subject":"*","limit":1,"period":"1y","burst":10000000,"cost":1000000}`,
		`{"name":"gold","limit":1,"period":"1y","burst":10,"api":"a","route":"*","subject":"*","plan":"gold","cost":10}`,
	} {
		f.Add([]byte(s))
	}
	known := map[string]bool{
		"api": true, "route": true, "subject": true, "plan": true, "limit": true, "period": true,
		"burst": true, "cost": true, "failure_mode": true, "mode": true, "description": true, "name": true,
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Rule
		if json.Unmarshal(data, &r) == nil {
			r.Normalize()
			err := r.Validate()
			checkFields(t, err, known)
			if err == nil {
				b, merr := json.Marshal(r)
				if merr != nil {
					t.Fatalf("Marshal(%+v) error = %v", r, merr)
				}
				var back Rule
				if uerr := json.Unmarshal(b, &back); uerr != nil {
					t.Fatalf("Unmarshal(%s) error = %v, want nil", b, uerr)
				}
				if verr := back.Validate(); verr != nil {
					t.Fatalf("Validate(round trip of %s) = %v, want nil", b, verr)
				}
				checkHorizon(t, r)
				NewSnapshot([]Rule{back}, nil, SnapshotOptions{})
			}
		}
		var p Plan
		if json.Unmarshal(data, &p) == nil {
			p.Normalize()
			err := p.Validate()
			checkFields(t, err, known)
			if err == nil && !WithinHorizon(planBurst(p), p.Limit, p.Period.Duration()) {
				t.Fatalf("Validate(%+v) = nil, but its refill horizon is above MaxHorizon", p)
			}
			if err == nil && r.Plan == p.Name {
				// A rule that fits its plan is within the horizon too.
				if r.ValidateWithPlan(p) == nil && r.Limit == nil {
					cost := int64(1)
					if r.Cost != nil {
						cost = *r.Cost
					}
					if !WithinHorizon(cost, p.Limit, p.Period.Duration()) || (p.Limit > 0 && cost > planBurst(p)) {
						t.Fatalf("ValidateWithPlan(%+v, %+v) = nil, but the cost does not fit", r, p)
					}
				}
			}
		}
	})
}

func planBurst(p Plan) int64 {
	if p.Burst != nil {
		return *p.Burst
	}
	return p.Limit
}

// checkHorizon fails unless a valid inline rule's burst and cost refill
// within MaxHorizon: what Validate promises the limiter.
func checkHorizon(t *testing.T, r Rule) {
	t.Helper()
	if r.Plan != "" {
		return
	}
	burst, cost := *r.Limit, int64(1)
	if r.Burst != nil {
		burst = *r.Burst
	}
	if r.Cost != nil {
		cost = *r.Cost
	}
	if !WithinHorizon(burst, *r.Limit, r.Period.Duration()) || !WithinHorizon(cost, *r.Limit, r.Period.Duration()) {
		t.Fatalf("Validate(%+v) = nil, but its refill horizon is above MaxHorizon", r)
	}
}

func checkFields(t *testing.T, err error, known map[string]bool) {
	t.Helper()
	if err == nil {
		return
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) == 0 {
		t.Fatalf("Validate() = %v, want a *ValidationError with fields", err)
	}
	_ = ve.Error()
	for _, f := range ve.Fields {
		if !known[f.Field] || f.Reason == "" {
			t.Fatalf("Validate() field error %+v, want a known field and a reason", f)
		}
	}
}
