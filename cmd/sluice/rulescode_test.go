package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rulefile"
	"github.com/sluicehq/sluice/internal/rules"
)

const limitsTwoPlans = `version: 1
set: platform
plans:
  - {name: gold, limit: 1000, period: 1m}
  - {name: silver, limit: 100, period: 1m}
rules:
  - {api: shop, route: "*", subject: "*", limit: 100, period: 1m}
  - {api: shop, route: GET /orders, subject: "*", plan: gold}
`

func (p *localProc) planNames(t *testing.T) []string {
	t.Helper()
	code, b := p.adminDo(t, http.MethodGet, "/plans", "", 0)
	var l admin.ListPlansResponse
	if code != 200 || json.Unmarshal(b, &l) != nil {
		t.Fatalf("GET /plans = %d %s", code, b)
	}
	var names []string
	for _, pl := range l.Plans {
		names = append(names, pl.Name)
	}
	return names
}

func (p *localProc) wildcardLimit(t *testing.T) int64 {
	t.Helper()
	for _, r := range p.rulesOf(t, "*") {
		if r.API == "shop" && r.Subject == "*" {
			return *r.Limit
		}
	}
	t.Fatal("no wildcard rule on shop")
	return 0
}

// TestApplyPlanFile drives diff --out and apply --plan as built binaries
// against sluice local: a plan that deletes a plan applies (from the
// file and from the saved plan), what apply --plan shows is what it
// sends, and a saved plan edited to reach outside its set, or that does
// not decode strictly, is refused before anything is applied.
func TestApplyPlanFile(t *testing.T) {
	p := startLocal(t, nil)
	dir := t.TempDir()
	writeFile(t, dir, "limits.yaml", limitsTwoPlans)
	p.wantExit(t, dir, 0, "apply", "-f", "limits.yaml")

	// Drop silver: the saved plan deletes it, and apply --plan reads its
	// own plan and sends it.
	writeFile(t, dir, "limits.yaml", strings.Replace(limitsTwoPlans, "  - {name: silver, limit: 100, period: 1m}\n", "", 1))
	out := p.wantExit(t, dir, 2, "diff", "-f", "limits.yaml", "--out", "plan.json")
	if !strings.Contains(out, `- delete plan "silver"`) {
		t.Errorf("diff =\n%s\nwant the plan's delete", out)
	}
	saved, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(saved), `"set": "platform"`) || strings.Contains(string(saved), "period") {
		t.Errorf("plan.json =\n%s\nwant the set, and a delete naming the plan only", saved)
	}
	out = p.wantExit(t, dir, 0, "apply", "--plan", "plan.json")
	if !strings.Contains(out, `- delete plan "silver"`) || !strings.Contains(out, "Applied 1 change(s)") {
		t.Errorf("apply --plan =\n%s\nwant the delete shown and applied", out)
	}
	if got := p.planNames(t); slices.Contains(got, "silver") || !slices.Contains(got, "gold") {
		t.Errorf("after apply --plan the plans are %v, want gold and no silver", got)
	}
	// And straight from a file.
	writeFile(t, dir, "limits.yaml", limitsTwoPlans)
	p.wantExit(t, dir, 0, "apply", "-f", "limits.yaml")
	oneplan := strings.Replace(limitsTwoPlans, "  - {name: silver, limit: 100, period: 1m}\n", "", 1)
	writeFile(t, dir, "limits.yaml", oneplan)
	p.wantExit(t, dir, 0, "apply", "-f", "limits.yaml")
	if got := p.planNames(t); slices.Contains(got, "silver") || !slices.Contains(got, "gold") {
		t.Errorf("after apply -f the plans are %v, want gold and no silver", got)
	}

	// An override outside the set, and a plan that raises one limit.
	p.wantExit(t, dir, 0, "rules", "put", "--api", "shop", "--route", "*", "--subject", "vip", "--limit", "7", "--period", "1m")
	var vip rules.Rule
	for _, r := range p.rulesOf(t, "*") {
		if r.Subject == "vip" {
			vip = r
		}
	}
	writeFile(t, dir, "limits.yaml", strings.Replace(oneplan, "limit: 100, period: 1m}\n  - {api", "limit: 200, period: 1m}\n  - {api", 1))
	p.wantExit(t, dir, 2, "diff", "-f", "limits.yaml", "--out", "plan.json")
	var plan map[string]any
	saved, _ = os.ReadFile(filepath.Join(dir, "plan.json"))
	if err := json.Unmarshal(saved, &plan); err != nil {
		t.Fatal(err)
	}
	ops := plan["ops"].([]any)
	edit := func(name string, f func(plan map[string]any)) {
		t.Helper()
		var c map[string]any
		json.Unmarshal(saved, &c) //nolint:errcheck // decoded above
		f(c)
		b, _ := json.Marshal(c)
		writeFile(t, dir, name, string(b))
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		want []string
	}{
		{"delete the override", func(c map[string]any) {
			c["ops"] = append(c["ops"].([]any), map[string]any{"action": "delete", "rule": map[string]any{"id": vip.ID}, "if_version": vip.Version})
		}, []string{"ops[1]", vip.ID, "belongs to no set"}},
		{"another set", func(c map[string]any) { c["set"] = "billing" }, []string{`refused the plan for set "billing"`, "ops[0]", `belongs to set "platform"`}},
		{"a rule of another set", func(c map[string]any) {
			c["ops"].([]any)[0].(map[string]any)["rule"].(map[string]any)["set"] = "billing"
		}, []string{"ops[0].rule.set", `is "billing"`}},
		{"the old format", func(c map[string]any) { c["changes"] = []any{} }, []string{"changes: unknown field"}},
		{"a key in another case", func(c map[string]any) { c["Set"] = c["set"]; delete(c, "set") }, []string{"Set: unknown field"}},
	} {
		edit(tc.name+".json", tc.edit)
		out := p.wantExit(t, dir, 1, "apply", "--plan", tc.name+".json")
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("apply --plan (%s) =\n%s\nwant %q", tc.name, out, w)
			}
		}
		if got := p.wantExit(t, dir, 0, "rules", "ls", "--api", "shop"); !strings.Contains(got, "vip") || p.wildcardLimit(t) != 100 {
			t.Errorf("after a refused plan (%s): rules\n%s\nwant the override kept and the limit still 100", tc.name, got)
		}
	}
	writeFile(t, dir, "dup.json", strings.Replace(string(saved), `"set": "platform",`, `"set": "platform", "set": "billing",`, 1))
	if out := p.wantExit(t, dir, 1, "apply", "--plan", "dup.json"); !strings.Contains(out, "set: appears more than once") {
		t.Errorf("apply --plan (a key twice) =\n%s\nwant it refused, naming the key", out)
	}

	// Shown is sent: an edited limit is what apply prints and applies.
	if len(ops) != 1 {
		t.Fatalf("plan.json ops = %v, want one update", ops)
	}
	edit("raised.json", func(c map[string]any) {
		c["ops"].([]any)[0].(map[string]any)["rule"].(map[string]any)["limit"] = 999999
	})
	out = p.wantExit(t, dir, 0, "apply", "--plan", "raised.json")
	if !strings.Contains(out, "limit: 100 -> 999999") || strings.Contains(out, "-> 200") {
		t.Errorf("apply --plan of an edited plan =\n%s\nwant it to show the limit it sends, 999999", out)
	}
	if got := p.wildcardLimit(t); got != 999999 {
		t.Errorf("after apply --plan the limit is %d, want 999999 (what was shown)", got)
	}
}

