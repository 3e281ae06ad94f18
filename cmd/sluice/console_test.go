package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// screenshotsVar, set to 1, makes TestConsoleBrowser write its screenshots
// to docs/img (the ones docs/console.md shows); otherwise they go to a temp
// dir.
const screenshotsVar = "SLUICE_UPDATE_SCREENSHOTS"

// browser starts a headless chromium for the test and returns a context
// driving one tab, with timeout for the whole test.
func browser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a headless chromium: skipped with -short (make check)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testenv.Chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1100, 720),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// consoleDelete deletes the rule or plan (kind) key with its page's
// Delete button, confirmed, and wants the list back with a flash of
// success and the admin API to answer 404 for it.
func consoleDelete(t *testing.T, ctx context.Context, p *localProc, kind, key string) {
	t.Helper()
	drive(t, ctx, "delete "+kind,
		chromedp.Navigate(p.base+"/console/#/"+kind+"s/"+key),
		chromedp.WaitVisible(css(`#delete`)),
		acceptConfirms, clearFlash,
		chromedp.Click(css(`#delete`)),
		chromedp.WaitVisible(css(`#`+kind+`s`)),
		chromedp.WaitVisible(css(`[data-flash="ok"]`)))
	if resp, _ := p.adminGet(t, "/admin/"+kind+"s/"+key); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET the deleted %s = %d, want 404", kind, resp.StatusCode)
	}
}

// stepTimeout bounds one drive or value call.
const stepTimeout = 30 * time.Second

// drive runs chromedp actions, failing the test with what when one fails.
func drive(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	// A step that waits for what never comes fails in seconds, not at the
	// test's deadline.
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		flash, _ := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID("flash")))
		t.Fatalf("%s: %v (flash: %q)", what, err, flash)
	}
}

// value runs one chromedp action and returns its value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// css is the first element matching a CSS selector.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// shot saves a PNG of the viewport as docs/img/console-<name>.png (with
// SLUICE_UPDATE_SCREENSHOTS=1) or in a temp dir, scrolled to show the
// element focus selects (the top of the page when "").
func shot(t *testing.T, ctx context.Context, dir, name, focus string) {
	t.Helper()
	scroll := `window.scrollTo(0, 0)`
	if focus != "" {
		scroll = `document.querySelector(` + strconv.Quote(focus) + `).scrollIntoView({block: "start"})`
	}
	drive(t, ctx, "settle", evaluate(scroll), chromedp.Sleep(150*time.Millisecond))
	png := value(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// shotDir is where the test's screenshots go: docs/img with
// SLUICE_UPDATE_SCREENSHOTS=1, else a temp dir.
func shotDir(t *testing.T) string {
	if os.Getenv(screenshotsVar) == "1" {
		return filepath.Join("..", "..", "docs", "img")
	}
	return t.TempDir()
}

// setField replaces the value of the rule form's input named name.
func setField(name, v string) chromedp.Action[chromedp.Void] {
	return setIn("rule-form", name, v)
}

// setIn replaces the value of the input named name in the form with id.
func setIn(form, name, v string) chromedp.Action[chromedp.Void] {
	sel := css(`#` + form + ` [name="` + name + `"]`)
	return chromedp.Steps(chromedp.WaitVisible(sel), chromedp.SetValue(sel, v))
}

// evaluate runs JavaScript for its effect.
func evaluate(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool]("("+expr+", true)")(ctx, t)
		return err
	})
}

// waitJS waits until the JavaScript expression is true.
func waitJS(expr string) chromedp.Action[chromedp.Void] { return waitJSWithin(expr, stepTimeout) }

// waitShown waits until an element matching the CSS selector is shown. A
// list the console redraws on its refresh replaces its rows, and
// chromedp.WaitVisible can hold a node that is gone by the time it asks
// for its box ("Could not find node with given id"); a poll that queries
// anew each time cannot.
func waitShown(selector string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(selector)
	return waitJS(`(e => e !== null && e.getClientRects().length > 0)(document.querySelector(` + string(q) + `))`)
}

// waitJSWithin waits at most d until the JavaScript expression is true.
func waitJSWithin(expr string, d time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(d))(ctx, t)
		return err
	})
}

// js evaluates a JavaScript expression and returns its value.
func js[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	return value(t, ctx, expr, chromedp.Evaluate[T](expr))
}

// findSubject types subject into the top offenders page's find form and
// submits it, in one evaluation: the page redraws what holds the form (a
// resize, its 5 s refresh), and CI once saw a node one CDP call found gone
// at the next ("Could not find node with given id").
func findSubject(subject string) chromedp.Action[chromedp.Void] {
	return evaluate(`(() => { document.getElementById('find-subject').value = ` + strconv.Quote(subject) +
		`; document.getElementById('find-form').requestSubmit() })()`)
}

// clearFlash empties the flash area, so that waiting for the next flash
// does not find the last one.
var clearFlash = evaluate(`document.getElementById('flash').replaceChildren()`)

// acceptConfirms makes window.confirm answer yes, as the operator would.
var acceptConfirms = evaluate(`window.confirm = () => true`)

