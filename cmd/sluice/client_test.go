package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSigV4 checks that --sigv4 signs requests for execute-api with the
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

	var out, errb bytes.Buffer
	code := run(context.Background(), env{stdout: &out, stderr: &errb}, []string{"rules", "ls", "--endpoint", srv.URL + "/prod", "--sigv4", "--token", "ignored"})
	if code != 0 {
		t.Fatalf("rules ls --sigv4 = exit %d: %s", code, errb.String())
	}
	auth := got.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/execute-api/aws4_request") {
		t.Errorf("Authorization = %q, want a SigV4 signature for execute-api in eu-west-1", auth)
	}
	if got.Get("X-Amz-Date") == "" {
		t.Errorf("signed request headers = %v, want X-Amz-Date", got)
	}
}

// TestAdminErrors checks that problem+json answers become readable errors
// and exit status 1, and that usage errors are status 2.
func TestAdminErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("Authorization = %q, want the bearer token", r.Header.Get("Authorization"))
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"type":"x","title":"Bad Request","status":400,"detail":"The request is invalid; see errors.","errors":[{"field":"limit","reason":"must be at least 0"}]}`))
	}))
	defer srv.Close()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rules", "put", "--api", "demo", "--route", "*", "--subject", "*", "--limit", "1", "--period", "1m"}, 1, "limit: must be at least 0"},
		{[]string{"rules", "get"}, 2, "rules get: missing ID"},
		{[]string{"rules", "frob"}, 2, "unknown command"},
		{[]string{"rules", "ls", "-o", "yaml"}, 2, "want table or json"},
		{[]string{"nope"}, 2, "unknown command"},
		{[]string{"load", "--rate", "-1", "http://x"}, 2, "--rate"},
		{[]string{"load", "ftp://x"}, 2, "not an http(s) URL"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		args := append(tt.args, "--endpoint", srv.URL, "--token", "tok")
		if tt.args[0] == "load" || tt.args[0] == "nope" {
			args = tt.args
		}
		code := run(context.Background(), env{stdout: &out, stderr: &errb}, args)
		if code != tt.code || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("sluice %v = exit %d, stderr %q, want exit %d mentioning %q", tt.args, code, errb.String(), tt.code, tt.want)
		}
	}
}
