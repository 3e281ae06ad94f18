package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// latestDecisions are the points of ratelimit.decisions from the latest
// export that has any (cumulative, so the latest holds them all), as
// "attr=value …" → count, and how many exports had some.
func latestDecisions(rc *testenv.OTLPReceiver) (latest map[string]int64, exports int) {
	for _, e := range rc.Exports() {
		if points := e.Sums("", "ratelimit.decisions"); len(points) > 0 {
			latest, exports = points, exports+1
		}
	}
	return latest, exports
}

// TestLocalOTLP: sluice local, as the CLI runs it with the standard
// OTEL_EXPORTER_OTLP_ENDPOINT set, exports its decisions over OTLP/HTTP:
// a receiver decoding the real protobuf gets ratelimit.decisions for the
// demo API's allowed and denied requests, with the denying rule's policy,
// quota and window, rejected_by on the denial, and no subject anywhere.
// Without the variables nothing is exported (TestLocal* run without).
func TestLocalOTLP(t *testing.T) {
	rc := testenv.NewOTLPReceiver(t)
	p := startLocal(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.URL, "OTEL_METRIC_EXPORT_INTERVAL=100"})

	var rule string
	for i := range 4 {
		resp, body := p.get(t, "/search", "otel-alice")
		if i < 3 && resp.StatusCode != http.StatusOK || i == 3 && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("request %d to /search = %d %s", i+1, resp.StatusCode, body)
		}
		if i == 3 {
			var deny struct{ Rule string }
			if err := json.Unmarshal(body, &deny); err != nil || deny.Rule == "" {
				t.Fatalf("429 body %s: %v, want the rule's id", body, err)
			}
			rule = deny.Rule
		}
	}
	if resp, body := p.get(t, "/service/search", "otel-alice"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /service/search = %d %s", resp.StatusCode, body)
	}

	policy := "ratelimit.fail_open=false ratelimit.policy=" + rule + " ratelimit.policy.kind=rate ratelimit.policy.quota=3 ratelimit.policy.window=60 sluice.api=demo"
	want := map[string]int64{
		sorted("ratelimit.decision=allow " + policy):                            3,
		sorted("ratelimit.decision=deny ratelimit.rejected_by=limit " + policy): 1,
	}
	var got map[string]int64
	defer func() {
		if t.Failed() {
			latest, _ := latestDecisions(rc)
			t.Logf("%d exports; latest decisions: %v", len(rc.Exports()), latest)
		}
	}()
	testenv.Await(t, 20*time.Second, 50*time.Millisecond, "the decisions exported over OTLP", func() bool {
		got, _ = latestDecisions(rc)
		for k, n := range want {
			if got[k] != n {
				return false
			}
		}
		return slices.ContainsFunc(keys(got), func(k string) bool { return strings.Contains(k, "sluice.api=demo-service") })
	})
	for k := range got {
		if strings.Contains(k, "otel-alice") {
			t.Errorf("an exported attribute holds the subject: %s", k)
		}
	}
	for _, e := range rc.Exports() {
		if e.Path != "/v1/metrics" {
			t.Errorf("export to %s, want /v1/metrics", e.Path)
		}
	}
	_, n := latestDecisions(rc)
	t.Logf("%d exports with decisions; latest: %v", n, got)
}

// sorted is the attributes attrs ("k=v …") in the receiver's order.
func sorted(attrs string) string {
	kvs := strings.Fields(attrs)
	slices.Sort(kvs)
	return strings.Join(kvs, " ")
}

func keys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
