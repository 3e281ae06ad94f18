package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// at builds an op of subject on route sent at ms (from 0) and answered
// 1 ms later.
func at(host, subject, route string, ms int64, allowed bool) Op {
	return Op{Host: host, Subject: subject, Route: route, Send: ms * int64(time.Millisecond), Recv: (ms + 1) * int64(time.Millisecond),
		Status: map[bool]int{true: 200, false: 429}[allowed], Allowed: allowed, Reset: 1}
}

func rate(name string, limit, burst int64) RuleSpec {
	return RuleSpec{ID: name, Name: name, Route: "*", Subject: "*", Versions: []Version{{Limit: limit, Burst: burst, Period: time.Second}}}
}

// TestCheckRate: the rate check finds admissions beyond burst + limit·T
// over any window, and only those.
func TestCheckRate(t *testing.T) {
	// 10 per second, burst 5: 5 at once, then one every 100 ms is exactly
	// the bound.
	var exact []Op
	for i := range 5 {
		exact = append(exact, at("d1", "s", "GET /x", int64(i), true))
	}
	for i := range 20 {
		exact = append(exact, at("d2", "s", "GET /x", int64(100*(i+1)), true))
	}
	tests := []struct {
		name  string
		ops   []Op
		b     Bounds
		want  int64
		fails bool
	}{
		{"at the bound", exact, Bounds{}, 0, false},
		{"three more in the burst", append(exact[:len(exact):len(exact)], at("d3", "s", "GET /x", 2, true), at("d3", "s", "GET /x", 3, true), at("d3", "s", "GET /x", 4, true)), Bounds{}, 3, true},
		{"three more, lost-write allowance of 300 ms (burst 5 + 3)", append(exact[:len(exact):len(exact)], at("d3", "s", "GET /x", 2, true), at("d3", "s", "GET /x", 3, true), at("d3", "s", "GET /x", 4, true)),
			Bounds{LostWindow: 300 * time.Millisecond}, 3, false},
		{"fail-open admissions are not counted", append(exact[:len(exact):len(exact)], Op{Subject: "s", Route: "GET /x", Send: 2e6, Recv: 3e6, Status: 200, Allowed: true, FailOpen: true}), Bounds{}, 0, false},
		{"denials are not counted", append(exact[:len(exact):len(exact)], at("d1", "s", "GET /x", 3, false)), Bounds{}, 0, false},
		{"a lease TTL widens every window", append(exact[:len(exact):len(exact)], at("d3", "s", "GET /x", 2, true)), Bounds{LeaseTTL: 100 * time.Millisecond}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Check("t", tt.ops, []RuleSpec{rate("api", 10, 5)}, tt.b, 0, nil)
			if res.Rate.Max != tt.want || (len(res.Problems) > 0) != tt.fails {
				t.Errorf("Check = excess %d (bound %d), problems %q; want excess %d, failing %v", res.Rate.Max, res.Rate.Bound, res.Problems, tt.want, tt.fails)
			}
		})
	}
}

// TestCheckQuota: admissions beyond a quota are its excess; a durable
// quota promises none, a default one what the subject's rate rule admits
// in the lost window.
func TestCheckQuota(t *testing.T) {
	var ops []Op
	for i := range 12 {
		ops = append(ops, at("d1", "q", "POST /bill", int64(200*i), true))
	}
	rules := []RuleSpec{rate("api", 10, 5),
		{ID: "bill", Name: "bill", Quota: true, Route: "POST /bill", Subject: "q", Versions: []Version{{Limit: 10, Period: 24 * time.Hour}}}}
	res := Check("t", ops, rules, Bounds{}, 0, nil)
	if res.Quota.Max != 2 || len(res.Problems) != 1 {
		t.Errorf("12 admitted against 10: excess %d, problems %q; want 2 and one problem", res.Quota.Max, res.Problems)
	}
	res = Check("t", ops, rules, Bounds{LostWindow: time.Second}, 0, nil)
	if res.Quota.Max != 2 || res.Quota.Bound != 15 || len(res.Problems) != 0 {
		t.Errorf("lost window 1 s: excess %d bound %d, problems %q; want 2 within 15 (burst 5 + 10/s × 1 s)", res.Quota.Max, res.Quota.Bound, res.Problems)
	}
	rules[1].Durable = true
	res = Check("t", ops, rules, Bounds{LostWindow: time.Second}, 0, nil)
	if res.Durable.Max != 2 || res.Durable.Bound != 0 || len(res.Problems) != 1 {
		t.Errorf("durable: excess %d bound %d, problems %q; want 2 beyond a bound of 0", res.Durable.Max, res.Durable.Bound, res.Problems)
	}
}

