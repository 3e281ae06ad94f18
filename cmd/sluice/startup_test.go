package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestLocalStartupAnswers polls `sluice local` from before the process
// starts until it has printed its banner: no request ever gets the
// standard library's plain-text "404 page not found". While its routes are
// being mounted it answers 503 problem+json with Retry-After; before, / and
// /admin/* answered plain-text 404s for 35-170 ms. With a development JWT
// issuer too (SUBJECT_SOURCES=jwt:sub), whose JWKS is served from the start.
func TestLocalStartupAnswers(t *testing.T) {
	cases := []struct {
		name string
		env  func(t *testing.T) []string
		args func(t *testing.T) []string
	}{
		{"embedded", func(*testing.T) []string { return nil }, nil},
		{"redis+postgres", func(t *testing.T) []string {
			return []string{"REDIS_URL=" + testenv.RedisURL(t), "DATABASE_URL=" + pgtest.NewEmptyDatabase(t)}
		}, func(t *testing.T) []string { return []string{"--redis-prefix", testenv.Prefix(t, "startup")} }},
		{"jwt issuer", func(*testing.T) []string { return []string{"SUBJECT_SOURCES=jwt:sub"} }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := tc.env(t)
			port := testenv.FreePorts(t, 1, 0)[0]
			base := "http://127.0.0.1:" + strconv.Itoa(port)
			client := &http.Client{Timeout: 2 * time.Second}

			type seen struct {
				status int
				ctype  string
				body   string
			}
			var (
				mu     sync.Mutex
				got    = map[string][]seen{}
				stop   = make(chan struct{})
				pollWG sync.WaitGroup
			)
			for _, path := range []string{"/hello", "/admin/rules", "/console/"} {
				pollWG.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+path, nil)
						req.Header.Set("x-api-key", "startup")
						resp, err := client.Do(req)
						if err != nil { // not listening yet
							time.Sleep(time.Millisecond) // sleep: the process is starting; redial without spinning
							continue
						}
						b, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						mu.Lock()
						got[path] = append(got[path], seen{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)})
						mu.Unlock()
					}
				})
			}
			args := []string{"--addr", "127.0.0.1:" + strconv.Itoa(port)}
			if tc.args != nil {
				args = append(args, tc.args(t)...)
			}
			p := startLocal(t, env, args...)
			mu.Lock()
			atBanner := map[string]int{}
			for path, answers := range got {
				atBanner[path] = len(answers)
			}
			mu.Unlock()
			testenv.Await(t, 5*time.Second, time.Millisecond, "a few answers from the mounted routes", func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, path := range []string{"/hello", "/admin/rules", "/console/"} {
					if len(got[path]) < atBanner[path]+3 {
						return false
					}
				}
				return true
			})
			close(stop)
			pollWG.Wait()
			// A connection the transport dialed and never used is a new
			// connection to the server, which http.Server.Shutdown waits
			// up to 5 s for: Ctrl-C below would then run out of the stack's
			// 5 s grace (seen once in make test from a clean clone).
			client.CloseIdleConnections()

			mu.Lock()
			defer mu.Unlock()
			for path, answers := range got {
				counts := map[string]int{}
				for _, a := range answers {
					counts[fmt.Sprint(a.status, " ", a.ctype)]++
					switch {
					case strings.HasPrefix(a.ctype, "text/plain") && a.status == http.StatusNotFound:
						t.Errorf("GET %s during startup = 404 %s %q: a route not mounted yet", path, a.ctype, a.body)
					case a.status == http.StatusServiceUnavailable && (a.ctype != "application/problem+json" || !strings.Contains(a.body, "starting")):
						t.Errorf("GET %s during startup = 503 %s %q, want problem+json saying it is starting", path, a.ctype, a.body)
					}
				}
				t.Logf("GET %s from the process's start to its banner: %v", path, counts)
				if last := answers[len(answers)-1]; last.status == http.StatusServiceUnavailable {
					t.Errorf("GET %s after the banner = 503, want the mounted route", path)
				}
			}
			if len(got) != 3 {
				t.Errorf("answers for %d of 3 paths: %v", len(got), got)
			}
			path, want := "/hello", http.StatusOK
			if tc.name == "jwt issuer" {
				path = "/.well-known/jwks.json" // an API key is no subject there
			}
			if resp, _ := p.get(t, path, "alice"); resp.StatusCode != want {
				t.Errorf("GET %s after start = %d, want %d", path, resp.StatusCode, want)
			}
		})
	}
}
