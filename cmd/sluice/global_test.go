package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/rules"
)

const limitsGlobal = `version: 1
set: platform
plans:
  - name: shared
    kind: quota
    limit: 1000000
    period: 1mo
    global: true
rules:
  - api: shop
    route: GET /orders
    subject: "*"
    limit: 10000
    period: 1m
    global: true
`

// TestGlobalCLI drives global rules and plans through the built binary
// against sluice local on real PostgreSQL: plans put and rules put
// --global, ls and get showing it, --global=false, a bad combination
// named by its flag, and apply, diff and export of a file with global.
func TestGlobalCLI(t *testing.T) {
	p := startLocalPG(t)
	dir := t.TempDir()

	out := p.wantExit(t, dir, 0, "plans", "put", "--name", "shared", "--kind", "quota", "--limit", "1000000", "--period", "1mo", "--global")
	if !strings.Contains(out, "global 1000000/1mo") {
		t.Errorf("plans put --global =\n%s\nwant LIMIT global 1000000/1mo", out)
	}
	if ls := p.wantExit(t, dir, 0, "plans", "ls"); !strings.Contains(ls, "global 1000000/1mo") {
		t.Errorf("plans ls =\n%s\nwant shared marked global", ls)
	}

	out = p.wantExit(t, dir, 0, "rules", "put", "--api", "shop", "--route", "GET /g", "--subject", "*", "--limit", "100", "--period", "1h", "--global", "-o", "json")
	var r rules.Rule
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &r); err != nil || !r.Global {
		t.Fatalf("rules put --global -o json = %s (%v), want a global rule", out, err)
	}
	if ls := p.wantExit(t, dir, 0, "rules", "ls", "--api", "shop"); !strings.Contains(ls, "global 100/1h") {
		t.Errorf("rules ls =\n%s\nwant the rule marked global", ls)
	}
	if get := p.wantExit(t, dir, 0, "rules", "get", r.ID); !strings.Contains(get, "ledger key "+rules.GlobalKey(r)) {
		t.Errorf("rules get =\n%s\nwant its ledger key %s", get, rules.GlobalKey(r))
	}
	out = p.wantExit(t, dir, 1, "rules", "put", "--id", r.ID, "--mode", "shadow")
	if !strings.Contains(out, "--global: cannot be combined with mode shadow") {
		t.Errorf("rules put --mode shadow on a global rule =\n%s\nwant the problem named by --global", out)
	}
	out = p.wantExit(t, dir, 0, "rules", "put", "--id", r.ID, "--global=false")
	if strings.Contains(out, "global 100/1h") || !strings.Contains(out, "100/1h") {
		t.Errorf("rules put --global=false =\n%s\nwant the rule regional", out)
	}

	// Rules as code: the set's file takes global; apply converges, a
	// dropped global is a diff, and the export keeps it.
	p.wantExit(t, dir, 0, "plans", "rm", "shared")
	writeFile(t, dir, "limits.yaml", limitsGlobal)
	p.wantExit(t, dir, 0, "lint", "-f", "limits.yaml")
	p.wantExit(t, dir, 0, "apply", "-f", "limits.yaml")
	p.wantExit(t, dir, 0, "diff", "-f", "limits.yaml")
	exported := p.wantExit(t, dir, 0, "export", "platform")
	if strings.Count(exported, "global: true") != 2 {
		t.Errorf("export =\n%s\nwant global: true on the plan and the rule", exported)
	}
	writeFile(t, dir, "regional.yaml", strings.Replace(limitsGlobal, "    period: 1m\n    global: true\n", "    period: 1m\n", 1))
	out = p.wantExit(t, dir, 2, "diff", "-f", "regional.yaml")
	if !strings.Contains(out, `~ update rule api "shop" route "GET /orders" subject "*"`) || !strings.Contains(out, "global: true -> false") {
		t.Errorf("diff dropping global =\n%s\nwant an update of global true -> false", out)
	}
}