// TestConsoleBrowser drives the web console in headless chromium against a
// real `sluice local` on real Redis and PostgreSQL: a rule's create (with a
// field error first), edit, a 412 from a concurrent edit through the API
// with the diff and the reapply, its history and delete; a plan's create,
// history and delete; a subject's live limits and reset; and the top
// offenders after a `sluice load` run.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t) // skip before starting anything when there is none
	b := backends()[1]  // redis+postgres
	p := startLocal(t, b.env(t), b.extra(t)...)
	dir := shotDir(t)
	// The banner names the console; a token chosen through
	// SLUICE_ADMIN_TOKEN is not printed, so neither is it in the URL.
	if want := "console    " + p.base + "/console/#token=<SLUICE_ADMIN_TOKEN>"; !strings.Contains(p.out.String(), want) {
		t.Errorf("the banner does not print %q:\n%s", want, p.out)
	}
	ctx := browser(t, 90*time.Second)
	start := time.Now()

	// Opening the printed URL: the token moves from the fragment to
	// sessionStorage, out of the address bar.
	drive(t, ctx, "open the console",
		chromedp.Navigate(p.base+"/console/#token="+p.token),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id]`)))
	loc := value(t, ctx, "location", chromedp.Location())
	if strings.Contains(loc, p.token) {
		t.Errorf("the address bar still holds the token: %s", loc)
	}
	shot(t, ctx, dir, "rules", "")

	// Create: a bad limit is shown next to its field, as the API words it.
	route := "GET /console-" + testenv.Random(t)
	drive(t, ctx, "new rule form",
		chromedp.Click(css(`#new-rule`)),
		setField("api", "demo"), setField("route", route), setField("limit", "-5"), setField("period", "1m"),
		chromedp.Click(css(`#save`)),
		chromedp.WaitVisible(css(`[data-error-for="limit"]:not([hidden])`)))
	limitErr := value(t, ctx, "read the field error", chromedp.Text(css(`[data-error-for="limit"]`)))
	if limitErr == "" {
		t.Errorf("no error shown next to limit")
	}
	shot(t, ctx, dir, "field-error", `#f-route`)
	drive(t, ctx, "create",
		setField("limit", "5"),
		chromedp.Click(css(`#save`)),
		chromedp.WaitVisible(css(`#version`)))
	loc = value(t, ctx, "location", chromedp.Location())
	id, ok := strings.CutPrefix(loc[strings.Index(loc, "#"):], "#/rules/")
	if !ok || id == "" {
		t.Fatalf("after create the console is at %s, want #/rules/<id>", loc)
	}
	rule := p.getRule(t, id)
	if rule.Route != route || *rule.Limit != 5 || rule.Version != 1 {
		t.Fatalf("created rule = %+v, want %s 5/1m at version 1", rule, route)
	}

	// Edit, and time-box the rule.
	drive(t, ctx, "edit",
		setField("limit", "6"), setField("expires_at", "2099-01-01T00:00:00Z"),
		clearFlash,
		chromedp.Click(css(`#save`)),
		chromedp.WaitVisible(css(`[data-flash="ok"]`)),
		chromedp.WaitReady(css(`#version`)))
	if rule = p.getRule(t, id); *rule.Limit != 6 || rule.Version != 2 || rule.ExpiresAt == nil || rule.ExpiresAt.Year() != 2099 {
		t.Fatalf("edited rule = limit %d version %d expires %v, want 6 at version 2, expiring in 2099", *rule.Limit, rule.Version, rule.ExpiresAt)
	}
	// The list shows it as expiring.
	drive(t, ctx, "the list shows the expiry",
		chromedp.Navigate(p.base+"/console/#/rules"),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id="`+id+`"] [data-expires]`)))
	if got := value(t, ctx, "expiry text", chromedp.Text(css(`#rules tbody tr[data-id="`+id+`"] [data-expires]`))); !strings.Contains(got, "2099") {
		t.Errorf("the rule's row says %q, want its expiry in 2099", got)
	}
	drive(t, ctx, "back to the form", chromedp.Navigate(p.base+"/console/#/rules/"+id), chromedp.WaitVisible(css(`#version`)))

	// Conflict: someone else saves version 3 through the API while the
	// form still holds version 2.
	drive(t, ctx, "reload the form", chromedp.Reload(), chromedp.WaitVisible(css(`#rule-form`)))
	rule.Description = "changed elsewhere"
	rule.Limit = new(int64(7))
	p.putRule(t, rule, 2)
	drive(t, ctx, "save over a concurrent edit",
		setField("failure_mode", "closed"), // not the rate, which merges as one value
		chromedp.Click(css(`#save`)),
		chromedp.WaitVisible(css(`#conflict tr[data-field="description"]`)),
		chromedp.WaitVisible(css(`#conflict tr[data-field="limit"]`)))
	drive(t, ctx, "reapply",
		clearFlash,
		chromedp.Click(css(`#reapply`)),
		chromedp.WaitNotPresent(css(`#conflict`)),
		chromedp.WaitVisible(css(`[data-flash="ok"]`)))
	// Only the operator's failure mode is reapplied; the limit and
	// description saved meanwhile stay.
	if rule = p.getRule(t, id); rule.Version != 4 || rule.FailureMode != rules.FailClosed || *rule.Limit != 7 || rule.Description != "changed elsewhere" {
		t.Fatalf("reapplied rule = %+v, want version 4 with the operator's failure mode closed, the other limit 7 and description", rule)
	}

	// History: four writes, newest first, with before/after.
	drive(t, ctx, "history",
		chromedp.Navigate(p.base+"/console/#/history/rule/"+id),
		chromedp.WaitVisible(css(`#history .entry`)))
	entries := value(t, ctx, "history entries", chromedp.Nodes(chromedp.CSSAll(`#history .entry`)))
	if len(entries) != 4 {
		t.Errorf("history shows %d entries, want 4", len(entries))
	}
	shot(t, ctx, dir, "history", "")

	consoleDelete(t, ctx, p, "rule", id)

	// A global rule: the checkbox, a combination a global rule cannot be
	// shown at its field, then the badge in the list.
	groute := "GET /global-" + testenv.Random(t)
	drive(t, ctx, "new global shadow rule",
		chromedp.Navigate(p.base+"/console/#/rules"),
		chromedp.Click(css(`#new-rule`)),
		setField("api", "demo"), setField("route", groute), setField("limit", "100"), setField("period", "1h"), setField("mode", "shadow"),
		chromedp.Click(css(`#rule-form [name="global"]`)),
		chromedp.Click(css(`#save`)),
		chromedp.WaitVisible(css(`[data-error-for="global"]:not([hidden])`)))
	drive(t, ctx, "create the global rule",
		setField("mode", ""), clearFlash,
		chromedp.Click(css(`#save`)),
		chromedp.WaitVisible(css(`#version`)))
	loc = value(t, ctx, "location", chromedp.Location())
	gid, _ := strings.CutPrefix(loc[strings.Index(loc, "#"):], "#/rules/")
	if g := p.getRule(t, gid); !g.Global || g.Route != groute {
		t.Fatalf("rule made with the global box = %+v, want %s global", g, groute)
	}
	drive(t, ctx, "the list shows it global",
		chromedp.Navigate(p.base+"/console/#/rules?api=demo"),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id="`+gid+`"] [data-global]`)))

	// A plan, global: create, its badge, then its history and delete.
	plan := "console-" + testenv.Random(t)
	drive(t, ctx, "create a plan",
		chromedp.Navigate(p.base+"/console/#/plans"),
		chromedp.Click(css(`#new-plan`)),
		setIn("plan-form", "name", plan), setIn("plan-form", "limit", "50"), setIn("plan-form", "period", "1h"),
		chromedp.Click(css(`#plan-form [name="global"]`)),
		clearFlash,
		chromedp.Click(css(`#save`)),
		chromedp.WaitVisible(css(`#version`)),
		chromedp.Navigate(p.base+"/console/#/plans"),
		chromedp.WaitVisible(css(`#plans tr[data-name="`+plan+`"] [data-global]`)),
		chromedp.Navigate(p.base+"/console/#/history/plan/"+plan),
		chromedp.WaitVisible(css(`#history .entry[data-action="create"] tr[data-field="limit"]`)))
	consoleDelete(t, ctx, p, "plan", plan)

	// A subject: exhausted on /search (3 a minute), then reset. Three
	// requests, not four: a denial would sit in the authorizer's local deny
	// cache, which a reset does not reach (docs/authorizer.md).
	subject := "console-" + testenv.Random(t)
	for range 3 {
		p.get(t, "/search", subject)
	}
	drive(t, ctx, "subject",
		chromedp.Navigate(p.base+"/console/#/subject?s="+subject+"&api=demo&route=GET%20%2Fsearch"),
		chromedp.WaitVisible(css(`#limits [data-remaining="0"]`)))
	shot(t, ctx, dir, "subject", "")
	drive(t, ctx, "reset",
		acceptConfirms,
		chromedp.Click(css(`#reset`)),
		chromedp.WaitNotPresent(css(`#limits [data-remaining="0"]`)))
	if resp, _ := p.get(t, "/search", subject); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /search after the reset = %d, want 200", resp.StatusCode)
	}

	// Top offenders after a short load.
	prefix := "cload-" + testenv.Random(t) + "-"
	if out, stderr, code := p.cli(t, "load", "--rate", "200", "--duration", "1s", "--subjects", "3",
		"--subject-prefix", prefix, "--quiet", p.base+"/search"); code != 0 {
		t.Fatalf("sluice load = exit %d\n%s\n%s", code, out, stderr)
	}
	hash := localSubjectHash(t, prefix+"0")
	drive(t, ctx, "stats",
		chromedp.Navigate(p.base+"/console/#/stats?window=5m"),
		waitShown(`#top-subjects tr[data-subject="`+hash+`"]`),
		chromedp.WaitVisible(css(`#chart rect[data-kind="denied"]`)))
	drive(t, ctx, "find a subject",
		findSubject(prefix+"0"),
		waitShown(`#top-subjects tr.found[data-subject="`+hash+`"]`))
	shot(t, ctx, dir, "stats", "#stats")
	shot(t, ctx, dir, "find", "#find-form")
	// A window the in-process counts cannot answer (not offered, but a
	// link may ask for it): the API's 400, shown.
	drive(t, ctx, "stats window 1h",
		chromedp.Navigate(p.base+"/console/#/stats?window=1h"),
		chromedp.WaitVisible(css(`[data-error-for="window"]`)))
	t.Logf("browser flows took %v", time.Since(start).Round(time.Millisecond))
}

