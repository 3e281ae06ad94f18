package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var bannerBearer = regexp.MustCompile(`Authorization: Bearer (\S+)'`)

// bearerGet sends GET base+path with the bearer token.
func (p *localProc) bearerGet(t *testing.T, path, token string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return do(t, req)
}

// TestLocalDevIssuer: `sluice local --subject-sources jwt:sub` with no
// issuer serves a development issuer. The banner's curl line works as
// printed; `sluice token` mints tokens whose claims reach the backend; a
// token the issuer did not sign is 401; the signing key is kept in the
// state directory, so a restart keeps tokens valid.
func TestLocalDevIssuer(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	env := []string{"SLUICE_STATE_DIR=" + state, "JWT_ISSUER=", "JWT_AUDIENCE="}
	p := startLocal(t, env, "--subject-sources", "jwt:sub")
	p.stop() // the banner is out once it stops; start again to serve
	m := bannerBearer.FindStringSubmatch(p.out.String())
	if m == nil {
		t.Fatalf("banner has no curl line with a bearer token:\n%s", p.out)
	}
	bannerToken := m[1]
	if _, err := os.Stat(filepath.Join(state, "dev-issuer.pem")); err != nil {
		t.Fatalf("dev issuer key not kept: %v", err)
	}

	p = startLocal(t, env, "--subject-sources", "jwt:sub")
	resp, body := p.bearerGet(t, "/hello", bannerToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /hello with the previous run's banner token = %d %s, want 200 (the key is kept)", resp.StatusCode, body)
	}
	var echo struct {
		Authorizer map[string]any `json:"authorizer"`
	}
	if err := json.Unmarshal(body, &echo); err != nil {
		t.Fatal(err)
	}
	if echo.Authorizer["jwt_sub"] != "alice" {
		t.Errorf("backend sees authorizer context %v, want jwt_sub alice", echo.Authorizer)
	}

	stdout, stderr, code := p.cli(t, "token", "--sub", "bob", "--claim", "custom:tenant=acme", "--ttl", "5m")
	if code != 0 {
		t.Fatalf("sluice token = exit %d; stderr:\n%s", code, stderr)
	}
	tok := strings.TrimSpace(stdout)
	// The seed rules allow 3 a minute on /search: bob's 4th is 429.
	for i, want := range []int{200, 200, 200, 429} {
		if resp, body := p.bearerGet(t, "/search", tok); resp.StatusCode != want {
			t.Fatalf("GET /search #%d as bob = %d %s, want %d", i+1, resp.StatusCode, body, want)
		}
	}
	for name, bad := range map[string]string{
		"tampered": tok[:len(tok)-4] + "AAAA",
		"garbage":  "not-a-token",
	} {
		if resp, body := p.bearerGet(t, "/hello", bad); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /hello with a %s token = %d %s, want 401", name, resp.StatusCode, body)
		}
	}
	if _, _, code := p.cli(t, "token"); code != 2 {
		t.Errorf("sluice token without --sub = exit %d, want 2", code)
	}
}

// TestLocalTokenWithoutIssuer: `sluice token` against a sluice local with
// no development issuer fails, saying how to start one.
func TestLocalTokenWithoutIssuer(t *testing.T) {
	t.Parallel()
	p := startLocal(t, nil)
	_, stderr, code := p.cli(t, "token", "--sub", "alice")
	if code == 0 || !strings.Contains(stderr, "jwt:sub") {
		t.Errorf("sluice token (no issuer) = exit %d, stderr %q; want a failure naming --subject-sources jwt:sub", code, stderr)
	}
}
