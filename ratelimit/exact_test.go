package ratelimit_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/ratelimit"
)

// exactLimit is the rule of the exactness tests: 60 a day for every
// caller on api "exact", so no token refills while they run.
const exactLimit = 60

// The variables a second process of TestHandlerExactProcesses reads.
const (
	childVar  = "SLUICE_TEST_MW_CHILD" // the setup: redis URL, database URL, prefix, start time (Unix ns)
	childSent = 160                    // requests the second process sends
)

// blast sends n GETs of one caller from 16 goroutines, all at once after
// start, to a server of rl's middleware, and returns how many were
// admitted (200) and how many answered anything but 200 or 429.
func blast(t *testing.T, rl *ratelimit.Limiter, n int, start time.Time) (admitted, odd int64, slowest time.Duration) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(http.ResponseWriter, *http.Request) {})
	srv := httptest.NewServer(rl.Handler(mux, ratelimit.HandlerOptions{API: "exact"}))
	defer srv.Close()
	var (
		wg   sync.WaitGroup
		ok   atomic.Int64
		bad  atomic.Int64
		next atomic.Int64
		slow atomic.Int64 // the slowest request, ns
	)
	time.Sleep(time.Until(start)) // sleep: this and the other process send from one wall-clock instant
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				req, _ := http.NewRequest("GET", srv.URL+"/items/1", nil)
				req.Header.Set("X-Api-Key", "shared")
				t0 := time.Now()
				resp, err := srv.Client().Do(req)
				for d := int64(time.Since(t0)); ; {
					if s := slow.Load(); d <= s || slow.CompareAndSwap(s, d) {
						break
					}
				}
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
				default:
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return ok.Load(), bad.Load(), time.Duration(slow.Load())
}

// exactSetup is a deployment with the exactness rule.
func exactSetup(t *testing.T) setup {
	s := newSetup(t)
	s.addRules(t, map[string]any{"api": "exact", "route": "*", "subject": "*", "limit": exactLimit, "period": "24h"})
	return s
}

// exactOptions are the Limiter's: a Redis budget no loaded test machine
// exhausts, so no decision fails open (which would admit more).
var exactOptions = ratelimit.Options{Timeout: 2 * time.Second}

// TestHandlerExactGoroutines sends 320 requests of one caller from 16
// goroutines through the middleware over HTTP: exactly the rule's 60 are
// admitted, no more (over-admission) and no fewer.
func TestHandlerExactGoroutines(t *testing.T) {
	s := exactSetup(t)
	admitted, odd, _ := blast(t, s.limiterWith(t, exactOptions), 320, time.Now())
	if admitted != exactLimit || odd != 0 {
		t.Errorf("admitted %d of 320 (%d neither 200 nor 429), want exactly %d", admitted, odd, exactLimit)
	}
}

// TestHandlerExactProcesses runs the middleware in two processes (this
// test binary again, as a second service instance) on one Redis, each
// sending 160 requests of one caller at the same instant: together they
// admit exactly the rule's 60.
func TestHandlerExactProcesses(t *testing.T) {
	if v := os.Getenv(childVar); v != "" {
		runChild(t, v)
		return
	}
	s := exactSetup(t)
	rl := s.limiterWith(t, exactOptions)
	start := time.Now().Add(2 * time.Second) // both built and listening by then
	cmd := exec.Command(os.Args[0], "-test.run=^TestHandlerExactProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%s|%d", childVar, s.redisURL, s.dbURL, s.prefix, start.UnixNano()))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	admitted, odd, slowest := blast(t, rl, 160, start)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("second process: %v\n%s", err, out.Bytes())
	}
	m := regexp.MustCompile(`child admitted=(\d+) odd=(\d+) slowest=(\d+)`).FindSubmatch(out.Bytes())
	if m == nil {
		t.Fatalf("second process said no count:\n%s", out.Bytes())
	}
	childAdmitted, _ := strconv.ParseInt(string(m[1]), 10, 64)
	childOdd, _ := strconv.ParseInt(string(m[2]), 10, 64)
	childSlowest, _ := strconv.ParseInt(string(m[3]), 10, 64)
	slowest = max(slowest, time.Duration(childSlowest))
	t.Logf("admitted: this process %d, the other %d; the slowest request took %v", admitted, childAdmitted, slowest)
	switch {
	case admitted+childAdmitted > exactLimit || odd+childOdd != 0:
		t.Errorf("admitted %d + %d of 2×160 (%d, %d neither 200 nor 429), want exactly %d together", admitted, childAdmitted, odd, childOdd, exactLimit)
	case admitted+childAdmitted < exactLimit && slowest > limiter.DefaultLeaseTTL: // exactOptions leaves the TTL at its default
		// A process stalled beyond a lease's TTL (CI under load once):
		// its lease's tokens went back while the other's deny was cached,
		// which admits fewer, never more. Over-admission is still checked.
		t.Logf("admitted %d + %d, fewer than %d: a request stalled %v, beyond the lease TTL; the lower bound is not checked", admitted, childAdmitted, exactLimit, slowest)
	case admitted+childAdmitted != exactLimit:
		t.Errorf("admitted %d + %d of 2×160, want exactly %d together", admitted, childAdmitted, exactLimit)
	}
	if childAdmitted == 0 || admitted == 0 {
		t.Logf("one process admitted none: the two did not overlap")
	}
}

// runChild is the second process of TestHandlerExactProcesses.
func runChild(t *testing.T, v string) {
	m := regexp.MustCompile(`^(.*)\|(.*)\|(.*)\|(\d+)$`).FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("%s = %q", childVar, v)
	}
	ns, _ := strconv.ParseInt(m[4], 10, 64)
	s := setup{redisURL: m[1], dbURL: m[2], prefix: m[3], out: nil}
	o := exactOptions
	o.Out = io.Discard
	o.RedisURL, o.Prefix = s.redisURL, s.prefix
	rl, err := ratelimit.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	admitted, odd, slowest := blast(t, rl, childSent, time.Unix(0, ns))
	fmt.Printf("child admitted=%d odd=%d slowest=%d\n", admitted, odd, slowest)
}
