package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// stepTimeout bounds one drive or value call.
const stepTimeout = 15 * time.Second

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
	dir := t.TempDir()
	if os.Getenv(screenshotsVar) == "1" {
		dir = filepath.Join("..", "..", "docs", "img")
	}
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

	// Edit.
	drive(t, ctx, "edit",
		setField("limit", "6"),
		clearFlash,
		chromedp.Click(css(`#save`)),
		chromedp.WaitVisible(css(`[data-flash="ok"]`)),
		chromedp.WaitReady(css(`#version`)))
	if rule = p.getRule(t, id); *rule.Limit != 6 || rule.Version != 2 {
		t.Fatalf("edited rule = limit %d version %d, want 6 at version 2", *rule.Limit, rule.Version)
	}

	// Conflict: someone else saves version 3 through the API while the
	// form still holds version 2.
	drive(t, ctx, "reload the form", chromedp.Reload(), chromedp.WaitVisible(css(`#rule-form`)))
	rule.Description = "changed elsewhere"
	rule.Limit = new(int64(7))
	p.putRule(t, rule, 2)
	drive(t, ctx, "save over a concurrent edit",
		setField("burst", "9"),
		chromedp.Click(css(`#save`)),
		chromedp.WaitVisible(css(`#conflict tr[data-field="description"]`)),
		chromedp.WaitVisible(css(`#conflict tr[data-field="limit"]`)))
	shot(t, ctx, dir, "conflict", "h1")
	drive(t, ctx, "reapply",
		clearFlash,
		chromedp.Click(css(`#reapply`)),
		chromedp.WaitNotPresent(css(`#conflict`)),
		chromedp.WaitVisible(css(`[data-flash="ok"]`)))
	if rule = p.getRule(t, id); rule.Version != 4 || rule.Burst == nil || *rule.Burst != 9 || *rule.Limit != 6 {
		t.Fatalf("reapplied rule = %+v, want version 4 with the operator's burst 9 and limit 6", rule)
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

	// Delete.
	drive(t, ctx, "delete",
		chromedp.Navigate(p.base+"/console/#/rules/"+id),
		chromedp.WaitVisible(css(`#delete`)),
		acceptConfirms, clearFlash,
		chromedp.Click(css(`#delete`)),
		chromedp.WaitVisible(css(`#rules`)),
		chromedp.WaitVisible(css(`[data-flash="ok"]`)))
	if resp, _ := p.adminGet(t, "/admin/rules/"+id); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET the deleted rule = %d, want 404", resp.StatusCode)
	}

	// A plan: create, then its history and delete.
	plan := "console-" + testenv.Random(t)
	drive(t, ctx, "create a plan",
		chromedp.Navigate(p.base+"/console/#/plans"),
		chromedp.Click(css(`#new-plan`)),
		setIn("plan-form", "name", plan), setIn("plan-form", "limit", "50"), setIn("plan-form", "period", "1h"),
		clearFlash,
		chromedp.Click(css(`#save`)),
		chromedp.WaitVisible(css(`#version`)),
		chromedp.Navigate(p.base+"/console/#/history/plan/"+plan),
		chromedp.WaitVisible(css(`#history .entry[data-action="create"] tr[data-field="limit"]`)),
		chromedp.Navigate(p.base+"/console/#/plans/"+plan),
		chromedp.WaitVisible(css(`#delete`)),
		acceptConfirms, clearFlash,
		chromedp.Click(css(`#delete`)),
		chromedp.WaitVisible(css(`#plans`)),
		chromedp.WaitVisible(css(`[data-flash="ok"]`)))
	if resp, _ := p.adminGet(t, "/admin/plans/"+plan); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET the deleted plan = %d, want 404", resp.StatusCode)
	}

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
		chromedp.WaitVisible(css(`#top-subjects tr[data-subject="`+hash+`"]`)),
		chromedp.WaitVisible(css(`#chart rect[data-kind="denied"]`)))
	shot(t, ctx, dir, "stats", "")
	// A window the in-process counts cannot answer: the API's 400, shown.
	drive(t, ctx, "stats window 1h",
		chromedp.SetValue(css(`#window`), "1h"),
		evaluate(`document.getElementById('window').dispatchEvent(new Event('change'))`),
		chromedp.WaitVisible(css(`[data-error-for="window"]`)))
	t.Logf("browser flows took %v", time.Since(start).Round(time.Millisecond))
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
}
