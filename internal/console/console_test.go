package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/console"
)

// MaxSize is the page weight budget: every embedded file, uncompressed.
const MaxSize = 200 << 10

func TestPageWeight(t *testing.T) {
	n, err := console.Size()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("console page weight: %d bytes uncompressed (budget %d)", n, MaxSize)
	if n <= 0 || n >= MaxSize {
		t.Errorf("console.Size() = %d bytes, want 1 to %d", n, MaxSize-1)
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/console", console.Handler()))
	defer srv.Close()
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	tests := []struct {
		path, status, ctype string
	}{
		{"/console/", "200", "text/html"},
		{"/console/index.html", "200", "text/html"},
		{"/console/console.js", "200", "text/javascript"},
		{"/console/console.css", "200", "text/css"},
		{"/console/nope.js", "404", ""},
		{"/console/../go.mod", "404", ""},
	}
	for _, tt := range tests {
		resp, _ := get(tt.path)
		if got := resp.Status[:3]; got != tt.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.ctype) {
			t.Errorf("GET %s = %s %s, want %s %s", tt.path, resp.Status, resp.Header.Get("Content-Type"), tt.status, tt.ctype)
		}
		if tt.status == "200" && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'self'") {
			t.Errorf("GET %s: CSP %q, want connect-src 'self'", tt.path, resp.Header.Get("Content-Security-Policy"))
		}
	}
	resp, err := http.Post(srv.URL+"/console/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /console/ = %d, want 405", resp.StatusCode)
	}
}

// TestNoExternalRequests: nothing in the assets names another origin, so
// the console works offline and leaks nothing (the CSP enforces it in the
// browser; this catches it before).
func TestNoExternalRequests(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for _, name := range []string{"index.html", "console.js", "console.css"} {
		srv := httptest.NewServer(console.Handler())
		resp, err := http.Get(srv.URL + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		for _, m := range external.FindAllString(string(b), -1) {
			// The SVG and XHTML namespaces are names, never fetched.
			if m == "http://www.w3.org" {
				continue
			}
			t.Errorf("%s refers to %s", name, m)
		}
	}
}

// TestScriptParses runs the script through node's parser when node is
// installed (it is where the CDK CLI runs): a syntax error fails here
// rather than in the browser tests.
func TestScriptParses(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	out, err := exec.Command(node, "--check", "assets/console.js").CombinedOutput()
	if err != nil {
		t.Errorf("node --check console.js: %v\n%s", err, out)
	}
}