// TestConsoleEdits drives, in headless chromium against `sluice local`,
// the console's edits that meet someone else's write (made with the CLI,
// as the other operator would): a 412 on different fields, reapplied as a
// three-way merge; on the same field, refused with both values shown; the
// delete of a rule changed since it was opened; a quota plan's edit; and
// the rules list paged to its end.
func TestConsoleEdits(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t)
	// The example rules, and more rules of one API than a page holds.
	pagesAPI := "pages" + strings.ToLower(testenv.Random(t))
	const pageRules = 1005
	p := startLocal(t, nil, "--seed", seedWith(t, pagesAPI, pageRules))
	dir := shotDir(t)
	ctx := browser(t, 150*time.Second)
	drive(t, ctx, "open the console",
		chromedp.Navigate(p.base+"/console/#token="+p.token),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id]`)))
	newRule := func(desc string) rules.Rule {
		return p.postRule(t, rules.Rule{API: "edits", Route: "GET /e-" + testenv.Random(t), Subject: "*",
			Limit: new(int64(5)), Period: rules.Period(time.Minute), Description: desc})
	}
	open := func(id string) {
		t.Helper()
		drive(t, ctx, "open rule "+id,
			chromedp.Navigate(p.base+"/console/#/rules/"+id),
			waitJS(`document.querySelector('h1 code')?.textContent === `+strconv.Quote(id)+` && !!document.getElementById('rule-form')`))
	}
	outcomes := func() map[string]string {
		t.Helper()
		return js[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#conflict tr[data-field]')].map(r => [r.dataset.field, r.dataset.outcome]))`)
	}
	cli := func(args ...string) {
		t.Helper()
		if out, stderr, code := p.cli(t, args...); code != 0 {
			t.Fatalf("sluice %s = exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
		}
	}

	// conflict opens r, makes the edits mine in its form, has another
	// operator change it with the rules put flags theirs, then saves over
	// that until wait shows: it returns each conflict row's outcome by
	// field, and the rule as the other operator left it.
	conflict := func(t *testing.T, r rules.Rule, wait string, theirs []string, mine ...chromedp.Action[chromedp.Void]) (map[string]string, rules.Rule) {
		t.Helper()
		open(r.ID)
		drive(t, ctx, "edit", mine...)
		cli(append([]string{"rules", "put", "--id", r.ID}, theirs...)...)
		left := p.getRule(t, r.ID)
		drive(t, ctx, "save over their edit", clearFlash, chromedp.Click(css(`#save`)), chromedp.WaitVisible(css(wait)))
		return outcomes(), left
	}

	t.Run("different fields", func(t *testing.T) {
		// The repro: limit and description changed here, limit 5
		// (unchanged) and mode shadow there.
		r := newRule("as loaded")
		rows, _ := conflict(t, r, `#conflict`, []string{"--limit", "5", "--mode", "shadow"}, setField("limit", "8"), setField("description", "mine"))
		want := map[string]string{"limit": "mine", "description": "mine", "mode": "theirs"}
		if !maps.Equal(rows, want) {
			t.Errorf("conflict rows = %v, want %v (mode was never touched here)", rows, want)
		}
		shot(t, ctx, dir, "conflict", "h1")
		drive(t, ctx, "reapply",
			clearFlash, chromedp.Click(css(`#reapply`)),
			chromedp.WaitVisible(css(`[data-flash="ok"]`)), chromedp.WaitNotPresent(css(`#conflict`)))
		got := p.getRule(t, r.ID)
		if got.Version != 3 || *got.Limit != 8 || got.Description != "mine" || got.Mode != rules.Shadow {
			t.Errorf("after reapply: version %d limit %d description %q mode %s; want 3, 8, mine, shadow",
				got.Version, *got.Limit, got.Description, got.Mode)
		}
	})

	t.Run("same field", func(t *testing.T) {
		r := newRule("as loaded")
		rows, _ := conflict(t, r, `#conflict tr[data-field="limit"]`, []string{"--limit", "6"}, setField("limit", "8"), setField("description", "mine too"))
		want := map[string]string{"limit": "conflict", "description": "mine"}
		if !maps.Equal(rows, want) {
			t.Errorf("conflict rows = %v, want %v", rows, want)
		}
		// Both values shown, nothing offered that would overwrite theirs.
		cells := js[[]string](t, ctx, `[...document.querySelectorAll('#conflict tr[data-field="limit"] td')].map(td => td.textContent)`)
		if len(cells) < 4 || cells[1] != "5" || cells[2] != "6" || cells[3] != "8" {
			t.Errorf("limit row = %q, want loaded 5, now 6, yours 8", cells)
		}
		if js[bool](t, ctx, `!!document.getElementById('reapply')`) {
			t.Errorf("a Reapply button is offered over a field both changed")
		}
		shot(t, ctx, dir, "conflict-both", "h1")
		if got := p.getRule(t, r.ID); got.Version != 2 || *got.Limit != 6 || got.Description != "as loaded" {
			t.Fatalf("after the refused save: version %d limit %d description %q; want 2, 6, as loaded", got.Version, *got.Limit, got.Description)
		}
		// Edit on version 2: their limit in the form, the operator's
		// description carried over; the operator sets the limit they mean.
		drive(t, ctx, "edit on the current version",
			chromedp.Click(css(`#edit-current`)),
			chromedp.WaitVisible(css(`[data-note-for="limit"]`)))
		if v := js[string](t, ctx, `document.getElementById('f-limit').value`); v != "6" {
			t.Errorf("limit in the form on version 2 = %q, want theirs, 6", v)
		}
		if v := js[string](t, ctx, `document.getElementById('f-description').value`); v != "mine too" {
			t.Errorf("description in the form on version 2 = %q, want the operator's", v)
		}
		drive(t, ctx, "save on version 2",
			setField("limit", "8"), clearFlash, chromedp.Click(css(`#save`)), chromedp.WaitVisible(css(`[data-flash="ok"]`)))
		if got := p.getRule(t, r.ID); got.Version != 3 || *got.Limit != 8 || got.Description != "mine too" {
			t.Errorf("saved on version 2: version %d limit %d description %q; want 3, 8, mine too", got.Version, *got.Limit, got.Description)
		}
	})

	t.Run("a rate is one value", func(t *testing.T) {
		// One operator changes only the limit, another only the period:
		// reapplying would save 100/1h, a rate neither chose.
		r := newRule("as loaded")
		rows, _ := conflict(t, r, `#conflict tr[data-field="limit"]`, []string{"--period", "1h"}, setField("limit", "100"), setField("description", "mine"))
		want := map[string]string{"limit": "conflict", "period": "conflict", "description": "mine"}
		if !maps.Equal(rows, want) {
			t.Errorf("conflict rows = %v, want %v (limit and period are one rate)", rows, want)
		}
		cells := js[[]string](t, ctx, `[...document.querySelectorAll('#conflict tr[data-field="period"] td')].map(td => td.textContent)`)
		if len(cells) < 4 || cells[1] != "1m" || cells[2] != "1h" || cells[3] != "1m" {
			t.Errorf("period row = %q, want loaded 1m, now 1h, yours 1m, side by side", cells)
		}
		if js[bool](t, ctx, `!!document.getElementById('reapply')`) {
			t.Errorf("a Reapply button is offered that would save a rate nobody chose")
		}
		if got := p.getRule(t, r.ID); *got.Limit != 5 || got.Period != rules.Period(time.Hour) {
			t.Errorf("after the refused save: %d/%s, want theirs, 5/1h", *got.Limit, got.Period)
		}
	})

	// What admits a request is one value, the rate: a cost, plan, kind,
	// anchor or minimum remaining changed here and another of them
	// changed there is a conflict, never a merge. Each case changes on
	// one side only fields the rate held before (limit, period, burst), on
	// the other only fields it did not, so a merge that forgot one of them
	// would reapply. The repro is the first: cost 5 here and limit
	// 50 there would save 10 requests a minute, 5 times fewer than theirs
	// and 10 times more than mine.
	plan := "edits-" + strings.ToLower(testenv.Random(t))
	p.adminJSON(t, http.MethodPost, "/admin/plans", map[string]any{"name": plan, "limit": 1000, "period": "1m"}, http.StatusCreated, nil)
	daily := func(kind rules.Kind) func() rules.Rule {
		return func() rules.Rule {
			return p.postRule(t, rules.Rule{API: "edits", Route: "GET /d-" + testenv.Random(t), Subject: "*", Kind: kind,
				Limit: new(int64(5)), Period: rules.Period(24 * time.Hour), Description: "as loaded"})
		}
	}
	planned := func() rules.Rule {
		return p.postRule(t, rules.Rule{API: "edits", Route: "GET /p-" + testenv.Random(t), Subject: "*", Plan: "partner", Description: "as loaded"})
	}
	for _, tc := range []struct {
		name string
		base func() rules.Rule
		mine [][2]string // the console's field values
		cli  []string    // the other operator's flags
		want []string    // the conflicts
	}{
		{"cost and limit", func() rules.Rule { return newRule("as loaded") }, [][2]string{{"cost", "5"}}, []string{"--limit", "50"}, []string{"cost", "limit"}},
		{"limit and cost", func() rules.Rule { return newRule("as loaded") }, [][2]string{{"limit", "100"}}, []string{"--cost", "2"}, []string{"cost", "limit"}},
		{"kind and limit", daily(rules.Rate), [][2]string{{"kind", "quota"}}, []string{"--limit", "9"}, []string{"kind", "limit"}},
		{"anchor and limit", daily(rules.Quota), [][2]string{{"anchor", "2026-01-01T00:00:00Z"}}, []string{"--limit", "9"}, []string{"anchor", "limit"}},
		{"min remaining and period", daily(rules.Quota), [][2]string{{"min_remaining", "2"}}, []string{"--period", "1w"}, []string{"min_remaining", "period"}},
		{"plan and cost", planned, [][2]string{{"plan", plan}}, []string{"--cost", "3"}, []string{"plan", "cost"}},
	} {
		t.Run("one rate: "+tc.name, func(t *testing.T) {
			r := tc.base()
			var edits []chromedp.Action[chromedp.Void]
			for _, f := range tc.mine {
				edits = append(edits, setField(f[0], f[1]))
			}
			rows, theirs := conflict(t, r, `#conflict`, tc.cli, append(edits, setField("description", "mine"))...)
			want := map[string]string{"description": "mine"}
			for _, f := range tc.want {
				want[f] = "conflict"
			}
			if !maps.Equal(rows, want) {
				t.Errorf("conflict rows = %v, want %v", rows, want)
			}
			if js[bool](t, ctx, `!!document.getElementById('reapply')`) {
				t.Errorf("a Reapply button is offered that would save a rate nobody chose")
			}
			if got := p.getRule(t, r.ID); got.Version != theirs.Version {
				t.Errorf("after the refused save: version %d, want theirs, %d", got.Version, theirs.Version)
			}
			// Editing on their version says why, next to each field.
			note := `[data-note-for="` + tc.want[0] + `"]`
			drive(t, ctx, "edit on the current version", chromedp.Click(css(`#edit-current`)), chromedp.WaitVisible(css(note)))
			if got := js[string](t, ctx, `document.querySelector('`+note+`').textContent`); !strings.Contains(got, "cost, plan, kind, anchor") {
				t.Errorf("%s's note = %q, want it to say cost, plan, kind and anchor are one rate with the limit", tc.want[0], got)
			}
		})
	}

	t.Run("delete a changed rule", func(t *testing.T) {
		r := newRule("as loaded")
		open(r.ID)
		cli("rules", "put", "--id", r.ID, "--description", "theirs")
		drive(t, ctx, "delete version 1",
			acceptConfirms, clearFlash,
			chromedp.Click(css(`#delete`)),
			chromedp.WaitVisible(css(`#conflict tr[data-field="description"][data-outcome="theirs"]`)))
		if got := p.getRule(t, r.ID); got.Version != 2 {
			t.Fatalf("the rule after a delete of version 1 = version %d, want still 2", got.Version)
		}
		drive(t, ctx, "delete version 2",
			clearFlash, chromedp.Click(css(`#delete-current`)),
			chromedp.WaitVisible(css(`#rules`)),
			chromedp.WaitVisible(css(`#deleted-history`)))
		if resp, _ := p.adminGet(t, "/admin/rules/"+r.ID); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET the deleted rule = %d, want 404", resp.StatusCode)
		}
		// Its history stays reachable: from the flash, and from its page.
		drive(t, ctx, "the deleted rule's history",
			chromedp.Click(css(`#deleted-history`)),
			chromedp.WaitVisible(css(`#history .entry[data-action="delete"]`)))
		if n := js[int](t, ctx, `document.querySelectorAll('#history .entry').length`); n != 3 {
			t.Errorf("history of the deleted rule shows %d entries, want 3", n)
		}
		drive(t, ctx, "the deleted rule's page",
			chromedp.Navigate(p.base+"/console/#/rules/"+r.ID),
			chromedp.WaitVisible(css(`#gone-history`)))
	})

	t.Run("taken scope", func(t *testing.T) {
		// A create on a scope another rule holds: the 409 names that rule,
		// and the flash links to it.
		r := newRule("the holder")
		drive(t, ctx, "create on a taken scope",
			chromedp.Navigate(p.base+"/console/#/rules/new"),
			waitJS(`document.querySelector('h1').textContent === 'New rule'`),
			setField("api", r.API), setField("route", r.Route), setField("subject", "*"),
			setField("limit", "9"), setField("period", "1m"),
			clearFlash, chromedp.Click(css(`#save`)),
			chromedp.WaitVisible(css(`#scope-holder`)))
		if href := js[string](t, ctx, `document.getElementById('scope-holder').getAttribute('href')`); href != "#/rules/"+r.ID {
			t.Errorf("the taken scope's link = %q, want #/rules/%s", href, r.ID)
		}
		drive(t, ctx, "open the holder",
			chromedp.Click(css(`#scope-holder`)),
			waitJS(`document.querySelector('h1 code')?.textContent === `+strconv.Quote(r.ID)))
	})

	t.Run("quota plan", func(t *testing.T) {
		name := "q-" + testenv.Random(t)
		p.adminJSON(t, http.MethodPost, "/admin/plans", map[string]any{"name": name, "kind": "quota", "limit": 1000, "period": "1mo"}, http.StatusCreated, nil)
		drive(t, ctx, "edit a quota plan's description",
			chromedp.Navigate(p.base+"/console/#/plans/"+name),
			chromedp.WaitVisible(css(`#plan-form`)),
			setIn("plan-form", "description", "monthly"),
			clearFlash, chromedp.Click(css(`#save`)),
			chromedp.WaitVisible(css(`[data-flash="ok"]`)))
		var got rules.Plan
		p.adminJSON(t, http.MethodGet, "/admin/plans/"+name, nil, http.StatusOK, &got)
		if got.Version != 2 || got.Kind != rules.Quota || got.Period != rules.Month || got.Description != "monthly" {
			t.Errorf("quota plan after the edit = %+v, want version 2, quota, 1mo, monthly", got)
		}
		// A new quota plan from the form, once the edited plan's page is
		// back (a page still loading must not render over the new one).
		drive(t, ctx, "the edited plan's page", waitJS(`document.querySelector('h1 code')?.textContent === `+strconv.Quote(name)+
			` && document.getElementById('version')?.textContent.includes('version 2')`))
		name2 := "q-" + testenv.Random(t)
		drive(t, ctx, "create a quota plan",
			chromedp.Navigate(p.base+"/console/#/plans/new"),
			waitJS(`document.querySelector('h1').textContent === 'New plan'`),
			setIn("plan-form", "name", name2), setIn("plan-form", "kind", "quota"),
			setIn("plan-form", "limit", "100"), setIn("plan-form", "period", "1w"),
			clearFlash, chromedp.Click(css(`#save`)),
			chromedp.WaitVisible(css(`#version`)))
		p.adminJSON(t, http.MethodGet, "/admin/plans/"+name2, nil, http.StatusOK, &got)
		if got.Kind != rules.Quota || got.Period != rules.Period(rules.Week) || got.Limit != 100 {
			t.Errorf("quota plan made in the console = %+v, want quota 100/1w", got)
		}
	})

	t.Run("pages to the end", func(t *testing.T) {
		// 1005 rules of one API, made in a shuffled order: the server
		// filters, sorts and pages, 100 at a time, so the first page is
		// the first 100 routes (not 100 of the list sorted among
		// themselves), More adds the next ones below, and the last page
		// hides it.
		rows := `document.querySelectorAll('#rules tbody tr[data-id]').length`
		routesJS := `[...document.querySelectorAll('#rules tbody tr[data-id]')].map(r => r.children[1].textContent)`
		moreShown := `getComputedStyle(document.getElementById('more')).display !== 'none'`
		drive(t, ctx, "first page",
			chromedp.Navigate(p.base+"/console/#/rules?api="+pagesAPI),
			waitJS(rows+` === 100`))
		var want []string
		for i := range pageRules {
			want = append(want, fmt.Sprintf("GET /p%04d", i))
		}
		if got := js[[]string](t, ctx, routesJS); !slices.Equal(got, want[:100]) {
			t.Errorf("first page = %q…, want the first 100 routes of the API in order, %q…", got[:min(len(got), 5)], want[:5])
		}
		for n := 100; n < pageRules; n = min(n+100, pageRules) {
			if !js[bool](t, ctx, moreShown) {
				t.Fatalf("More is not shown under %d of %d rules", n, pageRules)
			}
			drive(t, ctx, "next page", chromedp.Click(css(`#more`)), waitJS(rows+` === `+strconv.Itoa(min(n+100, pageRules))))
		}
		if js[bool](t, ctx, moreShown) {
			t.Errorf("More is still shown after the last page")
		}
		// A click that still reaches it fetches nothing.
		drive(t, ctx, "click the hidden More", evaluate(`document.getElementById('more').click()`), chromedp.Sleep(500*time.Millisecond))
		if got := js[[]string](t, ctx, routesJS); !slices.Equal(got, want) {
			t.Errorf("after the last page and a click on More: %d rows, want the %d routes once each, in order", len(got), pageRules)
		}
		// A filter is the server's too: one route of the many.
		drive(t, ctx, "filtered",
			chromedp.Navigate(p.base+"/console/#/rules?api="+pagesAPI+"&route="+url.QueryEscape("GET /p0777")),
			waitJS(rows+` === 1`))
		// A list that fits one page shows no More.
		drive(t, ctx, "one page",
			chromedp.Navigate(p.base+"/console/#/rules?api=demo"),
			waitJS(rows+` === 3`))
		if js[bool](t, ctx, moreShown) {
			t.Errorf("More is shown under a list of 3 rules")
		}
	})
}

