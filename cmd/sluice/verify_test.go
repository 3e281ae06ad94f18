package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/rules"
)

// TestVerifyLocal runs the built binary's `sluice verify --local` against a
// started `sluice local`, as a user would after `make run`: every check
// passes, and the rule it wrote is gone afterwards. Then the same against
// deployments that miss something: it exits 1 and names the check.
func TestVerifyLocal(t *testing.T) {
	t.Parallel()
	p := startLocal(t, nil)
	out, code := verifyBin(t, p, p.token)
	if code != 0 {
		t.Fatalf("sluice verify --local = exit %d, want 0:\n%s\nsluice local:\n%s", code, out, p.out)
	}
	var res []verifyResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("sluice verify -o json: %v\n%s", err, out)
	}
	want := []string{
		"admin API refuses an unsigned request", "admin API accepts a bearer token request", "rule written",
		"no request with a subject gets 401", "200 with RateLimit, RateLimit-Policy", "rule binds the demo API",
		"check API answers", "alarms notify the topic", "test rule and subjects removed",
	}
	var got []string
	for _, r := range res {
		got = append(got, r.Check)
		if !r.OK && !(r.Skip && r.Check == "alarms notify the topic") {
			t.Errorf("check %q: %+v", r.Check, r)
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("checks %q, want %q", got, want)
	}
	var all []rules.Rule
	p.cliJSON(t, &all, "rules", "ls")
	for _, r := range all {
		if strings.HasPrefix(r.Subject, "sluice-verify-") {
			t.Errorf("rule %s for %s left behind", r.ID, r.Subject)
		}
	}

	// A wrong token: the signed check fails, and what needs it is not run.
	out, code = verifyBin(t, p, "wrong-token")
	if code != 1 || !strings.Contains(out, `"check": "admin API accepts a bearer token request",`+"\n    \"ok\": false") {
		t.Errorf("sluice verify with a wrong token = exit %d, want 1 and the admin check failed:\n%s", code, out)
	}

	// No RateLimit headers on the 200: the header check fails.
	q := startLocal(t, []string{"RATELIMIT_HEADERS=draft6"})
	out, code = verifyBin(t, q, q.token)
	if code != 1 || !strings.Contains(out, "without RateLimit or RateLimit-Policy") {
		t.Errorf("sluice verify of a gateway without RateLimit-Policy = exit %d, want 1 naming the headers:\n%s", code, out)
	}
}

// verifyBin runs the built sluice verify -o json against p with token.
func verifyBin(t *testing.T, p *localProc, token string) (string, int) {
	t.Helper()
	cmd := exec.Command(sluiceBin, "verify", "--local", p.base, "-o", "json")
	cmd.Env = append(os.Environ(), "SLUICE_ADMIN_TOKEN="+token)
	b, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(b) + string(ee.Stderr), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(b), 0
}
