package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseRateLimitPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []policy
	}{
		{"", nil},
		{"10;w=60", []policy{{Limit: 10, Burst: 10, Period: time.Minute}}},
		{"10;w=1;burst=25", []policy{{Limit: 10, Burst: 25, Period: time.Second}}},
		{`"api";q=100;w=60, "route";q=5;w=3600`, []policy{
			{Limit: 100, Burst: 100, Period: time.Minute},
			{Limit: 5, Burst: 5, Period: time.Hour},
		}},
		{`"x";q=0;w=60`, []policy{{Limit: 0, Burst: 0, Period: time.Minute}}},
		{"garbage, 5", nil},
		{`"p";w=60`, nil},
	}
	for _, tt := range tests {
		got := parseRateLimitPolicy(tt.in)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseRateLimitPolicy(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestCheckSubject(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		allowed int64
		window  time.Duration
		header  string
		cfg     Config
		checked bool
		over    bool
		wantBnd float64
	}{
		{"within burst", 10, 0, "10;w=60", Config{}, true, false, 10},
		{"one over", 11, 0, "10;w=60", Config{}, true, true, 10},
		{"refill counted", 15, 30 * time.Second, "10;w=60", Config{}, true, false, 15},
		{"tightest policy", 6, 0, `"a";q=100;w=60, "r";q=5;w=60`, Config{}, true, true, 5},
		{"policies seen on different responses", 6, 0, `"a";q=100;w=60|"r";q=5;w=60`, Config{}, true, true, 5},
		{"flags override", 11, 0, "10;w=60", Config{Limit: 10, Burst: 20, Period: time.Minute}, true, false, 20},
		{"no policy", 1000, 0, "", Config{}, false, false, 0},
	}
	for _, tt := range tests {
		s := &subjectStats{allowed: tt.allowed, first: t0, lastAllowed: t0.Add(tt.window)}
		for _, h := range strings.Split(tt.header, "|") {
			if h != "" {
				if s.policies == nil {
					s.policies = map[string]struct{}{}
				}
				s.policies[h] = struct{}{}
			}
		}
		got := checkSubject("s", s, tt.cfg)
		if got.Checked != tt.checked || got.Over != tt.over || (tt.checked && got.Bound != tt.wantBnd) {
			t.Errorf("%s: checkSubject = checked %v over %v bound %v, want %v %v %v", tt.name, got.Checked, got.Over, got.Bound, tt.checked, tt.over, tt.wantBnd)
		}
	}
}

// fakeLimiter is an exact in-process token bucket per x-api-key, answering
// like the local gateway (429 when empty, RateLimit-Policy always). With
// leak set it admits one request in 10 regardless, to prove the report
// catches over-admission.
func fakeLimiter(limit, burst int64, period time.Duration, leak bool) http.Handler {
	type bucket struct {
		tokens float64
		at     time.Time
	}
	var mu sync.Mutex
	buckets := map[string]*bucket{}
	n := 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		if key == "" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		now := time.Now()
		b := buckets[key]
		if b == nil {
			b = &bucket{tokens: float64(burst), at: now}
			buckets[key] = b
		}
		b.tokens = min(float64(burst), b.tokens+float64(limit)*now.Sub(b.at).Seconds()/period.Seconds())
		b.at = now
		n++
		ok := b.tokens >= 1 || (leak && n%10 == 0)
		if b.tokens >= 1 {
			b.tokens--
		}
		mu.Unlock()
		w.Header().Set("RateLimit-Policy", `"api";q=`+itoa(limit)+`;w=`+itoa(int64(period/time.Second))+`;burst=`+itoa(burst))
		if !ok {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestGenerateLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		leak bool
		over bool
	}{
		{"exact limiter", false, false},
		{"leaky limiter", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(fakeLimiter(5, 5, time.Second, tt.leak))
			defer srv.Close()
			c := Config{URL: srv.URL, Method: http.MethodGet, Rate: 400, Concurrency: 8, Duration: 700 * time.Millisecond,
				Subjects: 3, SubjectHeader: "x-api-key", SubjectPrefix: "load-", Timeout: time.Second}
			rep, err := Run(context.Background(), c, nil, false)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if rep.Errors != 0 || rep.Allowed == 0 || rep.Denied == 0 {
				t.Fatalf("Run = allowed %d denied %d errors %d, want some allowed, some denied, no errors", rep.Allowed, rep.Denied, rep.Errors)
			}
			if got := rep.OverAdmitted > 0; got != tt.over {
				t.Errorf("Run over-admitted = %d subjects, want over-admission %v; subjects %+v", rep.OverAdmitted, tt.over, rep.Subjects)
			}
			if len(rep.Subjects) != 3 {
				t.Errorf("Run subjects = %d, want 3", len(rep.Subjects))
			}
		})
	}
}

func TestGenerateLoadRequestBound(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	c := Config{URL: srv.URL, Method: http.MethodGet, Concurrency: 4, Duration: 10 * time.Second, Requests: 37,
		Subjects: 2, SubjectHeader: "x-api-key", Timeout: time.Second}
	start := time.Now()
	rep, err := Run(context.Background(), c, nil, false)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Sent != 37 || rep.Allowed != 37 {
		t.Errorf("Run(requests 37) = sent %d allowed %d, want 37 37", rep.Sent, rep.Allowed)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("Run(requests 37) took %v, want it to stop at the count", time.Since(start))
	}
	if rep.Unchecked != 2 {
		t.Errorf("Run without policy: unchecked = %d, want 2", rep.Unchecked)
	}
}

// TestSubjectWindowOutOfOrder: requests recorded out of order (their times
// are taken before the lock) still give the widest window: the earliest
// start and the latest admitted end.
func TestSubjectWindowOutOfOrder(t *testing.T) {
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	var s subjectStats
	for _, ms := range []int{5, 2, 9} {
		s.started(at(ms))
	}
	for _, ms := range []int{40, 100, 70} {
		s.admitted(at(ms))
	}
	if !s.first.Equal(at(2)) || !s.lastAllowed.Equal(at(100)) || s.allowed != 3 {
		t.Errorf("first %v, last admitted %v, allowed %d; want +2ms, +100ms, 3", s.first.Sub(base), s.lastAllowed.Sub(base), s.allowed)
	}
}
