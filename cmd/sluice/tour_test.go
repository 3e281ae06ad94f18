package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestTourPastedWhole runs the README tour's steps back to back, as a
// reader pasting them as one block does: a check call (which loads the
// rules in the authorizer's cache), `rules put` raising GET /search to 6 a
// minute, seven requests at once, then `subjects reset` and one more. In
// sluice local an admin write holds before it answers, so the codes are
// the same every time; three rounds, each on its own subject.
func TestTourPastedWhole(t *testing.T) {
	t.Parallel()
	p := startLocal(t, nil)
	auth := "Bearer " + p.token
	for round, limit := range []int{6, 8, 5} {
		subject := fmt.Sprintf("carol-%d", round)
		if resp, body := p.post(t, "/admin/check", auth, `{"subject":"bob","api":"demo","route":"GET /search"}`); resp.StatusCode != 200 {
			t.Fatalf("POST /admin/check = %s %s, want 200", resp.Status, body)
		}
		out, errOut, code := p.cli(t, "rules", "put", "--api", "demo", "--route", "GET /search", "--subject", "*",
			"--limit", fmt.Sprint(limit), "--period", "1m")
		if code != 0 {
			t.Fatalf("rules put = exit %d, want 0; stderr:\n%s", code, errOut)
		}
		if !strings.Contains(out, fmt.Sprintf("%d/1m", limit)) {
			t.Fatalf("rules put printed %q, want the rule at %d/1m", out, limit)
		}
		var codes []string
		for range limit + 1 {
			resp, _ := p.get(t, "/search", subject)
			codes = append(codes, fmt.Sprint(resp.StatusCode))
		}
		want := strings.Repeat("200 ", limit) + "429"
		if got := strings.Join(codes, " "); got != want {
			t.Errorf("round %d: %d requests after rules put --limit %d = %s, want %s", round, limit+1, limit, got, want)
		}

		out, errOut, code = p.cli(t, "subjects", "reset", subject)
		if code != 0 {
			t.Fatalf("subjects reset = exit %d, want 0; stderr:\n%s", code, errOut)
		}
		if !strings.Contains(out, "every deployed authorizer within 1s") {
			t.Errorf("subjects reset printed %q, want when the reset reaches every authorizer", out)
		}
		if resp, _ := p.get(t, "/search", subject); resp.StatusCode != 200 {
			t.Errorf("round %d: GET /search right after subjects reset %s = %s, want 200", round, subject, resp.Status)
		}
	}
}
