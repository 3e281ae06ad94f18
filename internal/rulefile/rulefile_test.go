package rulefile

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/rules"
)

const good = `version: 1
set: platform
plans:
  - name: gold
    limit: 1000
    period: 1m
    burst: 2000
rules:
  - api: shop
    route: "*"
    subject: "*"
    plan: gold
  - api: shop
    route: get /orders/
    subject: customer-x
    limit: 500
    period: 1m
    expires_at: 2026-12-31T23:59:59Z
    description: Black Friday override
`

func TestParse(t *testing.T) {
	f, err := Parse("limits.yaml", []byte(good))
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	if len(f.Plans) != 1 || len(f.Rules) != 2 || f.Set != "platform" {
		t.Fatalf("Parse() = %d plans, %d rules, set %q; want 1, 2, platform", len(f.Plans), len(f.Rules), f.Set)
	}
	r := f.Rules[1]
	if r.Route != "GET /orders" || r.Set != "platform" || r.ExpiresAt == nil || !r.ExpiresAt.Equal(time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)) {
		t.Errorf("Parse() rule = route %q, set %q, expires %v; want it normalised, in set platform, expiring", r.Route, r.Set, r.ExpiresAt)
	}
	// The same file as JSON.
	js := `{"version": 1, "set": "platform", "rules": [{"api": "shop", "route": "*", "subject": "*", "limit": 5, "period": "1s"}]}`
	if _, err := Parse("limits.json", []byte(js)); err != nil {
		t.Errorf("Parse(JSON) error = %v", err)
	}
}

// TestParseProblems: every problem is named by file, line and field.
func TestParseProblems(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"fields", `version: 1
set: platform
rules:
  - api: shop
    route: "*"
    subject: "*"
    limt: 5
    period: 1m
  - api: shop
    route: GET /x
    subject: "*"
    limit: -1
    period: 1m
    id: 5f0c
`, []string{
			"limits.yaml:7: rules[0].limt: unknown field; did you mean \"limit\"?",
			"limits.yaml:12: rules[1].limit: must be",
			"limits.yaml:14: rules[1].id: is assigned by the server",
		}},
		{"types", `version: 1
set: platform
rules:
  - api: shop
    route: "*"
    subject: "*"
    limit: many
    period: 1m
`, []string{"limits.yaml:7: rules[0].limit: must be a whole number, not a string"}},
		{"period", `version: 1
set: platform
rules:
  - {api: shop, route: "*", subject: "*", limit: 1, period: fortnight}
`, []string{"limits.yaml:4: rules[0].period:"}},
		{"header", `version: 2
plans: {}
`, []string{"limits.yaml:1: version: must be 1", "limits.yaml:2: plans: must be a list", "limits.yaml:1: set: is required"}},
		{"duplicates", `version: 1
set: platform
rules:
  - {api: shop, route: "*", subject: "*", limit: 1, period: 1s}
  - {api: shop, route: "*", subject: "*", limit: 2, period: 1s}
`, []string{"limits.yaml:5: rules[1]: the scope (api, route, subject, kind, dimension) of the rule at line 4"}},
		{"syntax", "version: 1\nset: [\n", []string{"limits.yaml:2: did not find expected node content"}},
		{"plan fit", `version: 1
set: platform
plans:
  - {name: small, limit: 1, period: 1s}
rules:
  - {api: shop, route: "*", subject: "*", plan: small, cost: 5}
`, []string{"limits.yaml:6: rules[0].cost:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("limits.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("Parse() = nil error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse() error =\n%v\nwant a line with %q", err, w)
				}
			}
		})
	}
}

func stored(f *File) rules.Set {
	var s rules.Set
	for i, p := range f.Plans {
		p.Version = int64(i + 1)
		s.Plans = append(s.Plans, p)
	}
	for i, r := range f.Rules {
		r.ID = string(rune('a' + i))
		r.Version = 3
		s.Rules = append(s.Rules, r)
	}
	return s
}

