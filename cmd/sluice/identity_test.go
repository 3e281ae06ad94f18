package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestLocalSubjectHygiene: through sluice local and the CLI, a doubled or oversized
// x-api-key is 401, and `rules put --dimension ip` adds a per-IP floor that
// holds whatever key is sent.
func TestLocalSubjectHygiene(t *testing.T) {
	t.Parallel()
	p := startLocal(t, []string{"DIMENSIONS=ip=ip"})
	req, _ := http.NewRequest(http.MethodGet, p.base+"/hello", nil)
	req.Header.Add("x-api-key", "alice")
	req.Header.Add("x-api-key", "bob")
	if resp, body := do(t, req); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("two x-api-key lines = %d %s, want 401", resp.StatusCode, body)
	}
	if resp, body := p.get(t, "/hello", strings.Repeat("k", 257)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("257-byte x-api-key = %d %s, want 401", resp.StatusCode, body)
	}

	if _, stderr, code := p.cli(t, "rules", "put", "--api", "demo", "--route", "GET /items", "--subject", "*",
		"--limit", "2", "--period", "1m", "--dimension", "ip"); code != 0 {
		t.Fatalf("rules put --dimension ip = exit %d: %s", code, stderr)
	}
	// The default dimension's rule on the same scope is another rule.
	if _, stderr, code := p.cli(t, "rules", "put", "--api", "demo", "--route", "GET /items", "--subject", "*",
		"--limit", "100", "--period", "1m"); code != 0 {
		t.Fatalf("rules put (default dimension, same scope) = exit %d: %s", code, stderr)
	}
	// Wait for the rule to load (poll 250ms), then three fresh keys from
	// one IP: the floor of 2 denies the third.
	probe := 0
	testenv.Await(t, 10*time.Second, 100*time.Millisecond, "the per-IP floor denying fresh keys", func() bool {
		probe++
		resp, _ := p.get(t, "/items", "probe-"+strconv.Itoa(probe))
		return resp.StatusCode == http.StatusTooManyRequests
	})
	// The CLI sees and resets the IP's floor through --dimension.
	out, stderr, code := p.cli(t, "subjects", "limits", "127.0.0.1", "--api", "demo", "--route", "GET /items", "--dimension", "ip", "-o", "json")
	if code != 0 || !strings.Contains(out, `"remaining": 0`) && !strings.Contains(out, `"remaining":0`) {
		t.Errorf("subjects limits 127.0.0.1 --dimension ip = exit %d, %s %s; want the floor at 0", code, out, stderr)
	}
	if _, stderr, code := p.cli(t, "subjects", "reset", "127.0.0.1", "--dimension", "ip"); code != 0 {
		t.Fatalf("subjects reset --dimension ip = exit %d: %s", code, stderr)
	}
	if resp, body := p.get(t, "/items", "after-reset"); resp.StatusCode != http.StatusOK {
		t.Errorf("a fresh key after the floor's reset = %d %s, want 200", resp.StatusCode, body)
	}
	if _, stderr, code := p.cli(t, "subjects", "limits", "127.0.0.1", "--dimension", "Bad!"); code == 0 || !strings.Contains(stderr, "dimension") {
		t.Errorf("subjects limits --dimension Bad! = exit %d, %s; want an error naming dimension", code, stderr)
	}
}