// seedWith writes a seed file for sluice local: examples/rules.json and n
// rules of api, routes "GET /p0000" up, made in a shuffled order.
func seedWith(t *testing.T, api string, n int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "rules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var seed struct {
		Plans []json.RawMessage `json:"plans"`
		Rules []json.RawMessage `json:"rules"`
	}
	if err := json.Unmarshal(b, &seed); err != nil {
		t.Fatal(err)
	}
	for _, i := range rand.Perm(n) {
		r, _ := json.Marshal(rules.Rule{API: api, Route: fmt.Sprintf("GET /p%04d", i), Subject: "*", Limit: new(int64(1)), Period: rules.Period(time.Minute)})
		seed.Rules = append(seed.Rules, r)
	}
	out, _ := json.Marshal(seed)
	path := filepath.Join(t.TempDir(), "seed.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConsoleSlowPageDoesNotRenderOverNext drives the race CI once saw:
// the operator opens a plan, whose GET is slow, and before it answers
// clicks 'New plan'. The slow answer must not render the old plan's page
// over 'New plan', and the save must create the new plan, not touch the
// old one. The admin API is made slow on purpose: the browser reaches
// sluice local through a proxy that holds the plan's GET until the test
// lets it go, after the operator has moved on.
func TestConsoleSlowPageDoesNotRenderOverNext(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t)
	p := startLocal(t, nil)
	old, fresh := "slow-"+testenv.Random(t), "next-"+testenv.Random(t)
	p.adminJSON(t, http.MethodPost, "/admin/plans", map[string]any{"name": old, "limit": 10, "period": "1m", "description": "as loaded"}, http.StatusCreated, nil)
	hold := newHoldProxy(t, p.base, "/admin/plans/"+old)
	ctx := browser(t, 30*time.Second)

	// From the plans list, the operator opens the plan; its page is the
	// list until the held GET answers, so 'New plan' is still there to
	// click.
	drive(t, ctx, "open the plans",
		chromedp.Navigate(hold.url+"/console/#token="+p.token),
		chromedp.Navigate(hold.url+"/console/#/plans"),
		waitShown(`#plans tr[data-name="`+old+`"] a[href="#/plans/`+old+`"]`),
		chromedp.Click(css(`#plans tr[data-name="`+old+`"] a[href="#/plans/`+old+`"]`)))
	select {
	case <-hold.held:
	case <-time.After(10 * time.Second):
		t.Fatalf("the console did not ask for GET /admin/plans/%s within 10s", old)
	}
	drive(t, ctx, "new plan while the old one loads",
		chromedp.Click(css(`#new-plan`)),
		waitJS(`document.querySelector('h1').textContent === 'New plan'`),
		setIn("plan-form", "name", fresh), setIn("plan-form", "limit", "50"), setIn("plan-form", "period", "1h"))

	// The slow answer arrives (or finds the browser gone); the browser
	// has a moment to render whatever it still takes (without the abort it
	// rendered the old plan within milliseconds; a second is for a loaded
	// machine).
	hold.letGo()
	select {
	case got := <-hold.outcome:
		t.Logf("the held GET: %s", got)
	case <-time.After(10 * time.Second):
		t.Fatalf("the held GET did not end within 10s of its release")
	}
	drive(t, ctx, "settle", chromedp.Sleep(time.Second))
	if h1, name := js[string](t, ctx, `document.querySelector('h1').textContent`),
		js[string](t, ctx, `document.querySelector('#plan-form [name="name"]').value`); h1 != "New plan" || name != fresh {
		t.Errorf("after the slow plan's answer the console shows %q with name %q, want 'New plan' with %q", h1, name, fresh)
	}

	// The save goes where the operator meant: a new plan, the old one as
	// it was.
	drive(t, ctx, "save", clearFlash, chromedp.Click(css(`#save`)), waitShown(`[data-flash]`))
	if resp, body := p.adminGet(t, "/admin/plans/"+fresh); resp.StatusCode != http.StatusOK {
		t.Errorf("GET the new plan = %d %s, want 200: the save did not create it", resp.StatusCode, body)
	} else {
		var got rules.Plan
		if err := json.Unmarshal(body, &got); err != nil || got.Version != 1 || got.Limit != 50 || got.Period != rules.Period(time.Hour) {
			t.Errorf("the new plan = %+v (%v), want version 1, 50/1h", got, err)
		}
	}
	var was rules.Plan
	p.adminJSON(t, http.MethodGet, "/admin/plans/"+old, nil, http.StatusOK, &was)
	if was.Version != 1 || was.Limit != 10 || was.Description != "as loaded" {
		t.Errorf("the old plan after the save = %+v, want version 1, limit 10, as loaded", was)
	}
	if !t.Failed() {
		drive(t, ctx, "the new plan's page", waitJS(`document.querySelector('h1 code')?.textContent === `+strconv.Quote(fresh)))
	}
}

