package main

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeTour checks the README tour's outputs against what `sluice
// local` prints and answers today: the banner block after `$ make run`,
// and the 429 after the fourth request, line by line, "…" standing for
// what differs at each run (tokens, ports, rule ids).
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	p := startLocal(t, []string{"SLUICE_ADMIN_TOKEN="}) // a generated token, as make run has
	// The banner, with this run's address where the README has 8080.
	// The seed path as run from the repository root.
	banner := strings.NewReplacer(p.base, "http://127.0.0.1:8080", "../../examples/", "examples/").Replace(p.out.String())

	want := block(t, string(readme), "$ make run")
	checkLines(t, "the banner", want, strings.Split(banner, "\n"))
	curls := 0
	for _, l := range strings.Split(banner, "\n") {
		if strings.HasPrefix(l, "  curl ") {
			curls++
		}
	}
	if w := spell(curls) + " curl lines"; !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), w) {
		t.Errorf("README.md does not say %q: the banner prints %d curl lines", w, curls)
	}

	for range 3 {
		p.get(t, "/search", "alice")
	}
	resp, body := p.get(t, "/search", "alice")
	got := []string{"HTTP/1.1 " + resp.Status}
	for k, vs := range resp.Header {
		for _, v := range vs {
			got = append(got, k+": "+v)
		}
	}
	if len(body) == 0 {
		t.Fatal("the 429 has no body")
	}
	want = block(t, string(readme), "$ curl -i -H 'x-api-key: alice' http://127.0.0.1:8080/search")
	checkLines(t, "the 429", want, got)

	// docs/local.md's tour of the HTTP API's and the service's real 429s.
	localDoc, err := os.ReadFile("../../docs/local.md")
	if err != nil {
		t.Fatal(err)
	}
	// One block shows the service's; the HTTP API's is the same but for
	// API Gateway's request id, as the doc says.
	want = block(t, string(localDoc), "$ curl -i -H 'x-api-key: alice' http://127.0.0.1:8080/service/search")
	for _, path := range []string{"/httpapi/search", "/service/search"} {
		for range 3 {
			p.get(t, path, "alice")
		}
		resp, _ := p.get(t, path, "alice")
		if resp.Header.Get("Apigw-Requestid") == "" && path == "/httpapi/search" {
			t.Error("the HTTP API's 429 has no Apigw-Requestid")
		}
		resp.Header.Del("Apigw-Requestid")
		checkLines(t, "docs/local.md: the 429 of "+path, want, responseLines(resp))
	}
}

// responseLines is resp's status line and header lines, as curl -i
// prints them.
func responseLines(resp *http.Response) []string {
	got := []string{"HTTP/1.1 " + resp.Status}
	for k, vs := range resp.Header {
		for _, v := range vs {
			got = append(got, k+": "+v)
		}
	}
	return got
}

// block returns the lines after the line start in the first console block
// that has it, up to the next command or the end of the block.
func block(t *testing.T, doc, start string) []string {
	t.Helper()
	i := strings.Index(doc, "\n"+start+"\n")
	if i < 0 {
		t.Fatalf("the document has no line %q", start)
	}
	var out []string
	for _, l := range strings.Split(doc[i+len(start)+2:], "\n") {
		if strings.HasPrefix(l, "$ ") || strings.HasPrefix(l, "```") {
			break
		}
		out = append(out, l)
	}
	return out
}

// checkLines wants each line of want (a lone "…" ends the check; "…"
// inside a line matches anything) to match a line of got; header names
// compare without case, as HTTP's do.
func checkLines(t *testing.T, what string, want, got []string) {
	t.Helper()
	for _, w := range want {
		if w == "…" {
			return
		}
		parts := strings.Split(w, "…")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		re := regexp.MustCompile("(?i)^" + strings.Join(parts, ".*") + "$")
		found := false
		for _, g := range got {
			found = found || re.MatchString(g)
		}
		if !found {
			t.Errorf("%s: the document shows %q; sluice local prints no such line:\n%s", what, w, strings.Join(got, "\n"))
		}
	}
}
