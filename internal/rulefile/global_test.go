package rulefile

import (
	"strings"
	"testing"
)

const globalFile = `version: 1
set: platform
plans:
  - name: shared
    kind: quota
    limit: 1000000
    period: 1mo
    global: true
rules:
  - api: shop
    route: "*"
    subject: "*"
    kind: quota
    plan: shared
  - api: shop
    route: GET /orders
    subject: "*"
    limit: 10000
    period: 1m
    global: true
`

// TestGlobal: global parses on plans and rules, the schema takes it, a
// change of it is a change, and an export keeps it.
func TestGlobal(t *testing.T) {
	f := mustParse(t, globalFile)
	if !f.Plans[0].Global || f.Rules[0].Global || !f.Rules[1].Global {
		t.Errorf("Parse() global = plan %v, rules %v %v; want true, false (global through its plan), true", f.Plans[0].Global, f.Rules[0].Global, f.Rules[1].Global)
	}
	s := compileSchema(t)
	if err := s.Validate(asJSON(t, globalFile)); err != nil {
		t.Errorf("schema rejects global: %v", err)
	}
	if err := s.Validate(asJSON(t, strings.Replace(globalFile, "global: true\nrules", "global: yes please\nrules", 1))); err == nil {
		t.Error("schema accepts a plan's global that is not a boolean")
	}

	have := stored(f)
	regional := strings.Replace(globalFile, "    period: 1m\n    global: true\n", "    period: 1m\n", 1)
	regional = strings.Replace(regional, "    period: 1mo\n    global: true\n", "    period: 1mo\n", 1)
	f2 := mustParse(t, regional)
	b, got := diffText(t, f2, have)
	want := "~ update plan \"shared\"\n    global: true -> false\n" +
		"~ update rule api \"shop\" route \"GET /orders\" subject \"*\" (b)\n    global: true -> false"
	if strings.Join(got, "\n") != want || len(b.Ops) != 2 {
		t.Errorf("Diff(global dropped) = %d ops,\n%s\nwant 2 ops,\n%s", len(b.Ops), strings.Join(got, "\n"), want)
	}
	if _, cs, _ := Diff(f, stored(f2)); len(cs) != 2 || cs[0].Fields[0].Field != "global" || string(cs[0].Fields[0].Old) != "false" {
		t.Errorf("Diff(global added) = %v, want two updates of global from false", cs)
	}

	if out := wantRoundTrip(t, have); strings.Count(out, "global: true") != 2 {
		t.Errorf("export holds global: true %d times, want 2:\n%s", strings.Count(out, "global: true"), out)
	}
	if out, _ := Marshal(Export("platform", stored(f2))); strings.Contains(string(out), "global") {
		t.Errorf("export of regional rules names global:\n%s", out)
	}
}

// TestGlobalProblems: what a global rule cannot be is a problem at its
// line, as lint and apply print it.
func TestGlobalProblems(t *testing.T) {
	in := `version: 1
set: platform
plans:
  - {name: fast, limit: 10, period: 1s, global: true}
  - {name: shared, limit: 600, period: 1m, global: true}
rules:
  - api: shop
    route: "*"
    subject: "*"
    limit: 10
    period: 1m
    global: true
    mode: shadow
  - {api: shop, route: GET /x, subject: "*", plan: shared, mode: shadow}
`
	wantParseError(t, in,
		"limits.yaml:4: plans[0].period: must be at least 1m for a global rate rule",
		"limits.yaml:12: rules[0].global: cannot be combined with mode shadow",
		"limits.yaml:14: rules[1].global: cannot be combined with mode shadow")
}
