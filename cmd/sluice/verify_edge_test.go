package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestVerifyLocalEdge runs the built sluice verify --local --edge against
// sluice local --edge: the edge denies the blocked subject and frees it
// once the block is deleted, and nothing is left behind. Against a
// sluice local without the edge, the edge check fails.
func TestVerifyLocalEdge(t *testing.T) {
	t.Parallel()
	run := func(p *localProc, within string) ([]verifyResult, string, int) {
		out, code := verifyBin(t, p, p.token, "--edge", "--edge-within", within)
		var res []verifyResult
		if err := json.NewDecoder(strings.NewReader(out)).Decode(&res); err != nil {
			t.Fatalf("sluice verify -o json: %v\n%s", err, out)
		}
		return res, out, code
	}
	row := func(res []verifyResult, check string) *verifyResult {
		for i := range res {
			if res[i].Check == check {
				return &res[i]
			}
		}
		return nil
	}

	p := startLocal(t, nil, "--edge")
	res, out, code := run(p, "20s")
	if code != 0 {
		t.Fatalf("sluice verify --local --edge = exit %d, want 0:\n%s\nsluice local:\n%s", code, out, p.out)
	}
	for _, c := range []string{edgeDenyCheck, edgeFreeCheck} {
		if r := row(res, c); r == nil || !r.OK {
			t.Errorf("check %q: %+v, want ok", c, r)
		} else {
			t.Logf("%s: %s", c, r.Detail)
		}
	}
	if r := row(res, edgeDirectCheck); r != nil {
		t.Errorf("locally, with no URL around the edge: %+v, want no such row", r)
	}
	if r := row(res, "test rules and subjects removed"); r == nil || !r.OK {
		t.Errorf("cleanup: %+v", r)
	}

	q := startLocal(t, nil)
	res, out, code = run(q, "3s")
	if r := row(res, edgeDenyCheck); code != 1 || r == nil || r.OK || !strings.Contains(r.Detail, "no 429 from the edge") {
		t.Errorf("sluice verify --edge of a sluice local without it = exit %d, row %+v; want 1 and the edge check failed:\n%s", code, r, out)
	}
	if r := row(res, "test rules and subjects removed"); r == nil || !r.OK {
		t.Errorf("cleanup after a failed edge check: %+v", r)
	}
}
