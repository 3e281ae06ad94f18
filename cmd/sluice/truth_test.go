package main

import (
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestScreensTellTheTruth reads, as an operator does, what the console
// and the built CLI show of records that used to mislead: an expired
// rule, one a set owns, a refused token, a lone rule, a read-only field,
// and the Retry-After of a block that ends.
func TestScreensTellTheTruth(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t)
	p := startLocal(t, nil, "--seed", "")
	dir := t.TempDir()
	if banner := p.out.String(); strings.Contains(banner, "4th gets 429") || !strings.Contains(banner, "no rule limits it") {
		t.Errorf("the banner of --seed '' promises a 429 no rule gives:\n%s", banner)
	}

	// A block that ends in 150 s: its 429 says retry then, not after the
	// rule's period (1m).
	mallory := "mallory-" + testenv.Random(t)
	block := p.postRule(t, rules.Rule{API: "demo", Route: "*", Subject: mallory, Limit: new(int64(0)),
		Period: rules.Period(time.Minute), ExpiresAt: new(time.Now().Add(150 * time.Second).Truncate(time.Second))})
	resp, body := p.get(t, "/hello", mallory)
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || ra < 140 || ra > 150 {
		t.Errorf("GET /hello by a subject blocked for 150 s = %d, Retry-After %q, want 429 and about 150\n%s",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	past := p.postRule(t, rules.Rule{API: "demo", Route: "GET /hello", Subject: "old-" + testenv.Random(t), Limit: new(int64(5)),
		Period: rules.Period(time.Minute), ExpiresAt: new(time.Now().Add(-time.Hour).Truncate(time.Second))})

	// A plan and a rule of a set: plans ls and rules ls name it, and a
	// change by hand is warned of.
	writeFile(t, dir, "team.yaml", "version: 1\nset: team\nplans:\n  - {name: team-gold, limit: 100, period: 1m}\n"+
		"rules:\n  - {api: demo, route: GET /items, subject: '*', plan: team-gold}\n")
	p.wantExit(t, dir, 0, "apply", "-f", "team.yaml")
	if out := p.wantExit(t, dir, 0, "plans", "ls"); !strings.Contains(out, "SET") || !strings.Contains(out, "team") {
		t.Errorf("plans ls does not show the plan's set:\n%s", out)
	}
	owned := p.ruleByRoute(t, "demo", "GET /items")
	out := p.wantExit(t, dir, 0, "rules", "put", "--id", owned.ID, "--description", "hot fix")
	if !strings.Contains(out, "belongs to set team") || !strings.Contains(out, "sluice apply") {
		t.Errorf("rules put of a set's rule does not warn that apply reverts it:\n%s", out)
	}
	if out := p.wantExit(t, dir, 0, "plans", "put", "--name", "team-gold", "--limit", "50"); !strings.Contains(out, "belongs to set team") {
		t.Errorf("plans put of a set's plan does not warn that apply reverts it:\n%s", out)
	}

	ctx := browser(t, 90*time.Second)
	drive(t, ctx, "open the console", chromedp.Navigate(p.base+"/console/#token="+p.token),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id="`+past.ID+`"]`)))
	cell := func(id, sel string) string {
		return js[string](t, ctx, `document.querySelector('#rules tr[data-id="`+id+`"] `+sel+`').textContent`)
	}
	if got := cell(past.ID, "[data-expires]"); !strings.HasPrefix(got, "expired ") || !strings.Contains(got, ":") {
		t.Errorf("an expired rule's Enabled cell reads %q, want expired and its time", got)
	}
	if got := cell(block.ID, "[data-expires]"); !strings.HasPrefix(got, ", until ") || strings.Count(got, ":") != 2 {
		t.Errorf("a live block's expiry reads %q, want until and a time to the second", got)
	}
	if got := cell(owned.ID, "[data-set]"); got != "team" {
		t.Errorf("a set's rule shows set %q, want team", got)
	}
	drive(t, ctx, "open the set's rule", chromedp.Navigate(p.base+"/console/#/rules/"+owned.ID), chromedp.WaitVisible(css(`#owned-by-set`)))
	if got := js[string](t, ctx, `document.getElementById('owned-by-set').textContent`); !strings.Contains(got, "next apply of team reverts") {
		t.Errorf("the form of a set's rule warns %q, want that apply reverts a change", got)
	}
	drive(t, ctx, "list the team's rules", chromedp.Navigate(p.base+"/console/#/rules?route=GET+%2Fitems"),
		waitJS(`document.getElementById('shown') && document.getElementById('shown').textContent !== ''`))
	if got := js[string](t, ctx, `document.getElementById('shown').textContent`); got != "1 rule." {
		t.Errorf("the count under one rule reads %q, want 1 rule.", got)
	}
	drive(t, ctx, "open a plan", chromedp.Navigate(p.base+"/console/#/plans/team-gold"), chromedp.WaitVisible(css(`#plan-form`)))
	if got := js[string](t, ctx, `(e => e.readOnly + ' ' + getComputedStyle(e).borderTopColor)(document.querySelector('#plan-form [name=name]'))`); !strings.HasPrefix(got, "true rgba(0, 0, 0, 0)") {
		t.Errorf("a plan's name field (readOnly, border) = %s, want read-only and drawn as a value", got)
	}

	// A token the API refuses is not "not signed in".
	wrong := browser(t, 30*time.Second)
	drive(t, wrong, "open with a wrong token", chromedp.Navigate(p.base+"/console/#token=wrong-token"),
		chromedp.WaitVisible(css(`[data-flash="error"]`)))
	if got := js[string](t, wrong, `document.getElementById('flash').textContent`); !strings.Contains(got, "refused this token") {
		t.Errorf("a refused token reads %q, want that the admin API refused it", got)
	}
}

// TestCLISaysWhatHolds runs the built binary where its words used to
// mislead: an export of a set that owns nothing, the odd long form
// --f, the default limit's help, and a top offender's deleted rule.
func TestCLISaysWhatHolds(t *testing.T) {
	t.Parallel()
	p := startLocal(t, nil)
	dir := t.TempDir()
	if out := p.wantExit(t, dir, 1, "export", "nosuchset"); !strings.Contains(out, "no rule or plan belongs to set nosuchset") {
		t.Errorf("export of a set that owns nothing says:\n%s", out)
	}
	p.wantExit(t, dir, 2, "lint", "--f=x.yaml")
	if out := p.wantExit(t, dir, 1, "lint", "--file=x.yaml"); strings.Contains(out, "unknown flag") {
		t.Errorf("lint --file is not the flag's name:\n%s", out)
	}
	if out := p.wantExit(t, dir, 0, "local", "--help"); !strings.Contains(strings.Join(strings.Fields(out), " "), "(100/1m,burst=200); unset: allow.") {
		t.Errorf("local --help does not say what no default limit means:\n%s", out)
	}

	// A subject denied by a rule since deleted: find names it deleted.
	s := "gone-" + testenv.Random(t)
	r := p.postRule(t, rules.Rule{API: "demo", Route: "*", Subject: s, Limit: new(int64(1)), Period: rules.Period(time.Minute)})
	p.get(t, "/hello", s)
	p.get(t, "/hello", s) // denied
	p.wantExit(t, dir, 0, "rules", "rm", r.ID)
	if out := p.wantExit(t, dir, 0, "subjects", "find", s); !strings.Contains(out, "(deleted rule "+r.ID+")") {
		t.Errorf("subjects find of a subject a deleted rule denied says:\n%s", out)
	}
}

// TestLintSaysEveryProblem runs the built binary's lint: every problem of
// a rule, counted on the command's line (no empty "sluice: lint:"), and a
// past expires_at as a warning that does not fail.
func TestLintSaysEveryProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lint := func(file string, want int) string {
		t.Helper()
		cmd := exec.Command(sluiceBin, "lint", "-f", file)
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput()
		if got := cmd.ProcessState.ExitCode(); got != want {
			t.Fatalf("sluice lint -f %s = exit %d, want %d\n%s", file, got, want, out)
		}
		return string(out)
	}
	writeFile(t, dir, "bad.yaml", "version: 1\nset: team\nrules:\n  - {api: demo, route: GET /y, subject: '*', limit: -5, period: 1m, cost: -2, burst: -1}\n")
	out := lint("bad.yaml", 1)
	if !strings.HasPrefix(out, "sluice: lint: 3 problems:\nbad.yaml:4: rules[0].limit: ") ||
		!strings.Contains(out, "rules[0].burst: ") || !strings.Contains(out, "rules[0].cost: ") {
		t.Errorf("lint of a rule with three bad fields says:\n%s", out)
	}
	writeFile(t, dir, "past.yaml", "version: 1\nset: team\nrules:\n  - api: demo\n    route: GET /x\n    subject: '*'\n"+
		"    limit: 5\n    period: 1m\n    expires_at: 2020-01-01T00:00:00Z\n")
	out = lint("past.yaml", 0)
	if !strings.Contains(out, "sluice: lint: warning: past.yaml:9: rules[0].expires_at: 2020-01-01T00:00:00Z is past: the rule never applies") ||
		!strings.Contains(out, "1 file, 1 rule and 0 plans: no problems.") {
		t.Errorf("lint of a rule already expired says:\n%s", out)
	}
}
