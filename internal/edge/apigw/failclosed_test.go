package apigw_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/metrics"
)

// TestMetricsFailClosed: with Redis down, a request on a failure_mode
// closed rule is denied and counted as FailClosed, one on a fail-open rule
// as FailOpen, each on the flush's line, through Invoke (what the Lambda
// runtime calls). Without the count, the outage shows only as 429s.
func TestMetricsFailClosed(t *testing.T) {
	t.Parallel()
	lim := downLimiter(t)
	sources, err := identity.ParseSources("header:x-api-key")
	if err != nil {
		t.Fatal(err)
	}
	var emf bytes.Buffer
	m := metrics.New(metrics.Options{W: &emf, Function: "fn", Interval: time.Hour,
		Gauges: func() (bool, time.Duration) { return lim.Stats().Breaker != limiter.BreakerClosed, 0 }})
	h := apigw.NewHandler(decision(lim, authorizer.Options{Sources: sources, Logger: jsonLog(io.Discard), Metrics: m},
		failureModes()...), apigw.Options{})

	closed := restEvent("alice")
	open := restEvent("alice")
	open.Resource, open.Path, open.RequestContext.ResourcePath = "/hello", "/hello", "/hello"
	open.MethodArn = strings.Replace(methodARN, "orders/42", "hello", 1)
	for _, tc := range []struct {
		name   string
		ev     any
		effect string
	}{{"fail-closed rule", closed, "Deny"}, {"fail-open rule", open, "Allow"}} {
		payload, _ := json.Marshal(tc.ev)
		out, err := h.Invoke(t.Context(), payload)
		if err != nil {
			t.Fatalf("%s: Invoke error = %v", tc.name, err)
		}
		if !strings.Contains(string(out), `"Effect":"`+tc.effect+`"`) {
			t.Errorf("%s: Invoke = %s, want Effect %s", tc.name, out, tc.effect)
		}
	}
	m.Flush()
	got := map[string]float64{}
	for _, l := range emfLines[map[string]any](t, &emf) {
		if !strings.Contains(l.text, `"Name":"FailClosed"`) && l.v["FailClosed"] != nil {
			t.Errorf("EMF line %q carries FailClosed without declaring it", l.text)
		}
		for _, k := range []string{"FailClosed", "FailOpen"} {
			if n, ok := l.v[k].(float64); ok {
				got[k] += n
			}
		}
	}
	for k, want := range map[string]float64{"FailClosed": 1, "FailOpen": 1} {
		if got[k] != want {
			t.Errorf("EMF %s = %v, want %v (lines: %s)", k, got[k], want, emf.String())
		}
	}
}
