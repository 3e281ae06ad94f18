package adminclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestConsoleProxySigns: `sluice console`'s proxy signs each call with the
// operator's AWS credentials (SigV4 for execute-api), forwards what the
// admin API reads (method, path, query, body, If-Match) and nothing of the
// browser's own (its bearer token, cookies), and hands the answer back as
// it came, error statuses and problem documents included.
func TestConsoleProxySigns(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "",
		"AWS_REGION": "eu-west-1", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
	} {
		t.Setenv(k, v)
	}
	var got *http.Request
	var gotBody string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Set-Cookie", "x=y")
		w.WriteHeader(http.StatusPreconditionFailed)
		io.WriteString(w, `{"type":"about:blank","title":"Precondition Failed","status":412}`)
	}))
	defer api.Close()
	c, err := New(context.Background(), Options{Endpoint: api.URL + "/prod", SigV4: true, Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPut, "/rules/r%201?x=1", strings.NewReader(`{"limit":5}`))
	req.Header.Set("Authorization", "Bearer browser-token")
	req.Header.Set("Cookie", "session=1")
	req.Header.Set("If-Match", `"3"`)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	c.Proxy().ServeHTTP(rec, req)

	if got == nil {
		t.Fatal("the admin API got no request")
	}
	if auth := got.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") ||
		!strings.Contains(auth, "/eu-west-1/execute-api/aws4_request") {
		t.Errorf("Authorization = %q, want a SigV4 signature for execute-api in eu-west-1", auth)
	}
	checks := []struct{ name, got, want string }{
		{"method", got.Method, "PUT"},
		{"path", got.URL.EscapedPath(), "/prod/rules/r%201"},
		{"query", got.URL.RawQuery, "x=1"},
		{"body", gotBody, `{"limit":5}`},
		{"If-Match", got.Header.Get("If-Match"), `"3"`},
		{"Cookie", got.Header.Get("Cookie"), ""},
		{"status back", http.StatusText(rec.Code), "Precondition Failed"},
		{"problem back", rec.Body.String(), `{"type":"about:blank","title":"Precondition Failed","status":412}`},
		{"content type back", rec.Header().Get("Content-Type"), "application/problem+json"},
		{"no cookie back", rec.Header().Get("Set-Cookie"), ""},
		{"upstream named", rec.Header().Get("Sluice-Upstream"), api.URL + "/prod"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}

	// An admin API that cannot be reached is a 502 problem, not a hang.
	api.Close()
	rec = httptest.NewRecorder()
	c.Proxy().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/rules", nil))
	if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), `"status":502`) {
		t.Errorf("unreachable API = %d %s, want a 502 problem", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("Sluice-Upstream"); got != api.URL+"/prod" {
		t.Errorf("unreachable API: %s = %q, want the endpoint", "Sluice-Upstream", got)
	}
}
