package local

import (
	"net/http"
	"slices"
	"testing"
)

// TestRun starts the local stack in process on the embedded Redis and
// store (startStack, which also checks that the end of its context stops
// it cleanly): the banner names its address, the demo API answers through
// the authorizer (200, then 429 on the seeded 3-a-minute GET /search), and
// the admin API wants the token.
func TestRun(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	var got []int
	for range 4 {
		resp, _ := s.do(t, http.MethodGet, "/search", "alice", nil)
		got = append(got, resp.StatusCode)
	}
	if want := []int{200, 200, 200, 429}; !slices.Equal(got, want) {
		t.Errorf("GET /search ×4 = %v, want %v", got, want)
	}
	if resp, _ := s.do(t, http.MethodGet, "/hello", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /hello without a subject = %d, want 401", resp.StatusCode)
	}
	// s.do sends the token on /admin/ paths; without it, by hand.
	resp, err := http.Get(s.base + "/admin/rules")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if with, _ := s.do(t, http.MethodGet, "/admin/rules", "", nil); resp.StatusCode != 401 || with.StatusCode != 200 {
		t.Errorf("GET /admin/rules = %d without the token, %d with it; want 401, 200", resp.StatusCode, with.StatusCode)
	}
}
