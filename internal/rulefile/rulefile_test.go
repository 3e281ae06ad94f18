package rulefile

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
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
	f := mustParse(t, good)
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
			wantParseError(t, tc.in, tc.want...)
		})
	}
}

// TestParseEveryProblem: a rule whose field has the wrong type is still
// validated, so one pass reports every problem of the file, in line
// order, each once: no problem of a field that did not decode, nor one
// naming it (burst against a limit that is not there), and no Go time
// layout.
func TestParseEveryProblem(t *testing.T) {
	in := `version: 1
set: platform
rules:
  - api: shop
    route: GET /q
    subject: "*"
    colour: red
    limit: ten
    burst: 2
    period: 1m
    mode: bogus
    expires_at: tomorrow
  - {api: shop, route: GET /r, subject: "*", limit: 10, period: 1m, enabled: "yes"}
  - {api: shop, route: GET /s, subject: "*", limit: -1, period: 7q}
`
	_, err := Parse("limits.yaml", []byte(in))
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("Parse() = %v, want an *Error", err)
	}
	var got []string
	for _, p := range fe.Problems {
		got = append(got, p.String())
	}
	want := []string{
		`limits.yaml:7: rules[0].colour: unknown field`,
		`limits.yaml:8: rules[0].limit: must be a whole number, not a string`,
		`limits.yaml:11: rules[0].mode: must be "enforce" or "shadow"`,
		`limits.yaml:12: rules[0].expires_at: must be an RFC 3339 time such as 2026-12-31T23:00:00Z, not "tomorrow"`,
		`limits.yaml:13: rules[1].enabled: must be true or false, not a string`,
		`limits.yaml:14: rules[2].period: invalid period: is not a period: use a number and a unit among s, m, h, d, w, y, such as "1m" or "1h30m"`,
		`limits.yaml:14: rules[2].limit: must be between 0 (block) and 1000000000`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse() problems (-want +got):\n%s", diff)
	}
}

// TestParseStrict: a key given twice is refused, naming the key and both
// lines; two rules whose scope fields do not decode are no duplicate of
// each other; a file over MaxSize is refused whole.
func TestParseStrict(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		not      string
	}{
		{"top-level key twice", "version: 1\nset: platform\nrules: []\nset: billing\n",
			[]string{"limits.yaml:4: set: is given twice (first at line 2); give each key once"}, ""},
		{"rules twice", "version: 1\nset: platform\nrules:\n  - {api: a, route: \"*\", subject: \"*\", limit: 1, period: 1s}\nrules: []\n",
			[]string{"limits.yaml:5: rules: is given twice (first at line 3)"}, ""},
		{"JSON key twice", `{"version": 1, "set": "platform", "set": "billing"}`,
			[]string{"limits.yaml:1: set: is given twice (first at line 1)"}, ""},
		{"field twice", "version: 1\nset: platform\nrules:\n  - api: a\n    route: \"*\"\n    subject: \"*\"\n    limit: 1\n    limit: 1000\n    period: 1s\n",
			[]string{"limits.yaml:8: rules[0].limit: is given twice (first at line 7)"}, ""},
		{"periods that do not parse", `version: 1
set: platform
rules:
  - {api: shop, route: GET /a, subject: "*", limit: 1, period: fortnight}
  - {api: shop, route: GET /b, subject: "*", limit: 1, period: 3 weeks}
`, []string{"limits.yaml:4: rules[0].period:", "limits.yaml:5: rules[1].period:"}, "one rule per scope"},
		{"routes that do not parse", `version: 1
set: platform
rules:
  - {api: shop, route: [GET /a], subject: "*", limit: 1, period: 1s}
  - {api: shop, route: {GET: /b}, subject: "*", limit: 1, period: 1s}
`, []string{"limits.yaml:4: rules[0].route: must be a string", "limits.yaml:5: rules[1].route: must be a string"}, "one rule per scope"},
		{"one scope, a bad limit", `version: 1
set: platform
rules:
  - {api: shop, route: GET /a, subject: "*", limit: x, period: 1s}
  - {api: shop, route: GET /a, subject: "*", limit: y, period: 1s}
`, []string{"limits.yaml:5: rules[1]: the scope (api, route, subject, kind, dimension) of the rule at line 4: one rule per scope"}, ""},
		{"over MaxSize", "version: 1\nset: platform\n#" + strings.Repeat("x", MaxSize) + "\n",
			[]string{"limits.yaml: is larger than 16 MiB"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := wantParseError(t, tc.in, tc.want...)
			if tc.not != "" && strings.Contains(err.Error(), tc.not) {
				t.Errorf("Parse() error =\n%v\nwant no %q", err, tc.not)
			}
		})
	}
	// Read refuses a stream one byte over, rather than parse what fits.
	big := "version: 1\nset: platform\n" + strings.Repeat("#", MaxSize-len("version: 1\nset: platform\n")) + "\n"
	if _, err := Read("stdin", strings.NewReader(big)); err == nil || !strings.Contains(err.Error(), "stdin: is larger than 16 MiB") {
		t.Errorf("Read(MaxSize+1 bytes) error = %v, want it refused", err)
	}
	if _, err := Read("stdin", strings.NewReader(big[:MaxSize])); err != nil {
		t.Errorf("Read(MaxSize bytes) error = %v, want none", err)
	}
}

