package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestLocalLeaseLoad runs `sluice load --strict` against `sluice local`
// (real Redis, leasing on as the Lambdas have it by default) with one
// subject at full speed: leases must take part, and nothing may be
// over-admitted. The rule (200/s, burst 400) binds after the burst, so
// the run covers both large leases (a full bucket) and none (a drained
// one). It binds at any rate above 330 requests a second, which a loaded
// 2-core machine still sends (1000/s did not: 766/s under make test at a
// load average of 20 never reached the limit).
func TestLocalLeaseLoad(t *testing.T) {
	t.Parallel()
	seed := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(seed, []byte(`{"rules": [{"api": "demo", "route": "*", "subject": "*",
		"limit": 200, "period": "1s", "burst": 400, "description": "lease load"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	prefix := testenv.Prefix(t, "lease")
	testenv.DeleteKeys(t, testenv.Redis(t), prefix)
	// A budget a loaded make test cannot exhaust: at the 25 ms default,
	// decisions failed open (the rule's failure mode, allowed by design)
	// and the load tool counted them as over-admitted (2,706 allowed
	// against a bound of 1,006). This test is of the leases' exactness.
	p := startLocal(t, []string{"REDIS_URL=" + testenv.RedisURL(t), "REDIS_TIMEOUT=2s"}, "--seed", seed, "--redis-prefix", prefix)

	cmd := exec.Command(sluiceBin, "load", "--strict", "--quiet", "-o", "json", "--rate", "0", "--concurrency", "32",
		"--duration", "3s", "--subjects", "1", "--limit", "200", "--burst", "400", "--period", "1s", p.base+"/hello")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sluice load --strict: %v\n%s\nsluice local:\n%s", err, out, p.out)
	}
	var rep loadReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("decode the load report: %v\n%s", err, out)
	}
	s := rep.Subjects[0]
	t.Logf("sent %d in %.2fs: allowed %d, denied %d, errors %d; bound %.1f", rep.Sent, rep.Elapsed, rep.Allowed, rep.Denied, rep.Errors, s.Bound)
	if rep.OverAdmitted != 0 || s.Over || !s.Checked {
		t.Errorf("load report: over-admitted %d (checked %v): %+v", rep.OverAdmitted, s.Checked, s)
	}
	if rep.Denied == 0 || rep.Errors != 0 {
		t.Errorf("denied %d, errors %d: want a binding limit and no errors", rep.Denied, rep.Errors)
	}

	resp, body := p.adminGet(t, "/admin/debug/vars")
	var v debugVars
	if resp.StatusCode != 200 || json.Unmarshal(body, &v) != nil {
		t.Fatalf("GET /admin/debug/vars = %d %s", resp.StatusCode, body)
	}
	t.Logf("leases: %d taken, %d leased admissions, %d tokens returned, %d held", v.LeasesTaken, v.LeasedAdmissions, v.LeaseTokensReturned, v.LeaseTokensHeld)
	if v.LeasesTaken == 0 || v.LeasedAdmissions == 0 {
		t.Errorf("no lease taken under full speed: %s", body)
	}
}