// TestBatchDecodesAsRules sends POST /rules and POST /batch the same
// faults over HTTP to sluice local: a key twice, a key in another case
// and data after the object are a 400 from both, at any depth of a batch,
// and nothing is written.
func TestBatchDecodesAsRules(t *testing.T) {
	p := startLocal(t, nil)
	const rule = `"api":"shop","route":"GET /x","subject":"*","limit":5,"period":"1s"`
	batch := func(r string) string { return `{"set":"platform","ops":[{"action":"create","rule":{` + r + `}}]}` }
	for _, tc := range []struct {
		name        string
		path, body  string
		field, text string // the 400's field, or its detail
	}{
		{"rule: a key twice", "/rules", `{` + rule + `,"limit":5000}`, "limit", ""},
		{"batch: a key twice", "/batch", `{"set":"platform","set":"billing","ops":[]}`, "set", ""},
		{"batch: a rule's key twice", "/batch", batch(rule + `,"limit":5000`), "ops[0].rule.limit", ""},
		{"rule: another case", "/rules", `{` + strings.Replace(rule, `"limit"`, `"Limit"`, 1) + `}`, "Limit", ""},
		{"batch: another case", "/batch", `{"Set":"platform","ops":[]}`, "Set", ""},
		{"batch: an op's key in another case", "/batch", `{"set":"platform","ops":[{"ACTION":"create","rule":{` + rule + `}}]}`, "ops[0].ACTION", ""},
		{"batch: a rule's key in another case", "/batch", batch(strings.Replace(rule, `"limit"`, `"Limit"`, 1)), "ops[0].rule.Limit", ""},
		{"rule: data after", "/rules", `{` + rule + `} {}`, "", "data after the JSON object"},
		{"batch: data after", "/batch", batch(rule) + ` x`, "", "data after the JSON object"},
	} {
		code, b := p.adminDo(t, http.MethodPost, tc.path, tc.body, 0)
		var pr httpapi.Problem
		json.Unmarshal(b, &pr) //nolint:errcheck // checked below
		var fields []string
		for _, f := range pr.Errors {
			fields = append(fields, f.Field)
		}
		if code != 400 || (tc.field != "" && !strings.Contains(" "+strings.Join(fields, " ")+" ", " "+tc.field+" ")) || !strings.Contains(pr.Detail, tc.text) {
			t.Errorf("%s: POST %s = %d %s; want 400 naming %q %q", tc.name, tc.path, code, b, tc.field, tc.text)
		}
	}
	if rs := p.rulesOf(t, "GET /x"); len(rs) != 0 {
		t.Errorf("after refused bodies GET /rules?route=GET /x = %d rules, want 0", len(rs))
	}
	// The same bodies, well formed, are taken.
	if code, b := p.adminDo(t, http.MethodPost, "/batch", batch(rule), 0); code != 200 {
		t.Errorf("POST /batch = %d %s, want 200", code, b)
	}
}

