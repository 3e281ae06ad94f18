package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/testenv"
)

// otlpReceiver is an OTLP/HTTP metrics receiver: it decodes each export's
// protobuf and keeps the points of ratelimit.decisions from the latest,
// as "attr=value …" → count (cumulative, so the latest holds them all).
type otlpReceiver struct {
	mu      sync.Mutex
	paths   []string
	latest  map[string]int64
	exports int
}

func (rc *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	req := &collector.ExportMetricsServiceRequest{}
	if err == nil {
		err = proto.Unmarshal(b, req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	points := map[string]int64{}
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != "ratelimit.decisions" {
					continue
				}
				for _, p := range m.GetSum().GetDataPoints() {
					var kvs []string
					for _, kv := range p.Attributes {
						var s string
						switch v := kv.Value.GetValue().(type) {
						case *common.AnyValue_StringValue:
							s = v.StringValue
						case *common.AnyValue_IntValue:
							s = fmt.Sprint(v.IntValue)
						case *common.AnyValue_BoolValue:
							s = fmt.Sprint(v.BoolValue)
						}
						kvs = append(kvs, kv.Key+"="+s)
					}
					slices.Sort(kvs)
					points[strings.Join(kvs, " ")] += p.GetAsInt()
				}
			}
		}
	}
	rc.mu.Lock()
	rc.paths = append(rc.paths, r.URL.Path)
	if len(points) > 0 {
		rc.latest, rc.exports = points, rc.exports+1
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&collector.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out) //nolint:errcheck // the exporter reads it
}

func (rc *otlpReceiver) points() map[string]int64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.latest
}

// TestLocalOTLP: sluice local, as the CLI runs it with the standard
// OTEL_EXPORTER_OTLP_ENDPOINT set, exports its decisions over OTLP/HTTP:
// a receiver decoding the real protobuf gets ratelimit.decisions for the
// demo API's allowed and denied requests, with the denying rule's policy,
// quota and window, rejected_by on the denial, and no subject anywhere.
// Without the variables nothing is exported (TestLocal* run without).
func TestLocalOTLP(t *testing.T) {
	rc := &otlpReceiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	p := startLocal(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL, "OTEL_METRIC_EXPORT_INTERVAL=100"})

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
			rc.mu.Lock()
			t.Logf("exports to %v; latest decisions: %v", rc.paths, rc.latest)
			rc.mu.Unlock()
		}
	}()
	testenv.Await(t, 20*time.Second, 50*time.Millisecond, "the decisions exported over OTLP", func() bool {
		got = rc.points()
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
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, path := range rc.paths {
		if path != "/v1/metrics" {
			t.Errorf("export to %s, want /v1/metrics", path)
		}
	}
	t.Logf("%d exports with decisions; latest: %v", rc.exports, got)
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