// TestCheckVersions: after a change the new numbers bind once the last
// host switched; windows overlapping both take the larger.
func TestCheckVersions(t *testing.T) {
	r := rate("search", 10, 10)
	r.Versions[0].Until = int64(2 * time.Second)
	r.Versions = append(r.Versions, Version{Limit: 2, Burst: 2, Period: time.Second, From: int64(time.Second)})
	var ops []Op
	for i := range 10 { // 10 admissions a second apart from 3 s: within 2/s
		ops = append(ops, at("d1", "s", "GET /x", int64(3000+200*i), true))
	}
	if res := Check("t", ops, []RuleSpec{r}, Bounds{}, 0, nil); res.Rate.Max <= 0 {
		t.Errorf("5 a second under a 2-a-second rule: excess %d, want > 0", res.Rate.Max)
	}
	ops = ops[:0]
	for i := range 10 {
		ops = append(ops, at("d1", "s", "GET /x", int64(1500+50*i), true)) // 1.5 s to 1.95 s: old numbers held to 2 s
	}
	if res := Check("t", ops, []RuleSpec{r}, Bounds{}, 0, nil); res.Rate.Max != 0 {
		t.Errorf("10 in half a second while a host held the old numbers: excess %d, want 0 (the old burst of 10)", res.Rate.Max)
	}
	ops = append(ops, at("d1", "s", "GET /x", 2100, true), at("d1", "s", "GET /x", 2150, true), at("d1", "s", "GET /x", 2200, true))
	if res := Check("t", ops, []RuleSpec{r}, Bounds{}, 0, nil); res.Rate.Max != 1 {
		t.Errorf("3 in 100 ms after every host switched to burst 2: excess %d, want 1", res.Rate.Max)
	}
}

// TestCheckService: gaps, recovery and propagation.
func TestCheckService(t *testing.T) {
	ms := int64(time.Millisecond)
	var ops []Op
	for i := range 100 { // every 10 ms on d1 for a second
		o := at("d1", "s", "GET /x", int64(10*i), true)
		o.Policy = `"api";q=5;w=1, "search";q=5;w=1`
		if i >= 30 && i < 50 { // 300..490 ms: failed open
			o.FailOpen = true
		}
		if i >= 60 { // the change reached d1 at 600 ms
			o.Policy = `"api";q=5;w=1, "search";q=2;w=1`
		}
		ops = append(ops, o)
	}
	for _, h := range []string{"d2", "d3"} {
		o := at(h, "s", "GET /x", 900, true)
		o.Policy = `"search";q=2;w=1`
		ops = append(ops, o)
	}
	res := Check("t", ops, nil, Bounds{Propagation: 50 * time.Millisecond}, 400*ms, &Change{Rule: "search", Q: 2, Ready: 500 * ms})
	if res.Gap != 210*time.Millisecond {
		t.Errorf("gap = %v, want 210ms (290 to 500 ms)", res.Gap)
	}
	if res.Recovery != 91*time.Millisecond {
		t.Errorf("recovery = %v, want 91ms (heal at 400 ms, last fail-open answered at 491 ms)", res.Recovery)
	}
	if res.Propagation != 90*time.Millisecond || len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "rule change") {
		t.Errorf("propagation = %v, problems %q; want 90ms (last old at 590 ms) beyond the 50ms bound", res.Propagation, res.Problems)
	}
	// d2 answers with the old rule at 800 ms, but failed open (it could
	// not reach Redis yet): it enforced nothing, so it does not count
	// (else propagation would be 300ms); nor does a fail-closed deny.
	late := at("d2", "s", "GET /x", 800, true)
	late.Policy, late.FailOpen = `"search";q=5;w=1`, true
	closed := at("d3", "s", "GET /x", 850, false)
	closed.Policy, closed.Reset = `"search";q=5;w=1`, 0 // a fail-closed deny
	if p, _ := propagation(append(slices.Clone(ops), late, closed), &Change{Rule: "search", Q: 2, Ready: 500 * ms}); p != 90*time.Millisecond {
		t.Errorf("propagation with d2 failing open and d3 failing closed on the old rule after the change = %v, want 90ms", p)
	}
	if q, ok := policyQ(`"a";q=5;w=1, "search";q=2;w=60`, "search"); !ok || q != 2 {
		t.Errorf("policyQ = %d, %v; want 2", q, ok)
	}
}