// holdProxy serves sluice local's console and admin API through a proxy
// that holds the first GET of one path until the test calls letGo: an
// admin API slow on purpose, for as long as the test needs.
type holdProxy struct {
	url     string        // the proxy's base URL, for the browser
	held    chan struct{} // closed when the GET arrives
	release chan struct{} // closed by letGo
	letGo   func()        // lets the GET go on (again: nothing); at the latest when the test ends
	// outcome receives, once, what became of the GET after its release:
	// "delivered" (answered to the browser) or "abandoned" (the browser
	// had cancelled it).
	outcome chan string
}

// newHoldProxy starts a holdProxy in front of base, holding path.
func newHoldProxy(t *testing.T, base, path string) *holdProxy {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	h := &holdProxy{held: make(chan struct{}), release: make(chan struct{}), outcome: make(chan string, 1)}
	h.letGo = sync.OnceFunc(func() { close(h.release) })
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	var first sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mine := false
		if r.Method == http.MethodGet && r.URL.Path == path {
			first.Do(func() { mine = true })
		}
		if !mine {
			proxy.ServeHTTP(w, r)
			return
		}
		close(h.held)
		<-h.release
		if r.Context().Err() != nil {
			h.outcome <- "abandoned: the browser cancelled it before it was released"
			return
		}
		proxy.ServeHTTP(w, r)
		h.outcome <- "delivered to the browser"
	}))
	// A test that stops early lets the GET go, or Close would wait on it.
	t.Cleanup(func() { h.letGo(); srv.Close() })
	h.url = srv.URL
	return h
}

