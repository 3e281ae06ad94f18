package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/testenv"
)

// retryAfter GETs path as subject and returns the status and Retry-After
// in seconds (0 when absent).
func (p *localProc) retryAfter(t *testing.T, path, subject string) (int, int) {
	t.Helper()
	resp, _ := p.get(t, path, subject)
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	return resp.StatusCode, ra
}

// TestConsoleIncident is the on-call engineer's hour in headless Chromium
// against sluice local: a subject sending its API key is denied; from Top
// offenders (a hash, found by the key) to its view, which says which rule
// denies and when it frees; a block of 15 minutes with a reason, whose
// 429 says when it ends; the audit log keeps the reason; Unblock undoes
// it. Focus follows the view and the invalid field; the skip link and the
// links' names are checked on the way.
func TestConsoleIncident(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t)
	p := startLocal(t, nil)
	mallory := "mallory-" + testenv.Random(t)
	for range 4 {
		p.get(t, "/search", mallory) // the 4th is denied (3 a minute)
	}
	ctx := browser(t, 120*time.Second)
	drive(t, ctx, "open the console", chromedp.Navigate(p.base+"/console/#token="+p.token),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id]`)))
	if got := js[string](t, ctx, `document.querySelector('#rules a[data-edit]').getAttribute('aria-label')`); !strings.HasPrefix(got, "Edit rule demo ") {
		t.Errorf("an edit link is named %q, want Edit rule and the rule", got)
	}
	drive(t, ctx, "skip to the content", evaluate(`document.getElementById('skip').click()`))
	if got := js[string](t, ctx, `document.activeElement.textContent`); got != "Rules" {
		t.Errorf("the skip link focuses %q, want the view's heading Rules", got)
	}

	// Top offenders: the key is a hash until found; found, it opens.
	hash := localSubjectHash(t, mallory)
	drive(t, ctx, "find the subject", chromedp.Navigate(p.base+"/console/#/stats"),
		waitShown(`#top-subjects tr[data-subject="`+hash+`"]`), findSubject(mallory),
		waitShown(`#top-subjects tr[data-subject="`+hash+`"] a[data-open]`))
	if got := js[string](t, ctx, `document.querySelector('#top-subjects a[data-open]').getAttribute('aria-label')`); got != "Open subject "+mallory+" to block it" {
		t.Errorf("the open link is named %q", got)
	}
	drive(t, ctx, "open the subject", evaluate(`document.querySelector('#top-subjects a[data-open]').click()`),
		waitShown(`#limits-table tr[data-rule] [data-denies="yes"]`))
	if loc := value(t, ctx, "location", chromedp.Location()); strings.Contains(loc, mallory) {
		t.Errorf("the found key is in the URL: %s", loc)
	}
	if got := js[string](t, ctx, `document.activeElement.tagName + ' ' + document.activeElement.textContent`); got != "H1 Subject "+mallory {
		t.Errorf("focus after opening the subject is on %q, want its heading", got)
	}
	if got := js[string](t, ctx, `document.querySelector('[data-denies="yes"]').textContent`); !strings.HasPrefix(got, "denies, frees ") {
		t.Errorf("the denying rule says %q, want when it frees", got)
	}

	// Block 15 min: without a reason, the focus goes to it.
	drive(t, ctx, "block without a reason", evaluate(`document.getElementById('block-15m').click()`),
		waitShown(`[data-error-for="reason"]:not([hidden])`))
	if got := js[string](t, ctx, `document.activeElement.id`); got != "block-reason" {
		t.Errorf("focus after a missing reason is on #%s, want #block-reason", got)
	}
	drive(t, ctx, "block for 15 min", setIn("block-form", "reason", "credential stuffing, ticket 42"),
		evaluate(`document.getElementById('block-15m').click()`), waitShown(`[data-unblock]`))
	if code, ra := p.retryAfter(t, "/hello", mallory); code != http.StatusTooManyRequests || ra < 890 || ra > 901 {
		t.Errorf("GET /hello when blocked for 15 min = %d, Retry-After %d, want 429, about 900", code, ra)
	}
	id := js[string](t, ctx, `document.querySelector('[data-unblock]').dataset.unblock`)
	row := js[string](t, ctx, `document.querySelector('tr[data-rule="`+id+`"] [data-denies]').textContent`)
	if !strings.HasPrefix(row, "denies, frees ") || !strings.Contains(row, "(in 15 min)") {
		t.Errorf("the block says %q, want it frees in 15 min", row)
	}
	var h admin.HistoryResponse
	p.adminJSON(t, http.MethodGet, "/admin/rules/"+id+"/history", nil, http.StatusOK, &h)
	if len(h.Entries) != 1 || !strings.Contains(string(h.Entries[0].After), "credential stuffing, ticket 42") {
		t.Errorf("the block's audit log = %+v, want its creation with the reason", h.Entries)
	}

	// Undo, from the same place.
	drive(t, ctx, "unblock", acceptConfirms, evaluate(`document.querySelector('[data-unblock]').click()`),
		chromedp.WaitNotPresent(css(`[data-unblock]`)), chromedp.WaitVisible(css(`[data-flash="ok"]`)))
	if code, _ := p.retryAfter(t, "/hello", mallory); code != http.StatusOK {
		t.Errorf("GET /hello after Unblock = %d, want 200", code)
	}
}

// TestCLIIncident blocks and unblocks with the built binary: the block
// ends when asked, says so, shows in subjects limits, and unblock ends it.
func TestCLIIncident(t *testing.T) {
	t.Parallel()
	p := startLocal(t, nil)
	dir := t.TempDir()
	s := "eve-" + testenv.Random(t)
	p.wantExit(t, dir, 2, "subjects", "block", s, "--reason", "x")                                                   // neither --for nor --until
	p.wantExit(t, dir, 2, "subjects", "block", s, "--for", "1h", "--until", "2099-01-01T00:00:00Z", "--reason", "x") // both
	out := p.wantExit(t, dir, 0, "subjects", "block", s, "--api", "demo", "--for", "1h", "--reason", "scraping")
	if !strings.Contains(out, "blocked "+s+" on api demo until ") {
		t.Errorf("subjects block says:\n%s", out)
	}
	if code, ra := p.retryAfter(t, "/hello", s); code != http.StatusTooManyRequests || ra < 3590 || ra > 3601 {
		t.Errorf("GET /hello when blocked for 1 h = %d, Retry-After %d, want 429, about 3600", code, ra)
	}
	// Blocking again moves the end, on the same rule.
	p.wantExit(t, dir, 0, "subjects", "block", s, "--api", "demo", "--for", "15m", "--reason", "scraping, shorter")
	if _, ra := p.retryAfter(t, "/hello", s); ra < 890 || ra > 901 {
		t.Errorf("Retry-After after moving the block to 15 min = %d, want about 900", ra)
	}
	if out := p.wantExit(t, dir, 0, "subjects", "limits", s, "--api", "demo"); !strings.Contains(out, "DENIES") || strings.Count(out, "until 20") != 1 {
		t.Errorf("subjects limits of a blocked subject does not say until when:\n%s", out)
	}
	out = p.wantExit(t, dir, 0, "subjects", "unblock", s)
	if strings.Count(out, "deleted block ") != 1 {
		t.Errorf("subjects unblock says:\n%s", out)
	}
	if code, _ := p.retryAfter(t, "/hello", s); code != http.StatusOK {
		t.Errorf("GET /hello after unblock = %d, want 200", code)
	}
	p.wantExit(t, dir, 1, "subjects", "unblock", s) // nothing left to end
}
