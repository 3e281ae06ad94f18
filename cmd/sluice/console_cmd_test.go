package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestConsoleCredentials: `sluice console` says which credentials it calls
// the admin API with (none, when no token is set) and the endpoint; a
// browser without its URL's token gets a 401 that names `sluice console`,
// not `sluice local`.
func TestConsoleCredentials(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		token, want string
	}{
		{"", "admin API  http://127.0.0.1:1/admin  (no credentials: neither --token nor SLUICE_ADMIN_TOKEN is set, so sluice local will answer 401)"},
		{"tok", "admin API  http://127.0.0.1:1/admin  (bearer token from --token or SLUICE_ADMIN_TOKEN)"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		r, w := io.Pipe()
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, &env{stdout: w, stderr: io.Discard, getenv: environ("SLUICE_ADMIN_TOKEN=" + tt.token)},
				[]string{"console", "--endpoint", "http://127.0.0.1:1/admin"})
			w.Close()
		}()
		var banner strings.Builder
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			banner.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Ctrl-C stops") {
				break
			}
		}
		go io.Copy(io.Discard, r) //nolint:errcheck // nothing more is printed
		if !strings.Contains(banner.String(), tt.want) {
			t.Errorf("sluice console (token %q) printed:\n%s\nwant %q", tt.token, banner.String(), tt.want)
		}
		m := regexp.MustCompile(`open\s+(http://\S+)/console/`).FindStringSubmatch(banner.String())
		if m == nil {
			cancel()
			t.Fatalf("no console URL in:\n%s", banner.String())
		}
		resp, err := http.Get(m[1] + "/admin/rules")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "`sluice console` printed") || strings.Contains(string(body), "sluice local") {
			t.Errorf("GET /admin/rules without the console's token = %d %s, want a 401 naming sluice console", resp.StatusCode, body)
		}
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("sluice console after Ctrl-C = exit %d, want 0", code)
			}
		case <-time.After(10 * time.Second):
			t.Error("sluice console did not stop within 10s")
		}
	}
}
