package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/testenv"
)

// floodSeed is a per-key limit of 10 a minute and, in the "ip" dimension,
// a per-IP floor of 50 a minute, on the whole demo API.
const floodSeed = `{"rules": [
  {"api": "demo", "route": "*", "subject": "*", "limit": 10, "period": "1m"},
  {"api": "demo", "route": "*", "subject": "*", "limit": 50, "period": "1m", "dimension": "ip"}
]}`

// TestLocalRandomKeyFlood: one client sends a new random x-api-key on every
// request to `sluice local` on a real Redis. Without the floor each request
// gets a fresh bucket: all pass and each writes a Redis key. With
// DIMENSIONS=ip=ip the floor admits 50 and the rest are denied without a
// write: the Redis keys stay at 50 keys + 1 floor, whatever the flood's
// length. The figures are logged for docs/SECURITY.md.
func TestLocalRandomKeyFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods sluice local with 2,000 requests: skipped with -short (make check)")
	}
	t.Parallel()
	seed := filepath.Join(t.TempDir(), "seed.json")
	if err := os.WriteFile(seed, []byte(floodSeed), 0o600); err != nil {
		t.Fatal(err)
	}
	const requests = 2000
	for _, tc := range []struct {
		name       string
		dimensions string
		allowed    int // the floor's burst; exactly, without a floor
		maxKeys    int
	}{
		{"without floor", "", requests, requests},
		{"with per-IP floor", "ip=ip", 50, 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := testenv.Redis(t)
			prefix := testenv.Prefix(t, "flood")
			t.Cleanup(func() { testenv.DeleteKeys(t, rdb, prefix) })
			// LOG_LEVEL=info: the denial lines, as the deployed stack's
			// Contributor Insights rules read them.
			p := startLocal(t, []string{"REDIS_URL=" + testenv.RedisURL(t), "DIMENSIONS=" + tc.dimensions, "LOG_LEVEL=info"},
				"--seed", seed, "--redis-prefix", prefix)
			var allowed, denied, other atomic.Int64
			var wg sync.WaitGroup
			jobs := make(chan int)
			start := time.Now()
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range jobs {
						req, _ := http.NewRequest(http.MethodGet, p.base+"/hello", nil)
						req.Header.Set("x-api-key", "random-"+strconv.Itoa(i)+"-"+testenv.Random(t))
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							other.Add(1)
							continue
						}
						resp.Body.Close()
						switch resp.StatusCode {
						case http.StatusOK:
							allowed.Add(1)
						case http.StatusTooManyRequests:
							denied.Add(1)
						default:
							other.Add(1)
						}
					}
				}()
			}
			for i := range requests {
				jobs <- i
			}
			close(jobs)
			wg.Wait()
			took := time.Since(start)
			var buckets int
			for _, k := range testenv.Keys(context.Background(), t, rdb, prefix) {
				if !strings.Contains(k, "{rules}") {
					buckets++
				}
			}
			t.Logf("FLOOD %s: %d requests in %v (%.0f/s): %d allowed, %d denied, %d other; %d Redis bucket keys (%.0f keys/s)",
				tc.name, requests, took.Round(time.Millisecond), float64(requests)/took.Seconds(),
				allowed.Load(), denied.Load(), other.Load(), buckets, float64(buckets)/took.Seconds())
			if other.Load() != 0 {
				t.Errorf("%d answers neither 200 nor 429", other.Load())
			}
			// The floor refills while the flood runs (50 a minute): what it
			// admits is its burst plus that, never more.
			most := int64(tc.allowed)
			if tc.dimensions != "" {
				most += int64(50*took.Seconds()/60) + 1
			}
			if got := allowed.Load(); got < int64(tc.allowed) || got > most {
				t.Errorf("allowed %d, want %d to %d", got, tc.allowed, most)
			}
			if maxKeys := int64(tc.maxKeys) + most - int64(tc.allowed); int64(buckets) > maxKeys {
				t.Errorf("%d Redis bucket keys, want at most %d (one per admitted key, and the floor)", buckets, maxKeys)
			}
			if tc.dimensions != "" {
				checkFloodAttributed(t, p, denied.Load())
			}
		})
	}
}

// checkFloodAttributed: the floor's denials are the flooding IP's doing,
// and say so where an operator looks: every denial line's principalId is
// the hash of the client's address (127.0.0.1), with dimension ip, and
// GET /admin/stats lists that hash as the top denied subject, with every
// denial; none of the one-off keys appears.
func checkFloodAttributed(t *testing.T, p *localProc, denied int64) {
	t.Helper()
	ipHash := localSubjectHash(t, "127.0.0.1")
	var lines int64
	for line := range strings.SplitSeq(p.out.String(), "\n") {
		var l struct{ Msg, PrincipalID, Dimension, RuleID string }
		if !strings.Contains(line, `"rate limit denied"`) {
			continue
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("decision line %q: %v", line, err)
		}
		if lines++; l.PrincipalID != ipHash || l.Dimension != "ip" {
			t.Fatalf("denial line %s: principalId %s dimension %q, want the IP's hash %s, dimension ip", line, l.PrincipalID, l.Dimension, ipHash)
		}
	}
	if lines != denied {
		t.Errorf("%d denial lines, want one per denied request (%d)", lines, denied)
	}
	resp, body := p.adminGet(t, "/admin/stats?window=15m&top=10")
	var rep stats.Report
	if err := json.Unmarshal(body, &rep); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET /admin/stats = %d %s (%v)", resp.StatusCode, body, err)
	}
	if len(rep.Subjects) != 1 || rep.Subjects[0].Subject != ipHash || rep.Subjects[0].Denied != denied {
		t.Errorf("stats top denied subjects = %+v, want only the IP's hash %s with all %d denials", rep.Subjects, ipHash, denied)
	}
}