// mustParse is Parse of text as the file limits.yaml.
func mustParse(t *testing.T, text string) *File {
	t.Helper()
	f, err := Parse("limits.yaml", []byte(text))
	if err != nil {
		t.Fatalf("Parse() error = %v", err)
	}
	return f
}

// wantParseError checks that Parse refuses text as limits.yaml with an
// error holding each of want.
func wantParseError(t *testing.T, text string, want ...string) error {
	t.Helper()
	_, err := Parse("limits.yaml", []byte(text))
	if err == nil {
		t.Fatalf("Parse() = nil error, want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Parse() error =\n%v\nwant a line with %q", err, w)
		}
	}
	return err
}

// diffText is Diff(f, have), its changes as text.
func diffText(t *testing.T, f *File, have rules.Set) (store.Batch, []string) {
	t.Helper()
	b, cs, err := Diff(f, have)
	if err != nil {
		t.Fatal(err)
	}
	return b, texts(cs)
}

// texts is each change as text.
func texts(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	return out
}

// wantRoundTrip checks that the export of have, as the set platform,
// parses back to no change, and returns it.
func wantRoundTrip(t *testing.T, have rules.Set) string {
	t.Helper()
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
	return string(out)
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
	f := mustParse(t, good)
	have := stored(f)
	override := rules.Rule{ID: "z", API: "shop", Route: "*", Subject: "vip", Limit: new(int64(1)), Period: rules.Period(time.Second), Version: 1}
	have.Rules = append(have.Rules, override)
	if b, cs, err := Diff(f, have); err != nil || len(b.Ops) != 0 || len(cs) != 0 {
		t.Fatalf("Diff(unchanged) = %d ops, %v, %v; want none", len(b.Ops), cs, err)
	}

	changed := strings.Replace(good, "limit: 500", "limit: 600", 1)
	changed = strings.Replace(changed, "    plan: gold\n", "    plan: gold\n  - {api: shop, route: POST /orders, subject: \"*\", limit: 1, period: 1s}\n", 1)
	changed = strings.Replace(changed, "    expires_at: 2026-12-31T23:59:59Z\n", "", 1)
	b, got := diffText(t, mustParse(t, changed), have)
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
	b, _ = diffText(t, mustParse(t, "version: 1\nset: platform\n"), have)
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
	if _, _, err := Diff(mustParse(t, taken), have); err == nil || !strings.Contains(err.Error(), "limits.yaml:20: rules[2]: rule z holds this scope and belongs to no set") {
		t.Errorf("Diff(scope held outside the set) error = %v", err)
	}
}

