package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/httpapi"
)

// TestReadOnlyToken: sluice local's SLUICE_READ_TOKEN reads every GET
// route and changes nothing: a write is a 403 problem+json that says why,
// through the API and through the built CLI.
func TestReadOnlyToken(t *testing.T) {
	t.Parallel()
	const reader = "read-only-test-token"
	p := startLocal(t, []string{"SLUICE_READ_TOKEN=" + reader})
	send := func(method, path, token, body string) (int, httpapi.Problem) {
		t.Helper()
		req, err := http.NewRequest(method, p.base+"/admin"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, b := do(t, req)
		var prob httpapi.Problem
		if resp.StatusCode >= 400 {
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("%s %s = Content-Type %q, want application/problem+json", method, path, ct)
			}
			json.Unmarshal(b, &prob) //nolint:errcheck // checked by the fields below
		}
		return resp.StatusCode, prob
	}
	for _, path := range []string{"/rules", "/plans", "/stats", "/subjects/someone/limits"} {
		if code, prob := send(http.MethodGet, path, reader, ""); code != 200 {
			t.Errorf("GET %s with the read token = %d %s, want 200", path, code, prob.Detail)
		}
	}
	for _, w := range []struct{ method, path, body string }{
		{http.MethodPost, "/rules", `{"api":"demo","route":"GET /x","subject":"*","limit":1,"period":"1s"}`},
		{http.MethodPost, "/batch", `{"set":"probe","ops":[]}`},
		{http.MethodDelete, "/subjects/someone/buckets", ""},
	} {
		code, prob := send(w.method, w.path, reader, w.body)
		if code != 403 || !strings.Contains(prob.Detail, "read-only") || !strings.HasSuffix(prob.Type, "#forbidden") {
			t.Errorf("%s %s with the read token = %d %+v, want a 403 problem saying the token is read-only", w.method, w.path, code, prob)
		}
	}
	if code, _ := send(http.MethodPost, "/batch", p.token, `{"set":"probe","ops":[]}`); code != 200 {
		t.Errorf("an empty batch with the admin token = %d, want 200 (the console's probe: writes nothing)", code)
	}
	if code, _ := send(http.MethodGet, "/rules", "wrong", ""); code != 401 {
		t.Errorf("GET /rules with a wrong token = %d, want 401", code)
	}

	// The built CLI with the read token: ls works, apply is refused.
	dir := t.TempDir()
	writeFile(t, dir, "limits.yaml", limitsV1)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(sluiceBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SLUICE_ENDPOINT="+p.base+"/admin", "SLUICE_ADMIN_TOKEN="+reader)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := run("rules", "ls"); code != 0 {
		t.Errorf("rules ls with the read token = exit %d: %s", code, out)
	}
	if out, code := run("apply", "-f", "limits.yaml"); code != 1 || !strings.Contains(out, "403") || !strings.Contains(out, "read-only") {
		t.Errorf("apply with the read token = exit %d: %s; want 1 and the 403's reason", code, out)
	}
}
