package adminclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestExecuteAPIRegion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host   string
		region string
		ok     bool
	}{
		{"abc123.execute-api.eu-west-1.amazonaws.com", "eu-west-1", true},
		{"ABC.EXECUTE-API.us-east-1.amazonaws.com", "us-east-1", true},
		{"127.0.0.1", "", false},
		{"example.com", "", false},
		{"execute-api.us-east-1.amazonaws.com", "", false},
	}
	for _, tt := range tests {
		region, ok := ExecuteAPIRegion(tt.host)
		if region != tt.region || ok != tt.ok {
			t.Errorf("ExecuteAPIRegion(%q) = %q, %v, want %q, %v", tt.host, region, ok, tt.region, tt.ok)
		}
	}
}

// TestSigV4 checks that SigV4 signs requests for execute-api with the
// default credential chain (here: the environment) and drops the token.
func TestSigV4(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_PROFILE", "")

	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"rules":[]}`))
	}))
	defer srv.Close()

	ctx := context.Background()
	c, err := New(ctx, Options{Endpoint: srv.URL + "/prod", SigV4: true, Token: "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := c.GetJSON(ctx, "/rules", nil, &out); err != nil {
		t.Fatalf("GetJSON: %v", err)
	}
	auth := got.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/execute-api/aws4_request") {
		t.Errorf("Authorization = %q, want a SigV4 signature for execute-api in eu-west-1", auth)
	}
	if got.Get("X-Amz-Date") == "" {
		t.Errorf("signed request headers = %v, want X-Amz-Date", got)
	}
}

// TestAPIError: a problem+json answer becomes an *APIError with its
// fields; any other body is kept as text; a 404 from an endpoint without
// /admin says where sluice local's admin API is.
func TestAPIError(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/admin/rules", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("Authorization = %q, want the bearer token", r.Header.Get("Authorization"))
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"type":"x","title":"Bad Request","status":400,"detail":"The request is invalid; see errors.","errors":[{"field":"limit","reason":"must be at least 0"}]}`))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"message":"No resource matches /rules"}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	tests := []struct {
		endpoint string
		status   int
		want     []string
	}{
		{srv.URL + "/admin", 400, []string{"400 Bad Request: The request is invalid; see errors.", "\n  limit: must be at least 0"}},
		{srv.URL, 404, []string{"404 Not Found", "No resource matches /rules", "--endpoint " + srv.URL + " has no /admin: sluice local's admin API is " + srv.URL + "/admin"}},
	}
	for _, tt := range tests {
		c, err := New(ctx, Options{Endpoint: tt.endpoint, Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		err = c.GetJSON(ctx, "/rules", nil, &struct{}{})
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != tt.status {
			t.Fatalf("GET %s/rules = %v, want an *APIError %d", tt.endpoint, err, tt.status)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("GET %s/rules error %q, want it to contain %q", tt.endpoint, err, w)
			}
		}
	}
}
