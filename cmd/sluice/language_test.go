package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLILanguage: errors name the flag, the file position and the fix.
func TestCLILanguage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\n  \"api\": nul\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rules", "ls", "--api"}, 2, "--api needs a value after it, such as --api STRING"},
		{[]string{"rules", "ls", "--api", "--route", "x"}, 2, "--api needs a value after it"},
		{[]string{"rules", "ls", "--api", "a", "--api", "b"}, 2, "--api is given more than once; it takes one value"},
		{[]string{"rules", "put", "-f", bad, "--endpoint", "http://127.0.0.1:1/admin"}, 1, bad + ":2:13: not valid JSON"},
	} {
		code, _, stderr := runCLI(t, "", tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("sluice %s = exit %d, %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
	}
	// A flag that takes a list may repeat.
	if code, _, stderr := runCLI(t, "", "lint", "-f", bad, "-f", bad); strings.Contains(stderr, "more than once") || code != 1 {
		t.Errorf("lint -f twice = exit %d, %q; want the files read", code, stderr)
	}
}

// TestSubjectsFindTable: subjects find prints a table that names each
// rule by its scope; the id is in -o json.
func TestSubjectsFindTable(t *testing.T) {
	t.Parallel()
	const id = "3f1c9a8e-5b7d-4c2e-9a41-6d0e2b8f7c15"
	answer := `{"hash":"3f2a9c","window":"5m","searched":true,"found":true,"matches":[{"rank":2,"subject":"3f2a9c","rule":"` + id + `","api":"demo","denied":12}]}`
	rule := `{"id":"` + id + `","api":"demo","route":"GET /search","subject":"*","limit":3,"period":"1m","version":1}`
	endpoint, _ := fakeAdmin(t, map[string]string{"POST /subjects/find": answer, "GET /rules/" + id: rule})
	code, stdout, stderr := runCLI(t, "", "subjects", "find", "customer-42", "--endpoint", endpoint)
	if code != 0 {
		t.Fatalf("subjects find = exit %d: %s", code, stderr)
	}
	for _, w := range []string{"subject customer-42 is hash 3f2a9c", "RANK  API   ROUTE        RULE SUBJECT  DENIED", "2     demo  GET /search  *             12"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("subjects find printed:\n%s\nwant %q", stdout, w)
		}
	}
	if strings.Contains(stdout, id) {
		t.Errorf("the table shows the rule's id:\n%s", stdout)
	}
	if _, stdout, _ = runCLI(t, "", "-o", "json", "subjects", "find", "customer-42", "--endpoint", endpoint); !strings.Contains(stdout, id) {
		t.Errorf("-o json lacks the rule id:\n%s", stdout)
	}
}

// TestStatsNamesRules: sluice stats names each rule by its scope (route
// and subject beside the API column), not by its UUID; -o json keeps
// the id.
func TestStatsNamesRules(t *testing.T) {
	t.Parallel()
	p := startLocal(t, nil)
	for range 5 {
		p.get(t, "/search", "stats-names")
	}
	out, stderr, code := p.cli(t, "stats", "--window", "5m")
	if code != 0 {
		t.Fatalf("sluice stats = exit %d: %s", code, stderr)
	}
	var rep struct {
		Rules []struct {
			Rule string `json:"rule"`
		} `json:"rules"`
	}
	p.cliJSON(t, &rep, "stats", "--window", "5m")
	if len(rep.Rules) == 0 {
		t.Fatalf("stats -o json has no rules:\n%s", out)
	}
	if !strings.Contains(out, "GET /search *") || strings.Contains(out, rep.Rules[0].Rule) {
		t.Errorf("sluice stats =\n%s\nwant the rule named GET /search *, not %s", out, rep.Rules[0].Rule)
	}
}
