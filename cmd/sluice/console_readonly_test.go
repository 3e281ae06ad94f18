package main

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestConsoleReadOnly opens the console with sluice local's read-only
// token: rules and plans show, every write action is hidden, and the
// header says read-only. With the admin token the same pages offer them.
func TestConsoleReadOnly(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t)
	const reader = "console-read-only-token"
	p := startLocal(t, []string{"SLUICE_READ_TOKEN=" + reader})
	ctx := browser(t, 60*time.Second)
	drive(t, ctx, "open the console read-only",
		chromedp.Navigate(p.base+"/console/#token="+reader),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id]`)),
		waitJS(`document.body.classList.contains('read-only')`))
	if js[bool](t, ctx, `getComputedStyle(document.getElementById('new-rule')).display !== 'none'`) {
		t.Error("a read-only operator is offered New rule")
	}
	if got := js[string](t, ctx, `document.getElementById('read-only').textContent`); got != "read-only" {
		t.Errorf("header says %q, want read-only", got)
	}
	id := js[string](t, ctx, `document.querySelector('#rules tbody tr[data-id]').dataset.id`)
	drive(t, ctx, "open a rule", chromedp.Navigate(p.base+"/console/#/rules/"+id), chromedp.WaitVisible(css(`#rule-form`)))
	for _, sel := range []string{"#save", "#delete"} {
		if js[bool](t, ctx, `(e => e && getComputedStyle(e).display !== 'none')(document.querySelector('`+sel+`'))`) {
			t.Errorf("a read-only operator is offered %s", sel)
		}
	}

	// The admin token: the probe answers 200 and nothing is hidden.
	admin := browser(t, 60*time.Second)
	drive(t, admin, "open the console as admin",
		chromedp.Navigate(p.base+"/console/#token="+p.token),
		chromedp.WaitVisible(css(`#new-rule`)),
		waitJS(`document.body.dataset.writeProbe === 'done'`))
	if js[bool](t, admin, `document.body.classList.contains('read-only')`) {
		t.Error("the admin is shown the console read-only")
	}
}
