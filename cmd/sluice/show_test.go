package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestConsoleShownSubjects: with SUBJECT_SHOW naming the ip source (and,
// in vain, no credential: config refuses those), sluice local's top
// denied subjects show an IP as sent, in GET /admin/stats ("shown"), in
// the decision log line and in the console, and an API key only as its
// hash: the key is in no log line, no /stats answer, no page.
func TestConsoleShownSubjects(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t)
	p := startLocal(t, []string{"SUBJECT_SOURCES=header:x-api-key,ip", "SUBJECT_SHOW=ip", "LOG_LEVEL=info"})
	key := "secret-key-" + testenv.Random(t)
	// GET /search allows 3 a minute: the fourth of each is denied.
	for range 4 {
		p.get(t, "/search", key)
		p.get(t, "/search", "")
	}
	const ip = "127.0.0.1"

	var rep admin.StatsResponse
	p.adminJSON(t, "GET", "/admin/stats", nil, 200, &rep)
	shown := map[string]string{}
	for _, s := range rep.Subjects {
		shown[s.Subject] = s.Shown
	}
	if shown[localSubjectHash(t, ip)] != ip {
		t.Errorf("GET /admin/stats subjects = %+v, want the IP's entry shown as %s", rep.Subjects, ip)
	}
	if s, ok := shown[localSubjectHash(t, key)]; !ok || s != "" {
		t.Errorf("GET /admin/stats subjects = %+v, want the key's entry by hash alone", rep.Subjects)
	}
	_, body := p.adminGet(t, "/admin/stats")
	if strings.Contains(string(body), key) {
		t.Errorf("GET /admin/stats holds the API key: %s", body)
	}

	// sluice stats adds an AS SENT column, the IP in it, the key not.
	out, stderr, code := p.cli(t, "stats")
	if code != 0 || !strings.Contains(out, "AS SENT") || !strings.Contains(out, ip) || strings.Contains(out, key) {
		t.Errorf("sluice stats = exit %d\n%s%s\nwant an AS SENT column with %s, and no API key", code, out, stderr, ip)
	}

	ctx := browser(t, 60*time.Second)
	drive(t, ctx, "top offenders",
		chromedp.Navigate(p.base+"/console/#token="+p.token),
		chromedp.WaitVisible(css(`#rules tbody tr[data-id]`)),
		chromedp.Navigate(p.base+"/console/#/stats"),
		chromedp.WaitVisible(css(`#top-subjects tr[data-subject="`+localSubjectHash(t, key)+`"]`)),
		chromedp.WaitVisible(css(`#top-subjects tr[data-subject="`+localSubjectHash(t, ip)+`"] [data-shown]`)))
	if got := js[[]string](t, ctx, `[...document.querySelectorAll('#top-subjects [data-shown]')].map(e => e.textContent.trim())`); len(got) != 1 || got[0] != ip {
		t.Errorf("subjects shown as sent in the console = %q, want only %s", got, ip)
	}
	if js[bool](t, ctx, `document.body.innerText.includes(`+"`"+key+"`"+`)`) {
		t.Errorf("the console page shows the API key")
	}

	logs := p.out.String()
	if strings.Contains(logs, key) {
		t.Errorf("sluice local's log holds the API key:\n%s", logs)
	}
	if !strings.Contains(logs, `"subject":"`+ip+`"`) {
		t.Errorf("no decision line shows the IP as sent (\"subject\":%q):\n%s", ip, logs)
	}
}