// TestCheckGlobal: the global check finds a window that admitted beyond
// the limit and ledger tokens left unspent beyond the bound, and only
// those; a decision straddling a window's edge counts in neither.
func TestCheckGlobal(t *testing.T) {
	minute := int64(time.Minute / time.Millisecond)
	admits := func(n int, startMs int64) []Op {
		var ops []Op
		for i := range n {
			ops = append(ops, at("g1d1", "sg", globalRoute, startMs+int64(i), true))
		}
		return ops
	}
	item := func(used int64) []LedgerItem {
		return []LedgerItem{{Key: "k#h#0", Used: used}}
	}
	straddling := at("g2d1", "sg", globalRoute, minute-1, true)
	straddling.Recv += int64(time.Millisecond) // answered in the next window
	tests := []struct {
		name           string
		ops            []Op
		items          []LedgerItem
		over, stranded int64
		problems       int
	}{
		{"at the limit", admits(60, 0), item(60), 0, 0, 0},
		{"one over", admits(61, 0), item(60), 1, 0, 1},
		{"one over, bound 1", admits(61, 0), item(60), 1, 0, 0},
		{"straddling not counted", append(admits(60, 0), straddling), item(60), 0, 0, 0},
		{"stranded at the bound", admits(30, 0), item(60), 0, 30, 0},
		{"stranded beyond", admits(29, 0), item(60), 0, 31, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := GlobalBounds{Limit: 60, Stranded: 30, PoolMax: -1}
			if tt.name == "one over, bound 1" {
				b.Over = 1
			}
			res := CheckGlobal("t", tt.ops, tt.items, nil, 0, b)
			if g := res.Global; g.Over != tt.over || g.Stranded != tt.stranded || len(res.Problems) != tt.problems {
				t.Errorf("CheckGlobal = over %d, stranded %d, problems %q; want %d, %d, %d problems",
					g.Over, g.Stranded, res.Problems, tt.over, tt.stranded, tt.problems)
			}
		})
	}
}

// TestCheckGlobalFailOpenAndRegions: fail-open admissions are counted
// apart (FailOpen), outside the windows' bound and each Region's ledger
// admissions; a Region's stranded tokens are what its decision hosts took
// less what they admitted from the ledger. A checker that counted a
// fail-open admission against the limit, lost the count, or could not
// find a host's Region fails here.
func TestCheckGlobalFailOpenAndRegions(t *testing.T) {
	var ops []Op
	for i := range 40 {
		ops = append(ops, at("g1d1", "sg", globalRoute, int64(i), true))
	}
	for i := range 20 {
		ops = append(ops, at("g2d2", "sg", globalRoute, int64(40+i), true))
	}
	for i := range 5 {
		o := at("g3d1", "sg", globalRoute, int64(60+i), true)
		o.FailOpen = true
		ops = append(ops, o)
	}
	stats := map[string]globalStats{"g1d1": {Taken: 45}, "g2d2": {Taken: 20}}
	b := GlobalBounds{Limit: 60, Stranded: 30, PoolMax: -1}
	res := CheckGlobal("t", ops, []LedgerItem{{Key: "k#h#0", Used: 65}}, stats, 0, b)
	g := res.Global
	if g.FailOpen != 5 || g.Over != 0 || len(res.Problems) != 0 {
		t.Errorf("CheckGlobal = fail-open %d, over %d, problems %q; want 5, 0, none", g.FailOpen, g.Over, res.Problems)
	}
	if want := []int64{5, 0, 0}; !slices.Equal(g.RegionStranded, want) {
		t.Errorf("RegionStranded = %v, want %v (g1 took 45 and admitted 40; g2 took and admitted 20; g3 only failed open)", g.RegionStranded, want)
	}
}