// TestChanges: what a batch does is described from the batch and what is
// stored, and a batch reaching outside its set is refused op by op.
func TestChanges(t *testing.T) {
	f := mustParse(t, good)
	have := stored(f)
	have.Rules = append(have.Rules, rules.Rule{ID: "z", API: "shop", Route: "*", Subject: "vip", Limit: new(int64(1)), Period: rules.Period(time.Second), Version: 1})
	have.Plans = append(have.Plans, rules.Plan{Name: "silver", Limit: 5, Period: rules.Period(time.Second), Set: "billing", Version: 1})
	b := store.Batch{Set: "platform", Ops: []store.Op{
		{Action: rules.ActionUpdate, Rule: &rules.Rule{ID: "b", API: "shop", Route: "GET /orders", Subject: "customer-x", Limit: new(int64(9)), Period: rules.Period(time.Minute)}, IfVersion: 3},
		{Action: rules.ActionDelete, Plan: &rules.Plan{Name: "gold"}, IfVersion: 1},
	}}
	cs, err := Changes("plan.json", b, have)
	if err != nil {
		t.Fatal(err)
	}
	got := texts(cs)
	want := []string{
		"~ update rule api \"shop\" route \"GET /orders\" subject \"customer-x\" (b)\n    limit: 500 -> 9\n    description: \"Black Friday override\" -> null\n    expires_at: \"2026-12-31T23:59:59Z\" -> null",
		"- delete plan \"gold\"",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Changes() (-want +got):\n%s", diff)
	}

	tampered := store.Batch{Set: "platform", Ops: []store.Op{
		{Action: rules.ActionDelete, Rule: &rules.Rule{ID: "z"}, IfVersion: 1},
		{Action: rules.ActionUpdate, Plan: &rules.Plan{Name: "silver", Limit: 1, Period: rules.Period(time.Second)}, IfVersion: 1},
		{Action: rules.ActionDelete, Rule: &rules.Rule{ID: "nope"}, IfVersion: 1},
		{Action: rules.ActionCreate, Rule: &rules.Rule{API: "shop", Route: "GET /x", Subject: "*", Limit: new(int64(1)), Period: rules.Period(time.Second), Set: "billing"}},
		{Action: rules.ActionDelete, Rule: &rules.Rule{ID: "a"}, IfVersion: 3},
	}}
	_, err = Changes("plan.json", tampered, have)
	for _, w := range []string{
		`plan.json: ops[0]: rule "z" belongs to no set: a plan for set "platform" changes only its own`,
		`plan.json: ops[1]: plan "silver" belongs to set "billing"`,
		`plan.json: ops[2]: rule "nope" does not exist`,
		`plan.json: ops[3].rule.set: is "billing"`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Changes(tampered) error =\n%v\nwant a line with %q", err, w)
		}
	}
	if err != nil && strings.Contains(err.Error(), "ops[4]") {
		t.Errorf("Changes(tampered) error =\n%v\nwant nothing on ops[4], a delete of the set's own rule", err)
	}
	if _, err := Changes("plan.json", store.Batch{Ops: b.Ops}, have); err == nil || !strings.Contains(err.Error(), "plan.json: set: is required") {
		t.Errorf("Changes(no set) error = %v, want set is required", err)
	}
}

// TestExportRoundTrip: an export parses back to no change.
func TestExportRoundTrip(t *testing.T) {
	f := mustParse(t, good)
	have := stored(f)
	have.Rules = append(have.Rules, rules.Rule{ID: "q", API: "shop", Route: "*", Subject: "*", Kind: rules.Quota, Limit: new(int64(100)), Period: rules.Month,
		Anchor: "2026-01-31T09:30:00Z", Durable: true, FailureMode: rules.FailClosed, Mode: rules.Shadow, Enabled: new(false), Set: "platform", Version: 1})
	out := wantRoundTrip(t, have)
	for _, w := range []string{"route: '*'", "expires_at: \"2026-12-31T23:59:59Z\"", "period: 1mo"} {
		if !strings.Contains(out, w) {
			t.Errorf("export lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "mode: enforce") || strings.Contains(out, "id:") {
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
