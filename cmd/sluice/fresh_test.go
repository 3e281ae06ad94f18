package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestLocalBlockAfterQuiet: a person runs `sluice local`, sends a request,
// leaves it alone for 3 s, blocks the subject through the admin API (limit
// 0), and sends the next request: it is denied. Before, it was let through
// on the rules held since before the quiet spell (the cache checked the
// version only in the background of that very request): 200, then 429.
func TestLocalBlockAfterQuiet(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := startLocal(t, b.env(t), b.extra(t)...)
			subject := "quiet-" + testenv.Random(t)
			if resp, body := p.get(t, "/hello", subject); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /hello = %d %s, want 200", resp.StatusCode, body)
			}

			time.Sleep(3 * time.Second) // sleep: the quiet spell the binary's rule cache must not trust through
			if resp, body := p.post(t, "/admin/rules", "Bearer "+p.token,
				`{"api":"demo","route":"*","subject":"`+subject+`","limit":0,"period":"1m"}`); resp.StatusCode != http.StatusCreated {
				t.Fatalf("POST /admin/rules (block) = %d %s", resp.StatusCode, body)
			}
			written := time.Now()
			resp, body := p.get(t, "/hello", subject)
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("first request after 3 s of quiet and a block = %d %s, want 429", resp.StatusCode, body)
			}
			t.Logf("denied %v after the block was written", time.Since(written).Round(time.Millisecond))
		})
	}
}