// TestRulesFileInputs: lint and apply, as built binaries, refuse a rules
// file with a key twice (naming it and its lines), report two rules whose
// values do not parse without calling them one scope, and refuse stdin or
// a file over 16 MiB whole: nothing past a cut is ever deleted.
func TestRulesFileInputs(t *testing.T) {
	p := startLocal(t, nil)
	dir := t.TempDir()

	writeFile(t, dir, "twice.yaml", "version: 1\nset: platform\nrules:\n  - {api: shop, route: \"*\", subject: \"*\", limit: 1, period: 1s}\nset: billing\n")
	if out := p.wantExit(t, dir, 1, "lint", "-f", "twice.yaml"); !strings.Contains(out, "twice.yaml:5: set: is given twice (first at line 2)") {
		t.Errorf("lint of a key twice =\n%s\nwant the key and both lines", out)
	}
	writeFile(t, dir, "bad.yaml", `version: 1
set: platform
rules:
  - {api: shop, route: GET /a, subject: "*", limit: 1, period: fortnight}
  - {api: shop, route: GET /b, subject: "*", limit: 1, period: 3 weeks}
`)
	out := p.wantExit(t, dir, 1, "lint", "-f", "bad.yaml")
	if !strings.Contains(out, "bad.yaml:4: rules[0].period") || !strings.Contains(out, "bad.yaml:5: rules[1].period") || strings.Contains(out, "one rule per scope") {
		t.Errorf("lint of two bad periods =\n%s\nwant each period, and no scope reported twice", out)
	}

	// Two rules, 16 MiB of comment between them.
	head := "version: 1\nset: platform\nrules:\n  - {api: shop, route: GET /a, subject: \"*\", limit: 1, period: 1s}\n"
	tail := "  - {api: shop, route: GET /b, subject: \"*\", limit: 1, period: 1s}\n"
	writeFile(t, dir, "limits.yaml", head+tail)
	p.wantExit(t, dir, 0, "apply", "-f", "limits.yaml")
	big := head + "#" + strings.Repeat("x", rulefile.MaxSize) + "\n" + tail
	cmd := exec.Command(sluiceBin, "apply", "-f", "-")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLUICE_ENDPOINT="+p.base+"/admin", "SLUICE_ADMIN_TOKEN="+p.token)
	cmd.Stdin = strings.NewReader(big)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "stdin: is larger than 16 MiB") {
		t.Errorf("apply -f - of %d bytes = %v\n%s\nwant exit 1, refused whole", len(big), err, stderr.String())
	}
	if rs := p.rulesOf(t, "GET /b"); len(rs) != 1 {
		t.Errorf("after a refused over-size stdin GET /b has %d rules, want 1 (nothing deleted)", len(rs))
	}
	writeFile(t, dir, "big.yaml", big)
	for _, args := range [][]string{{"lint", "-f", "big.yaml"}, {"apply", "-f", "big.yaml"}} {
		if out := p.wantExit(t, dir, 1, args...); !strings.Contains(out, "big.yaml: is larger than 16 MiB") {
			t.Errorf("sluice %s =\n%s\nwant the file refused whole", strings.Join(args, " "), out)
		}
	}
}
