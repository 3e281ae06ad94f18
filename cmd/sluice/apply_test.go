package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// startLocalPG is `sluice local` on real Redis and PostgreSQL.
func startLocalPG(t *testing.T) *localProc {
	t.Helper()
	prefix := testenv.Prefix(t, "apply")
	testenv.DeleteKeys(t, testenv.Redis(t), prefix)
	return startLocal(t, []string{"REDIS_URL=" + testenv.RedisURL(t), "DATABASE_URL=" + pgtest.NewEmptyDatabase(t)}, "--redis-prefix", prefix)
}

// bin runs the built sluice binary against p's admin API, in dir.
func (p *localProc) bin(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(sluiceBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLUICE_ENDPOINT="+p.base+"/admin", "SLUICE_ADMIN_TOKEN="+p.token)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("run sluice %s: %v", strings.Join(args, " "), err)
	}
	return o.String(), e.String(), code
}

// wantExit runs the binary and wants exit code want.
func (p *localProc) wantExit(t *testing.T, dir string, want int, args ...string) string {
	t.Helper()
	out, errOut, code := p.bin(t, dir, args...)
	if code != want {
		t.Fatalf("sluice %s = exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out + errOut
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// adminDo sends an admin request with the token and returns the status
// and body.
func (p *localProc) adminDo(t *testing.T, method, path, body string, ifMatch int64) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, p.base+"/admin"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if ifMatch > 0 {
		req.Header.Set("If-Match", fmt.Sprintf(`"%d"`, ifMatch))
	}
	resp, b := do(t, req)
	return resp.StatusCode, b
}

func (p *localProc) rulesOf(t *testing.T, route string) []rules.Rule {
	t.Helper()
	var rs []rules.Rule
	p.cliJSON(t, &rs, "rules", "ls", "--route", route)
	return rs
}

const limitsV1 = `# The platform team's limits.
version: 1
set: platform
plans:
  - name: gold
    limit: 1000
    period: 1m
rules:
  - api: shop
    route: "*"
    subject: "*"
    limit: 100
    period: 1m
  - api: shop
    route: GET /orders
    subject: "*"
    plan: gold
  - api: shop
    route: GET /orders
    subject: customer-x
    limit: 5000
    period: 1m
    expires_at: 2030-01-01T00:00:00Z
    description: 5x until the launch is over
`

// TestApplyDiffExport drives lint, diff, apply and export as built
// binaries against sluice local on real PostgreSQL: convergence, field-by-
// field diffs and CI exit codes, ownership (a per-customer override
// outside the set is never touched), export then apply is no change, and
// a conflict with another operator's write is reported, never overwritten.
func TestApplyDiffExport(t *testing.T) {
	p := startLocalPG(t)
	dir := t.TempDir()
	writeFile(t, dir, "limits.yaml", limitsV1)

	p.wantExit(t, dir, 0, "lint", "-f", "limits.yaml")
	out := p.wantExit(t, dir, 2, "diff", "-f", "limits.yaml")
	for _, w := range []string{`+ create plan "gold"`, `+ create rule api "shop" route "GET /orders" subject "customer-x"`, "4 to create"} {
		if !strings.Contains(out, w) {
			t.Errorf("diff before apply =\n%s\nwant %q", out, w)
		}
	}
	p.wantExit(t, dir, 0, "apply", "-f", "limits.yaml")
	p.wantExit(t, dir, 0, "diff", "-f", "limits.yaml")

	// An operator's override outside the set, and the seed's rules: an
	// apply never touches them.
	p.wantExit(t, dir, 0, "rules", "put", "--api", "shop", "--route", "*", "--subject", "vip", "--limit", "1000", "--period", "1m")
	ls := p.wantExit(t, dir, 0, "rules", "ls", "--api", "shop")
	if !strings.Contains(ls, "2030-01-01T00:00:00Z (in") || !strings.Contains(ls, "platform") {
		t.Errorf("rules ls =\n%s\nwant the override shown expiring, and the set", ls)
	}

	// Export, then apply the export: no change.
	exported := p.wantExit(t, dir, 0, "export", "platform")
	writeFile(t, dir, "export.yaml", exported)
	p.wantExit(t, dir, 0, "diff", "-f", "export.yaml")
	if !strings.Contains(exported, "expires_at:") || strings.Contains(exported, "vip") {
		t.Errorf("export =\n%s\nwant the expiry, and not the override outside the set", exported)
	}

	// A change: one field, a delete, and the override stays.
	v2 := strings.Replace(limitsV1, "    limit: 100\n", "    limit: 200\n", 1)
	v2 = v2[:strings.Index(v2, "  - api: shop\n    route: GET /orders\n    subject: customer-x")]
	writeFile(t, dir, "limits.yaml", v2)
	out = p.wantExit(t, dir, 2, "diff", "-f", "limits.yaml")
	for _, w := range []string{`~ update rule api "shop" route "*" subject "*"`, "limit: 100 -> 200", `- delete rule api "shop" route "GET /orders" subject "customer-x"`} {
		if !strings.Contains(out, w) {
			t.Errorf("diff =\n%s\nwant %q", out, w)
		}
	}

	// The file deletes customer-x's rule; another operator changes that
	// rule after the plan was made. The apply is refused whole: 412,
	// nothing applied, the operator's change stands.
	p.wantExit(t, dir, 2, "diff", "-f", "limits.yaml", "--out", "plan.json")
	x := p.rulesOf(t, "GET /orders")
	var cx rules.Rule
	for _, r := range x {
		if r.Subject == "customer-x" {
			cx = r
		}
	}
	body, _ := json.Marshal(map[string]any{"api": "shop", "route": "GET /orders", "subject": "customer-x", "limit": 6000, "period": "1m"})
	if code, b := p.adminDo(t, http.MethodPut, "/rules/"+cx.ID, string(body), cx.Version); code != 200 {
		t.Fatalf("PUT customer-x = %d %s", code, b)
	}
	out = p.wantExit(t, dir, 1, "apply", "--plan", "plan.json")
	for _, w := range []string{"412", "Nothing was applied", cx.ID} {
		if !strings.Contains(out, w) {
			t.Errorf("apply of a stale plan =\n%s\nwant %q", out, w)
		}
	}
	for _, r := range p.rulesOf(t, "*") {
		if r.API == "shop" && r.Subject == "*" && *r.Limit != 100 {
			t.Errorf("after a refused apply the wildcard rule has limit %d, want 100 (nothing applied)", *r.Limit)
		}
	}
	for _, r := range p.rulesOf(t, "GET /orders") {
		if r.Subject == "customer-x" && *r.Limit != 6000 {
			t.Errorf("the other operator's change was overwritten: limit %d, want 6000", *r.Limit)
		}
	}
	// Planned again, the apply goes through and leaves the override.
	p.wantExit(t, dir, 0, "apply", "-f", "limits.yaml")
	p.wantExit(t, dir, 0, "diff", "-f", "limits.yaml")
	if vip := p.rulesOf(t, "*"); !containsSubject(vip, "vip") {
		t.Errorf("the apply deleted the override outside its set")
	}

	// A file claiming the override's scope: exit 1, named by line.
	writeFile(t, dir, "claim.yaml", v2+"  - {api: shop, route: \"*\", subject: vip, limit: 1, period: 1s}\n")
	out = p.wantExit(t, dir, 1, "diff", "-f", "claim.yaml")
	if !strings.Contains(out, "claim.yaml:") || !strings.Contains(out, "belongs to no set") {
		t.Errorf("diff of a file claiming an override =\n%s\nwant its line and why", out)
	}

	// lint names each problem by file, line and field, offline.
	writeFile(t, dir, "bad.yaml", "version: 1\nset: platform\nrules:\n  - api: shop\n    route: \"*\"\n    subject: \"*\"\n    limt: 5\n    period: 1m\n")
	out = p.wantExit(t, dir, 1, "lint", "-f", "bad.yaml")
	if !strings.Contains(out, `bad.yaml:7: rules[0].limt: unknown field; did you mean "limit"?`) {
		t.Errorf("lint =\n%s\nwant the problem by file, line and field", out)
	}
}

func containsSubject(rs []rules.Rule, subject string) bool {
	for _, r := range rs {
		if r.Subject == subject {
			return true
		}
	}
	return false
}

// bigFile is a set of n rules on n routes.
func bigFile(n, limit int) string {
	var b strings.Builder
	b.WriteString("version: 1\nset: bulk\nrules:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {api: bulk, route: GET /r%d, subject: \"*\", limit: %d, period: 1m}\n", i, limit)
	}
	return b.String()
}

// TestApplyLarge applies a set of 5,000 rules as a built binary against
// sluice local on PostgreSQL and reports how long apply and diff take
// (the issue asks under 30 s and 5 s on this machine). While the second
// apply updates all 5,000, a console-like operator edits one of them with
// If-Match in a loop: whatever the interleaving, no write is lost, and
// the apply either lands whole or is refused whole.
func TestApplyLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 rules: not in -short")
	}
	const n = 5000
	p := startLocalPG(t)
	dir := t.TempDir()
	writeFile(t, dir, "big.yaml", bigFile(n, 10))

	start := time.Now()
	p.wantExit(t, dir, 0, "apply", "--timeout", "2m", "-f", "big.yaml") // 5,000 rules in one transaction: slow under -race on a loaded machine
	applied := time.Since(start)
	start = time.Now()
	p.wantExit(t, dir, 0, "diff", "-f", "big.yaml")
	diffed := time.Since(start)
	t.Logf("%d rules: apply (create) %v, diff (no change) %v", n, applied.Round(time.Millisecond), diffed.Round(time.Millisecond))

	// The console edits GET /r7 while an apply updates every rule.
	writeFile(t, dir, "big.yaml", bigFile(n, 20))
	var (
		wg       sync.WaitGroup
		stop     = make(chan struct{})
		consoled []int64 // versions the console wrote
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rs := p.rulesOf(t, "GET /r7")
			if len(rs) != 1 {
				t.Errorf("GET /r7: %d rules", len(rs))
				return
			}
			body := fmt.Sprintf(`{"api":"bulk","route":"GET /r7","subject":"*","limit":%d,"period":"1m","description":"console edit %d"}`, 100+i, i)
			code, b := p.adminDo(t, http.MethodPut, "/rules/"+rs[0].ID, body, rs[0].Version)
			switch code {
			case 200:
				var r rules.Rule
				json.Unmarshal(b, &r) //nolint:errcheck // checked through the history below
				consoled = append(consoled, r.Version)
			case 412: // the apply got there first: the console merges and retries
			default:
				t.Errorf("console PUT = %d %s", code, b)
				return
			}
		}
	})
	start = time.Now()
	_, errOut, code := p.bin(t, dir, "apply", "--timeout", "2m", "-f", "big.yaml")
	updated := time.Since(start)
	close(stop)
	wg.Wait()
	switch {
	case code == 0:
		t.Logf("%d rules: apply (update all, a console editing one) %v", n, updated.Round(time.Millisecond))
	case code == 1 && strings.Contains(errOut, "412") && strings.Contains(errOut, "Nothing was applied"):
		t.Logf("the apply met the console's write and was refused whole (%v): %s", updated.Round(time.Millisecond), strings.TrimSpace(errOut))
		for _, r := range p.rulesOf(t, "GET /r8") {
			if *r.Limit != 10 {
				t.Errorf("a refused apply changed GET /r8 to limit %d", *r.Limit)
			}
		}
	default:
		t.Fatalf("apply during console edits = exit %d: %s", code, errOut)
	}
	// No lost update: each write to GET /r7 starts from the one before it.
	rs := p.rulesOf(t, "GET /r7")
	var h admin.HistoryResponse
	p.cliJSON(t, &h.Entries, "rules", "history", rs[0].ID)
	prev := int64(0)
	for _, e := range h.Entries {
		var before, after rules.Rule
		json.Unmarshal(e.Before, &before) //nolint:errcheck // null on create
		json.Unmarshal(e.After, &after)   //nolint:errcheck // null on delete
		if before.Version != prev {
			t.Errorf("history of GET /r7: %s by %s from version %d, want from %d (a lost update)", e.Action, e.Actor, before.Version, prev)
		}
		prev = after.Version
	}
	t.Logf("GET /r7: %d console writes landed, %d history entries", len(consoled), len(h.Entries))

	// With no one else writing, the apply lands; then nothing is left.
	start = time.Now()
	p.wantExit(t, dir, 0, "apply", "--timeout", "2m", "-f", "big.yaml")
	t.Logf("%d rules: apply again, alone %v", n, time.Since(start).Round(time.Millisecond))
	p.wantExit(t, dir, 0, "diff", "-f", "big.yaml")
	for _, r := range p.rulesOf(t, "GET /r8") {
		if *r.Limit != 20 {
			t.Errorf("after apply GET /r8 has limit %d, want 20", *r.Limit)
		}
	}
}

