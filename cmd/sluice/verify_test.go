package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
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
		"check API answers", "global rule moves the ledger", replicaCheck, "alarms notify the topic", "test rules and subjects removed",
	}
	var got []string
	for _, r := range res {
		got = append(got, r.Check)
		if !r.OK && !(r.Skip && (r.Check == "alarms notify the topic" || r.Check == globalCheck || r.Check == replicaCheck)) {
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

// verifyBin runs the built sluice verify -o json against p with token and
// args: its stdout, then its stderr when it failed.
func verifyBin(t *testing.T, p *localProc, token string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(sluiceBin, append([]string{"verify", "--local", p.base, "-o", "json"}, args...)...)
	cmd.Env = append(os.Environ(), "SLUICE_ADMIN_TOKEN="+token)
	b, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(b) + string(ee.Stderr), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(b), 0
}

// TestVerifyTarget: verify reads what it checks from cdk deploy's outputs
// file: the demo API (its id is the rules' api), the admin API and the
// alarm topic; a family's stack, its ledger, subject key and Regions; a
// stack with the CDN edge (its EdgeDomain output), verified through the
// distribution, with its API's own URL the one that must refuse (the
// rules still name the API's id); a stack without the demo API, or no
// target at all, is refused saying what to give.
func TestVerifyTarget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := dir + "/sluice.json"
	out := `{"Sluice": {"DemoApiUrl": "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/prod/",
		"AdminApiUrl": "https://f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com/prod/",
		"AlarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:Sluice-AlarmTopic"},
		"Lean": {"AdminApiUrl": "https://f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com/prod/"},
		"Sluice-eu-west-2": {"DemoApiUrl": "https://k1l2m3n4o5.execute-api.eu-west-2.amazonaws.com/prod/",
		"AdminApiUrl": "https://p6q7r8s9t0.execute-api.eu-west-2.amazonaws.com/prod/", "LedgerTable": "Sluice-ledger",
		"SubjectKeyName": "Sluice-subject-key", "GlobalRegions": "eu-west-1,eu-west-2,eu-west-3"},
		"Edge": {"DemoApiUrl": "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/prod/",
		"AdminApiUrl": "https://f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com/prod/", "EdgeDomain": "d111111abcdef8.cloudfront.net"}}`
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		stack string
		want  verifyTarget
	}{
		{"Sluice", verifyTarget{
			demo: "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/prod", admin: "https://f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com/prod",
			api: "a1b2c3d4e5", stack: "Sluice", topic: "arn:aws:sns:eu-west-1:123456789012:Sluice-AlarmTopic",
		}},
		{"Sluice-eu-west-2", verifyTarget{
			demo: "https://k1l2m3n4o5.execute-api.eu-west-2.amazonaws.com/prod", admin: "https://p6q7r8s9t0.execute-api.eu-west-2.amazonaws.com/prod",
			api: "k1l2m3n4o5", stack: "Sluice-eu-west-2", ledger: "Sluice-ledger", subjectKey: "Sluice-subject-key",
			regions: []string{"eu-west-1", "eu-west-2", "eu-west-3"},
		}},
		{"Edge", verifyTarget{
			demo: "https://d111111abcdef8.cloudfront.net", admin: "https://f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com/prod",
			api: "a1b2c3d4e5", stack: "Edge", edge: true, direct: "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/prod",
		}},
	} {
		got, err := (&verifyCmd{Outputs: file, Stack: tt.stack}).target()
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("target() of %s = %+v, %v; want %+v", tt.stack, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		cmd  verifyCmd
		want string
	}{
		{verifyCmd{Outputs: file, Stack: "Lean"}, "demoApi=false"},
		{verifyCmd{Outputs: file, Stack: "Other"}, `no stack "Other"`},
		{verifyCmd{}, "give --outputs"},
		{verifyCmd{Outputs: file, Local: "http://127.0.0.1:8080"}, "not both"},
		{verifyCmd{Local: "http://127.0.0.1:8080"}, "SLUICE_ADMIN_TOKEN"},
	} {
		if _, err := tt.cmd.target(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("target(%+v) = %v, want %q", tt.cmd, err, tt.want)
		}
	}
}
