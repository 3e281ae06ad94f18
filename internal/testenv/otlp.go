package testenv

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	collector "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPReceiver is an OTLP/HTTP metrics receiver, for the tests of what an
// exporter sends: it decodes each export's protobuf request, as a
// collector does, answers it, and keeps it.
type OTLPReceiver struct {
	// URL is the receiver's base URL (OTEL_EXPORTER_OTLP_ENDPOINT).
	URL string

	mu      sync.Mutex
	exports []OTLPExport
}

// OTLPExport is one export request the receiver decoded.
type OTLPExport struct {
	Path, ContentType string
	Request           *collector.ExportMetricsServiceRequest
}

// NewOTLPReceiver starts a receiver on a loopback port, closed when the
// test ends.
func NewOTLPReceiver(tb testing.TB) *OTLPReceiver {
	tb.Helper()
	rc := &OTLPReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(rc.serve))
	tb.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

func (rc *OTLPReceiver) serve(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	req := &collector.ExportMetricsServiceRequest{}
	if err == nil {
		err = proto.Unmarshal(b, req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.exports = append(rc.exports, OTLPExport{Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"), Request: req})
	rc.mu.Unlock()
	out, _ := proto.Marshal(&collector.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out) //nolint:errcheck // the exporter reads it
}

// Exports returns the exports received so far, oldest first.
func (rc *OTLPReceiver) Exports() []OTLPExport {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.exports)
}

// Sums returns the integer points of e's sum metric name, from the
// instrumentation scope named scope ("" for any), added up by attribute
// set: "key=value …" (sorted) → value. It is empty when e has none.
func (e OTLPExport) Sums(scope, name string) map[string]int64 {
	points := map[string]int64{}
	for _, rm := range e.Request.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			if scope != "" && sm.GetScope().GetName() != scope {
				continue
			}
			for _, m := range sm.Metrics {
				if m.Name != name {
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
	return points
}
