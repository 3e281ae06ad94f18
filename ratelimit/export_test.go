package ratelimit

import (
	"net/http"
	"net/http/httptest"
	"time"
)

// SetKeyChecks sets how often a Limiter checks its subject hash key again
// while refused and while accepted, for the tests; the returned func puts
// back the defaults.
func SetKeyChecks(retry, recheck time.Duration) (restore func()) {
	r, c := keyRetry, keyRecheck
	keyRetry, keyRecheck = retry, recheck
	return func() { keyRetry, keyRecheck = r, c }
}

// BenchRequest is the benchmarks' GET /orders/42 of subject bench-user,
// with what a browser or SDK request carries beside the subject's header,
// so that they pay for a real request's map.
func BenchRequest() *http.Request {
	req := httptest.NewRequest("GET", "/orders/42", nil)
	req.Header.Set("X-Api-Key", "bench-user")
	for k, v := range map[string]string{
		"Accept": "application/json", "Accept-Encoding": "gzip, deflate, br", "Accept-Language": "en-GB,en;q=0.9",
		"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36", "X-Forwarded-For": "203.0.113.7",
		"X-Forwarded-Proto": "https", "X-Amzn-Trace-Id": "Root=1-5e9f0c65-1de4d666d4dd26aced652b6c", "Cache-Control": "no-cache",
	} {
		req.Header.Set(k, v)
	}
	return req
}

// Discard is a ResponseWriter that keeps nothing, so a benchmark measures
// the middleware, not a recorder.
type Discard struct{ H http.Header }

func (d *Discard) Header() http.Header         { return d.H }
func (d *Discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *Discard) WriteHeader(int)             {}