// TestDiff: an unchanged file plans nothing; a change plans field-by-field
// updates at the stored version, creates and deletes, and never touches a
// rule outside the set.
func TestDiff(t *testing.T) {
	f, err := Parse("limits.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	have := stored(f)
	override := rules.Rule{ID: "z", API: "shop", Route: "*", Subject: "vip", Limit: new(int64(1)), Period: rules.Period(time.Second), Version: 1}
	have.Rules = append(have.Rules, override)
	if b, cs, err := Diff(f, have); err != nil || len(b.Ops) != 0 || len(cs) != 0 {
		t.Fatalf("Diff(unchanged) = %d ops, %v, %v; want none", len(b.Ops), cs, err)
	}

	changed := strings.Replace(good, "limit: 500", "limit: 600", 1)
	changed = strings.Replace(changed, "    plan: gold\n", "    plan: gold\n  - {api: shop, route: POST /orders, subject: \"*\", limit: 1, period: 1s}\n", 1)
	changed = strings.Replace(changed, "    expires_at: 2026-12-31T23:59:59Z\n", "", 1)
	f2, err := Parse("limits.yaml", []byte(changed))
	if err != nil {
		t.Fatal(err)
	}
	b, cs, err := Diff(f2, have)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.String())
	}
	want := []string{
		"~ update rule api \"shop\" route \"GET /orders\" subject \"customer-x\" (b)\n    limit: 500 -> 600\n    expires_at: \"2026-12-31T23:59:59Z\" -> null",
		"+ create rule api \"shop\" route \"POST /orders\" subject \"*\"",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Diff() changes (-want +got):\n%s", diff)
	}
	if len(b.Ops) != 2 || b.Ops[0].IfVersion != 3 || b.Ops[0].Rule.ID != "b" || b.Set != "platform" {
		t.Errorf("Diff() batch = %+v, want an update of b at version 3, then a create", b)
	}

	// The file deletes everything: the override stays.
	empty, err := Parse("limits.yaml", []byte("version: 1\nset: platform\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err = Diff(empty, have)
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, op := range b.Ops {
		if op.Rule != nil {
			deleted = append(deleted, op.Rule.ID)
		} else {
			deleted = append(deleted, op.Plan.Name)
		}
	}
	if diff := cmp.Diff([]string{"a", "b", "gold"}, deleted); diff != "" {
		t.Errorf("Diff(empty) deletes (-want +got):\n%s", diff)
	}

	// A file rule on the override's scope is a problem at its line.
	taken := good + "  - {api: shop, route: \"*\", subject: vip, limit: 2, period: 1s}\n"
	f3, err := Parse("limits.yaml", []byte(taken))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Diff(f3, have); err == nil || !strings.Contains(err.Error(), "limits.yaml:20: rules[2]: rule z holds this scope and belongs to no set") {
		t.Errorf("Diff(scope held outside the set) error = %v", err)
	}
}

// TestExportRoundTrip: an export parses back to no change.
func TestExportRoundTrip(t *testing.T) {
	f, err := Parse("limits.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	have := stored(f)
	have.Rules = append(have.Rules, rules.Rule{ID: "q", API: "shop", Route: "*", Subject: "*", Kind: rules.Quota, Limit: new(int64(100)), Period: rules.Month,
		Anchor: "2026-01-31T09:30:00Z", Durable: true, FailureMode: rules.FailClosed, Mode: rules.Shadow, Enabled: new(false), Set: "platform", Version: 1})
	out, err := Marshal(Export("platform", have))
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("export.yaml", out)
	if err != nil {
		t.Fatalf("Parse(export) error = %v\n%s", err, out)
	}
	if b, cs, err := Diff(back, have); err != nil || len(b.Ops) != 0 {
		t.Errorf("Diff(export) = %v, %v; want no change\n%s", cs, err, out)
	}
	for _, w := range []string{"route: '*'", "expires_at: \"2026-12-31T23:59:59Z\"", "period: 1mo"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("export lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(string(out), "mode: enforce") || strings.Contains(string(out), "id:") {
		t.Errorf("export holds defaults or server fields:\n%s", out)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("version: 1\nset: x\nrules: [{api: a}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if file, err := Parse("f", b); err == nil {
			if _, err := Marshal(file); err != nil {
				t.Errorf("Marshal(Parse(%q)) error = %v", b, err)
			}
		}
	})
}
