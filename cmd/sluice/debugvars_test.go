package main

import (
	"github.com/sluicehq/sluice/internal/local"

	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestLocalDebugVars: sluice local serves its goroutines and heap at
// /admin/debug/vars, behind the admin token.
func TestLocalDebugVars(t *testing.T) {
	t.Parallel()
	p := startLocal(t, nil)
	get := func(token string) (int, []byte) {
		req, err := http.NewRequest(http.MethodGet, p.base+"/admin/debug/vars", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if status, body := get(""); status != http.StatusUnauthorized {
		t.Errorf("GET /admin/debug/vars without the token = %d %s, want 401", status, body)
	}
	status, body := get(p.token)
	var v local.DebugVars
	if status != http.StatusOK || json.Unmarshal(body, &v) != nil || v.Goroutines < 2 || v.HeapAllocBytes == 0 || v.SysBytes == 0 {
		t.Errorf("GET /admin/debug/vars = %d %s, want 200 with goroutines and heap", status, body)
	}
}