// TestApplyPlanAgain: a saved plan holds no zero time, empty id or
// version; run again once applied, apply --plan says so and exits 0,
// sending nothing; after someone changed what it wrote, it exits 1 naming
// the op, the rule and the field, and how to plan again, never a 409.
func TestApplyPlanAgain(t *testing.T) {
	p := startLocal(t, nil)
	dir := t.TempDir()
	writeFile(t, dir, "limits.yaml", limitsV1)
	p.wantExit(t, dir, 2, "diff", "-f", "limits.yaml", "--out", "plan.json")
	saved, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"0001-01-01", `"id": ""`, `"version"`, `"created_at"`} {
		if strings.Contains(string(saved), bad) {
			t.Errorf("plan.json holds %s:\n%s", bad, saved)
		}
	}
	p.wantExit(t, dir, 0, "apply", "--plan", "plan.json")

	out := p.wantExit(t, dir, 0, "apply", "--plan", "plan.json")
	if !strings.Contains(out, `The plan plan.json is already applied: set "platform" holds each of its 4 writes. Nothing to do.`) || strings.Contains(out, "409") {
		t.Errorf("apply --plan run again =\n%s\nwant it to say the plan is already applied", out)
	}
	var res struct {
		Changes        []any `json:"changes"`
		AlreadyApplied bool  `json:"already_applied"`
	}
	p.cliJSON(t, &res, "apply", "--plan", filepath.Join(dir, "plan.json"))
	if !res.AlreadyApplied || len(res.Changes) != 0 {
		t.Errorf("apply -o json --plan run again = %+v, want already_applied and no changes", res)
	}

	// Another operator lowers the wildcard rule the plan created.
	var wild rules.Rule
	for _, r := range p.rulesOf(t, "*") {
		if r.API == "shop" && r.Subject == "*" {
			wild = r
		}
	}
	body := `{"api":"shop","route":"*","subject":"*","limit":50,"period":"1m","set":"platform"}`
	if code, b := p.adminDo(t, http.MethodPut, "/rules/"+wild.ID, body, wild.Version); code != 200 {
		t.Fatalf("PUT the wildcard rule = %d %s", code, b)
	}
	out = p.wantExit(t, dir, 1, "apply", "--plan", "plan.json")
	for _, w := range []string{
		`the plan plan.json was applied (3 of its 4 writes hold) and set "platform" changed since; nothing was sent`,
		`plan.json: ops[1]: create rule api "shop" route "*": rule ` + wild.ID + ` (version 2) differs: limit is 50, the plan writes 100`,
		"sluice diff -f FILE --out plan.json",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("apply --plan after a change =\n%s\nwant %q", out, w)
		}
	}
	if strings.Contains(out, "409") {
		t.Errorf("apply --plan after a change =\n%s\nwant no 409", out)
	}
	for _, r := range p.rulesOf(t, "*") {
		if r.API == "shop" && r.Subject == "*" && *r.Limit != 50 {
			t.Errorf("the other operator's limit is %d, want 50 kept", *r.Limit)
		}
	}
}