// TestConsoleViews checks, in headless chromium against `sluice local`,
// what the views show an operator: the rules list's numbers, plans and
// descriptions; rules named in the top offenders, only the windows the
// backend answers, a chart whose text is not stretched; a subject's reset
// as a date and a full bucket as full, under columns named in words; one
// column layout across history entries, in UTC; and, at 400 px wide, no
// view that scrolls sideways.
func TestConsoleViews(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t)
	p := startLocal(t, nil)
	dir := shotDir(t)
	ctx := browser(t, 120*time.Second)
	drive(t, ctx, "open the console",
		chromedp.Navigate(p.base+"/console/#token="+p.token),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id]`)))

	// Data that strains a narrow screen: a long description, a long exact
	// subject, a quota over a year, a rule edited and deleted.
	long := "A long description that goes on, naming the partner tier and the reason for its numbers, so that it must wrap on a narrow screen."
	subject := "quota-" + testenv.Random(t) + "-" + strings.Repeat("k", 40)
	quota := p.postRule(t, rules.Rule{API: "demo", Route: "*", Subject: subject, Kind: rules.Quota,
		Limit: new(int64(1000)), Period: rules.Period(rules.Year), Description: long})
	inline := p.postRule(t, rules.Rule{API: "demo", Route: "GET /items", Subject: "*", Limit: new(int64(20)), Period: rules.Period(time.Minute)})
	cli := func(args ...string) {
		t.Helper()
		if out, stderr, code := p.cli(t, args...); code != 0 {
			t.Fatalf("sluice %s = exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
		}
	}
	cli("rules", "put", "--id", inline.ID, "--description", long)
	cli("rules", "put", "--id", inline.ID, "--burst", "30")
	gone := p.postRule(t, rules.Rule{API: "demo", Route: "GET /gone", Subject: "*", Limit: new(int64(1)), Period: rules.Period(time.Minute)})
	cli("rules", "rm", gone.ID)
	// Four searches by one subject: the fourth is denied (3 a minute).
	denied := "stats-" + testenv.Random(t)
	for range 4 {
		p.get(t, "/search", denied)
	}

	t.Run("rules list", func(t *testing.T) {
		drive(t, ctx, "rules of demo",
			chromedp.Navigate(p.base+"/console/#/rules?api=demo"),
			waitJS(`document.querySelectorAll('#rules tbody tr[data-id]').length === 5`))
		type row struct{ Route, Subject, Desc, Limit, Burst string }
		got := js[[]row](t, ctx, `[...document.querySelectorAll('#rules tbody tr[data-id]')].map(r => ({
			Route: r.children[1].textContent, Subject: r.children[2].textContent, Desc: r.querySelector('td.desc').textContent,
			Limit: r.querySelector('[data-limit]').textContent, Burst: r.querySelector('[data-burst]').textContent}))`)
		if !slices.IsSortedFunc(got, func(a, b row) int { return cmp.Or(cmp.Compare(a.Route, b.Route), cmp.Compare(a.Subject, b.Subject)) }) {
			t.Errorf("rules of demo not sorted by route, then subject: %+v", got)
		}
		byRoute := map[string]row{}
		for _, r := range got {
			byRoute[r.Route+" "+r.Subject] = r
		}
		for _, tt := range []struct{ key, limit, burst, desc string }{
			{"* *", "10 / 1m", "10", "Every subject: 10 requests a minute on the whole demo API."}, // burst unset: the limit
			{"* partner-key", "plan partner: 100 / 1m", "100", "The partner key gets the partner plan instead of the API-wide default."},
			{"* " + subject, "1000 / 1y quota", "—", long},
			{"GET /items *", "20 / 1m", "30", long},
		} {
			r, ok := byRoute[tt.key]
			if !ok {
				t.Errorf("no row for %s in %+v", tt.key, got)
				continue
			}
			if r.Limit != tt.limit || r.Burst != tt.burst || r.Desc != tt.desc {
				t.Errorf("row %s = limit %q burst %q description %q; want %q %q %q", tt.key, r.Limit, r.Burst, r.Desc, tt.limit, tt.burst, tt.desc)
			}
		}
	})

	t.Run("top offenders", func(t *testing.T) {
		search := p.ruleByRoute(t, "demo", "GET /search")
		drive(t, ctx, "stats",
			chromedp.Navigate(p.base+"/console/#/stats"),
			waitShown(`#top-rules tr[data-rule="`+search.ID+`"] [data-rule-name]`))
		name := js[string](t, ctx, `document.querySelector('#top-rules tr[data-rule="`+search.ID+`"] td').textContent`)
		if want := "demo GET /search" + search.Description; name != want {
			t.Errorf("top rule named %q, want %q", name, want)
		}
		if w := js[[]string](t, ctx, `[...document.querySelectorAll('#window option')].map(o => o.value)`); !slices.Equal(w, []string{"1m", "5m", "15m"}) {
			t.Errorf("windows offered = %q, want 1m 5m 15m (sluice local keeps 15 minutes)", w)
		}
		checkChart(t, ctx)
		// Narrowed, the chart is drawn again at its new width (sooner
		// than the 5 s refresh).
		drive(t, ctx, "narrow the window", chromedp.EmulateViewport(400, 800),
			waitJSWithin(`Math.abs(document.getElementById('chart').viewBox.baseVal.width - document.getElementById('chart').getBoundingClientRect().width) <= 2`, 2*time.Second),
			chromedp.EmulateViewport(1100, 720))
		// Find a subject: its keyed hash (the server's, with the local
		// key) is marked in the list, and the page says where it is. The
		// subject stays out of the URL.
		hash := localSubjectHash(t, denied)
		drive(t, ctx, "find the denied subject",
			findSubject(denied),
			waitShown(`#top-subjects tr.found[data-subject="`+hash+`"] [data-found]`),
			waitShown(`#find-result[data-found="yes"]`))
		if got := js[string](t, ctx, `document.querySelector('#find-result').textContent`); !strings.Contains(got, denied) || !strings.Contains(got, "#") {
			t.Errorf("find result = %q, want it to name %s and its rank", got, denied)
		}
		if loc := value(t, ctx, "location", chromedp.Location()); strings.Contains(loc, denied) {
			t.Errorf("the subject found is in the URL: %s", loc)
		}
		if n := js[int](t, ctx, `document.querySelectorAll('#top-subjects tr.found').length`); n != 1 {
			t.Errorf("%d rows marked, want 1", n)
		}
		// It stays marked across the 5 s refresh.
		drive(t, ctx, "still marked after a refresh", chromedp.Sleep(5500*time.Millisecond),
			waitShown(`#top-subjects tr.found[data-subject="`+hash+`"]`))
		drive(t, ctx, "find a subject never denied",
			findSubject("never-denied-"+testenv.Random(t)),
			chromedp.WaitVisible(css(`#find-result[data-found="no"]`)))
		if n := js[int](t, ctx, `document.querySelectorAll('#top-subjects tr.found').length`); n != 0 {
			t.Errorf("%d rows marked for a subject never denied, want 0", n)
		}
		drive(t, ctx, "a window past the backend's",
			chromedp.Navigate(p.base+"/console/#/stats?window=1h"),
			chromedp.WaitVisible(css(`[data-error-for="window"]`)),
			waitJS(`document.querySelectorAll('#window option').length === 4`))
	})

	t.Run("subject", func(t *testing.T) {
		drive(t, ctx, "a subject with a yearly quota",
			chromedp.Navigate(p.base+"/console/#/subject?s="+url.QueryEscape(subject)+"&api=demo&route=GET%20%2Fhello"),
			chromedp.WaitVisible(css(`#limits tr[data-rule="`+quota.ID+`"] [data-refill]`)))
		next := time.Date(time.Now().UTC().Year()+1, 1, 1, 0, 0, 0, 0, time.UTC)
		if got, want := js[string](t, ctx, `document.querySelector('#limits tr[data-rule="`+quota.ID+`"] [data-refill]').textContent`),
			"resets "+next.Format("2006-01-02 15:04")+" UTC"; got != want {
			t.Errorf("the yearly quota's reset = %q, want %q", got, want)
		}
		api := p.ruleByRoute(t, "demo", "*")
		if got := js[string](t, ctx, `document.querySelector('#limits tr[data-rule="`+api.ID+`"] [data-refill]').textContent`); got != "full" {
			t.Errorf("an unused bucket's refill = %q, want full", got)
		}
		heads := js[[]string](t, ctx, `[...document.querySelectorAll('#limits th')].map(th => th.textContent)`)
		for _, hd := range heads {
			if !regexp.MustCompile(`^[A-Z][a-z]*( [a-z]+)*$`).MatchString(hd) {
				t.Errorf("subject column %q is not words (columns %q)", hd, heads)
			}
		}
		if !slices.Contains(heads, "Used") {
			t.Errorf("subject columns %q: no Used for the quota", heads)
		}
		// One request: the API-wide bucket is no longer full.
		p.get(t, "/hello", subject)
		drive(t, ctx, "refill after a request",
			waitJS(`document.querySelector('#limits tr[data-rule="`+api.ID+`"] [data-refill]').textContent.startsWith('full in ')`))
	})

	t.Run("history", func(t *testing.T) {
		drive(t, ctx, "history of an edited rule",
			chromedp.Navigate(p.base+"/console/#/history/rule/"+inline.ID),
			waitJS(`document.querySelectorAll('#history .entry').length === 3`))
		// Every entry's cells line up: one set of columns.
		lefts := js[[]string](t, ctx, `[...document.querySelectorAll('#history tr[data-field]')].map(r => [...r.children].map(td => Math.round(td.getBoundingClientRect().left) + '/' + Math.round(td.getBoundingClientRect().width)).join(' '))`)
		if len(slices.Compact(slices.Clone(lefts))) != 1 {
			t.Errorf("history rows have different columns: %q", lefts)
		}
		times := js[[]string](t, ctx, `[...document.querySelectorAll('#history .entry-head time')].map(e => e.textContent + '|' + (e.title ? 'title' : ''))`)
		for _, tm := range times {
			if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\|title$`).MatchString(tm) {
				t.Errorf("history time %q, want UTC RFC 3339 with the local time on hover", tm)
			}
		}
	})

	t.Run("400 px", func(t *testing.T) {
		drive(t, ctx, "narrow", chromedp.EmulateViewport(400, 800))
		defer drive(t, ctx, "wide again", chromedp.EmulateViewport(1100, 720))
		views := []struct{ name, hash, ready string }{
			{"rules", "#/rules", `#rules tbody tr[data-id]`},
			{"rule", "#/rules/" + inline.ID, `#rule-form`},
			{"new rule", "#/rules/new", `#rule-form`},
			{"deleted rule", "#/rules/" + gone.ID, `#gone`},
			{"plans", "#/plans", `#plans tr[data-name]`},
			{"plan", "#/plans/partner", `#plan-form`},
			{"history", "#/history/rule/" + inline.ID, `#history .entry`},
			{"history of a deleted rule", "#/history/rule/" + gone.ID, `#history .entry[data-action="delete"]`},
			{"subject form", "#/subject", `#subject-form`},
			{"subject", "#/subject?s=" + url.QueryEscape(subject) + "&api=demo", `#limits tr[data-rule="` + quota.ID + `"]`},
			{"stats", "#/stats", `#top-subjects tr[data-subject]`},
			{"stats error", "#/stats?window=1h", `[data-error-for="window"]`},
		}
		for _, v := range views {
			drive(t, ctx, v.name+" at 400 px",
				chromedp.Navigate(p.base+"/console/"+v.hash),
				chromedp.WaitVisible(css(v.ready)))
			checkNarrow(t, ctx, v.name)
			if v.name == "rules" || v.name == "subject" {
				shot(t, ctx, dir, "narrow-"+v.name, "")
			}
		}
		// Field errors and the conflict panel, on the rule form.
		drive(t, ctx, "field error at 400 px",
			chromedp.Navigate(p.base+"/console/#/rules/new"),
			waitJS(`document.querySelector('h1').textContent === 'New rule'`),
			setField("limit", "-1"), chromedp.Click(css(`#save`)),
			chromedp.WaitVisible(css(`[data-error-for="limit"]:not([hidden])`)))
		checkNarrow(t, ctx, "field error")
		drive(t, ctx, "conflict at 400 px",
			chromedp.Navigate(p.base+"/console/#/rules/"+inline.ID),
			waitJS(`document.querySelector('h1 code')?.textContent === `+strconv.Quote(inline.ID)),
			setField("limit", "21"))
		cli("rules", "put", "--id", inline.ID, "--limit", "22")
		drive(t, ctx, "save over theirs", chromedp.Click(css(`#save`)), chromedp.WaitVisible(css(`#conflict`)))
		checkNarrow(t, ctx, "conflict")
		drive(t, ctx, "stats chart at 400 px", chromedp.Navigate(p.base+"/console/#/stats"), chromedp.WaitVisible(css(`#chart`)))
		checkChart(t, ctx)
	})
}

