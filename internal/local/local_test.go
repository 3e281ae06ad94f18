package local

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRun starts the local stack in process on the embedded Redis and
// store: the banner names its address, the demo API answers through the
// authorizer (200, then 429 on the seeded 3-a-minute GET /search), the
// admin API wants the token, and the end of ctx stops it cleanly.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	env := map[string]string{"LOG_LEVEL": "warn", "REDIS_TIMEOUT": "1s"} // a loaded make test fails 25 ms calls open
	go func() {
		done <- Run(ctx, Config{Addr: "127.0.0.1:0", API: "demo", Stage: "local", Seed: "../../examples/rules.json", SeedSet: true,
			Token: "tok", StateDir: t.TempDir(), Getenv: func(k string) string { return env[k] }}, w, io.Discard)
		w.Close()
	}()
	base := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if m := regexp.MustCompile(`demo API\s+(http://\S+)/`).FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
		}
		if strings.HasPrefix(sc.Text(), "Ctrl-C stops") {
			break
		}
	}
	go io.Copy(io.Discard, r) //nolint:errcheck // the rest of the banner
	if base == "" {
		cancel()
		t.Fatalf("no banner; Run = %v", <-done)
	}
	get := func(path, key, token string) int {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if key != "" {
			req.Header.Set("x-api-key", key)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var got []int
	for range 4 {
		got = append(got, get("/search", "alice", ""))
	}
	if want := []int{200, 200, 200, 429}; !slices.Equal(got, want) {
		t.Errorf("GET /search ×4 = %v, want %v", got, want)
	}
	if s := get("/hello", "", ""); s != http.StatusUnauthorized {
		t.Errorf("GET /hello without a subject = %d, want 401", s)
	}
	if s, s2 := get("/admin/rules", "", ""), get("/admin/rules", "", "tok"); s != 401 || s2 != 200 {
		t.Errorf("GET /admin/rules = %d without the token, %d with it; want 401, 200", s, s2)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after its context ended = %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Error("Run did not return within 15s of its context ending")
	}
}
