package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestInFlightShows: a concurrency rule made through the admin API of
// sluice local, a slot held through its check API; the built binary's
// subjects limits and the console's subject view (headless Chromium) both
// say how many are in flight of the limit; a release frees it.
func TestInFlightShows(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t)
	p := startLocal(t, nil)
	dir := t.TempDir()
	p.adminJSON(t, http.MethodPost, "/admin/rules", map[string]any{
		"api": "demo", "route": "POST /exports", "subject": "*", "kind": "concurrency", "limit": 2, "period": "15m",
	}, http.StatusCreated, nil)
	s := "dana-" + testenv.Random(t)
	var held struct{ Slot string }
	testenv.Await(t, 10*time.Second, 50*time.Millisecond, "the check takes a slot", func() bool {
		p.adminJSON(t, http.MethodPost, "/admin/check", map[string]any{"subject": s, "api": "demo", "route": "POST /exports"}, http.StatusOK, &held)
		return held.Slot != ""
	})
	out := p.wantExit(t, dir, 0, "subjects", "limits", s, "--api", "demo", "--route", "POST /exports")
	if !strings.Contains(out, "1 in flight of 2, ttl 15m") {
		t.Errorf("subjects limits says:\n%s\nwant 1 in flight of 2", out)
	}
	out = p.wantExit(t, dir, 0, "rules", "ls", "--api", "demo")
	if !strings.Contains(out, "2 in flight, ttl 15m") {
		t.Errorf("rules ls says:\n%s\nwant the concurrency rule's limit", out)
	}

	ctx := browser(t, 60*time.Second)
	drive(t, ctx, "open the subject", chromedp.Navigate(p.base+"/console/#token="+p.token),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id]`)),
		chromedp.Navigate(p.base+"/console/#/subject?s="+s+"&api=demo&route=POST%20%2Fexports"),
		waitShown(`#limits-table [data-in-flight="1"]`))
	if got := js[string](t, ctx, `document.querySelector('#limits-table [data-in-flight="1"]').textContent`); got != "1 of 2" {
		t.Errorf("the console's In flight cell says %q, want 1 of 2", got)
	}

	p.adminJSON(t, http.MethodPost, "/admin/check", map[string]any{"release": held.Slot}, http.StatusNoContent, nil)
	out = p.wantExit(t, dir, 0, "subjects", "limits", s, "--api", "demo", "--route", "POST /exports")
	if !strings.Contains(out, "0 in flight of 2") {
		t.Errorf("after the release subjects limits says:\n%s", out)
	}
}