// checkNarrow fails the test when the page is wider than the window: the
// reader would have to scroll sideways.
func checkNarrow(t *testing.T, ctx context.Context, view string) {
	t.Helper()
	type widths struct{ Scroll, Client int }
	w := js[widths](t, ctx, `({Scroll: document.scrollingElement.scrollWidth, Client: document.scrollingElement.clientWidth})`)
	if w.Scroll > w.Client {
		wide := js[[]string](t, ctx, `[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > document.scrollingElement.clientWidth + 1 && !e.closest('.scroll')).slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))`)
		t.Errorf("%s: the page is %d px wide in a %d px window (widest: %q)", view, w.Scroll, w.Client, wide)
	}
}

// checkChart fails the test when the chart is drawn at another width than
// it is shown at, which stretches its text.
func checkChart(t *testing.T, ctx context.Context) {
	t.Helper()
	type dims struct {
		ViewBox, Shown float64
		Aspect         string
	}
	d := js[dims](t, ctx, `(() => { const s = document.getElementById('chart'); return {ViewBox: s.viewBox.baseVal.width, Shown: s.getBoundingClientRect().width, Aspect: s.getAttribute('preserveAspectRatio') || ''}; })()`)
	if d.Aspect == "none" || math.Abs(d.ViewBox-d.Shown) > 2 {
		t.Errorf("chart drawn %.0f wide, shown %.0f wide (preserveAspectRatio %q): its text is stretched", d.ViewBox, d.Shown, d.Aspect)
	}
}

