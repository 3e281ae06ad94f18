package ratelimit_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestServiceLogs sends denied requests through the middleware and reads
// what the Limiter wrote: a service writes no line per deny and no EMF by
// default, a Lambda both (as Sluice's Lambdas), and each is configurable.
func TestServiceLogs(t *testing.T) {
	s := newSetup(t) // 2 a minute on GET /orders/{id}
	for _, tt := range []struct {
		name           string
		lambda         bool
		o              ratelimit.Options
		denyLines, emf bool
	}{
		{name: "service default"},
		{name: "service asking for both", o: ratelimit.Options{LogLevel: slog.LevelInfo, EMF: ratelimit.EMFOn}, denyLines: true, emf: true},
		{name: "lambda default", lambda: true, denyLines: true, emf: true},
		{name: "lambda without", lambda: true, o: ratelimit.Options{LogLevel: slog.LevelWarn, EMF: ratelimit.EMFOff}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.lambda {
				t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "orders")
			}
			from := len(s.out.String())
			rl := s.limiterWith(t, tt.o)
			mux := http.NewServeMux()
			mux.HandleFunc("GET /orders/{id}", func(http.ResponseWriter, *http.Request) {})
			h := rl.Handler(mux, ratelimit.HandlerOptions{API: "orders"})
			denied := 0
			for range 4 {
				r := httptest.NewRequest("GET", "/orders/7", nil)
				r.Header.Set("X-Api-Key", "logs-"+strings.ReplaceAll(tt.name, " ", "-"))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code == http.StatusTooManyRequests {
					denied++
				}
			}
			rl.Close() // flushes the metrics
			out := s.out.String()[from:]
			if denied != 2 {
				t.Fatalf("%d of 4 requests denied, want 2 (2 a minute)", denied)
			}
			if got := strings.Count(out, `"rate limit denied"`); (got == 2) != tt.denyLines || (got != 0 && got != 2) {
				t.Errorf("%d deny lines, want 2: %v\n%s", got, tt.denyLines, out)
			}
			if got := strings.Contains(out, `"_aws"`); got != tt.emf {
				t.Errorf("EMF written = %v, want %v\n%s", got, tt.emf, out)
			}
		})
	}
}
