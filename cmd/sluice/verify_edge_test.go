package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// TestVerifyTargetEdge: a stack with the CDN edge (its EdgeDomain output)
// is verified through the distribution, and its API's own URL is the
// one that must refuse; the rules still name the API's id.
func TestVerifyTargetEdge(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/sluice.json"
	out := `{"Sluice": {"DemoApiUrl": "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/prod/",
		"AdminApiUrl": "https://f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com/prod/", "EdgeDomain": "d111111abcdef8.cloudfront.net"}}`
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := (&verifyCmd{Outputs: file, Stack: "Sluice"}).target()
	want := verifyTarget{
		demo: "https://d111111abcdef8.cloudfront.net", admin: "https://f6g7h8i9j0.execute-api.eu-west-1.amazonaws.com/prod",
		api: "a1b2c3d4e5", stack: "Sluice", edge: true, direct: "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/prod",
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("target() = %+v, %v; want %+v", got, err, want)
	}
}

// TestVerifyLocalEdge runs the built sluice verify --local --edge against
// sluice local --edge: the edge denies the blocked subject and frees it
// once the block is deleted, and nothing is left behind. Against a
// sluice local without the edge, the edge check fails.
func TestVerifyLocalEdge(t *testing.T) {
	t.Parallel()
	run := func(p *localProc, within string) ([]verifyResult, string, int) {
		cmd := exec.Command(sluiceBin, "verify", "--local", p.base, "--edge", "--edge-within", within, "-o", "json")
		cmd.Env = append(os.Environ(), "SLUICE_ADMIN_TOKEN="+p.token)
		b, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var res []verifyResult
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("sluice verify -o json: %v\n%s", err, b)
		}
		return res, string(b), code
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