// ruleByRoute returns the rule of api and route for every subject.
func (p *localProc) ruleByRoute(t *testing.T, api, route string) rules.Rule {
	t.Helper()
	var page rules.Page
	p.adminJSON(t, http.MethodGet, "/admin/rules?api="+url.QueryEscape(api)+"&route="+url.QueryEscape(route)+"&subject=*", nil, http.StatusOK, &page)
	if len(page.Rules) != 1 {
		t.Fatalf("rules of %s %s: %d, want 1", api, route, len(page.Rules))
	}
	return page.Rules[0]
}

// postRule creates a rule through the admin API.
func (p *localProc) postRule(t *testing.T, r rules.Rule) rules.Rule {
	t.Helper()
	var created rules.Rule
	p.adminJSON(t, http.MethodPost, "/admin/rules", r, http.StatusCreated, &created)
	return created
}

// adminJSON sends body (nil: none) as JSON to the admin API with the
// token, wants status want and decodes the answer into out (nil: not).
func (p *localProc) adminJSON(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	resp, b := do(t, req)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// getRule reads a rule through the admin API.
func (p *localProc) getRule(t *testing.T, id string) rules.Rule {
	t.Helper()
	resp, body := p.adminGet(t, "/admin/rules/"+id)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET rule %s = %d %s", id, resp.StatusCode, body)
	}
	var r rules.Rule
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// putRule replaces a rule through the admin API with If-Match version.
func (p *localProc) putRule(t *testing.T, r rules.Rule, version int64) {
	t.Helper()
	b, _ := json.Marshal(r)
	req, _ := http.NewRequest(http.MethodPut, p.base+"/admin/rules/"+r.ID, strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("If-Match", fmt.Sprintf(`"%d"`, version))
	if resp, body := do(t, req); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT rule %s = %d %s", r.ID, resp.StatusCode, body)
	}
}

var consoleURL = regexp.MustCompile(`open\s+(http://\S+)/console/#token=(\S+)`)

// TestConsoleCommand runs `sluice console` against sluice local's admin
// API: its URL's token is required, the proxied calls reach the API with
// the CLI's credentials, and the browser shows the rules through it.
func TestConsoleCommand(t *testing.T) {
	t.Parallel()
	p := startLocal(t, nil)
	cmd := exec.Command(sluiceBin, "console", "--endpoint", p.base+"/admin")
	cmd.Env = append(os.Environ(), "SLUICE_ADMIN_TOKEN="+p.token)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &testenv.Buffer{}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		wg.Wait()
		if err := cmd.Wait(); err != nil {
			t.Errorf("sluice console after Ctrl-C: %v\n%s", err, out)
		}
	})
	found := make(chan []string, 1)
	wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(out, sc.Text())
			if m := consoleURL.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
			}
		}
	})
	var base, token string
	select {
	case m := <-found:
		base, token = m[1], m[2]
	case <-time.After(20 * time.Second):
		t.Fatalf("sluice console printed no URL:\n%s", out)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") || token == p.token {
		t.Errorf("console at %s with token %q, want loopback and a token of its own", base, token)
	}

	get := func(auth string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/admin/rules", nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, _ := do(t, req)
		return resp.StatusCode
	}
	for _, tt := range []struct {
		name, auth string
		want       int
	}{{"no token", "", 401}, {"sluice local's token", p.token, 401}, {"the run's token", token, 200}} {
		if got := get(tt.auth); got != tt.want {
			t.Errorf("GET /admin/rules through the console with %s = %d, want %d", tt.name, got, tt.want)
		}
	}

	ctx := browser(t, 30*time.Second)
	drive(t, ctx, "open the console through sluice console",
		chromedp.Navigate(base+"/console/#token="+token),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id]`)))
	rows := value(t, ctx, "rule rows", chromedp.Nodes(chromedp.CSSAll(`#rules tbody tr[data-id]`)))
	if len(rows) == 0 {
		t.Errorf("the console through sluice console lists no rules")
	}
	// The header names the stack the operator acts on: the endpoint the
	// proxy forwards to, not the console's own /admin.
	drive(t, ctx, "the header shows the upstream", chromedp.WaitVisible(css(`#endpoint[data-upstream]`)))
	if got, want := js[string](t, ctx, `document.getElementById('endpoint').textContent`), "admin API "+p.base+"/admin"; got != want {
		t.Errorf("console header through sluice console = %q, want %q", got, want)
	}
}
