// Command service is a net/http service on ECS, EKS or EC2 behind Sluice's
// limits, with its metrics for Prometheus and, given an OTLP endpoint,
// OpenTelemetry: README.md's "Not behind API Gateway?" snippet (its test
// keeps each of the snippet's lines here, in order).
package main

import (
	"cmp"
	"context"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/otelmetrics"
	"github.com/sluicehq/sluice/ratelimit/prommetrics"
)

func getOrder(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, `{"order":"`+r.PathValue("id")+`"}`)
}

// observers tells every one of its observers of each decision.
type observers []ratelimit.Observer

func (obs observers) ObserveDecision(d ratelimit.Decision) {
	for _, o := range obs {
		o.ObserveDecision(d)
	}
}

// otlp returns the OpenTelemetry observer exporting over OTLP/HTTP, set
// up by the standard variables alone: the exporter reads
// OTEL_EXPORTER_OTLP_ENDPOINT (or …_METRICS_ENDPOINT), …_HEADERS and
// …_TIMEOUT; the SDK reads OTEL_METRIC_EXPORT_INTERVAL (60 s),
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. Shut the provider down
// to flush the last interval.
func otlp(ctx context.Context, health func() ratelimit.Health) (*otelmetrics.Metrics, *sdkmetric.MeterProvider, error) {
	exp, err := otlpmetrichttp.New(ctx)
	if err != nil {
		return nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: mp, Health: health})
	return m, mp, err
}

func main() {
	rl, err := ratelimit.FromEnv(context.Background()) // REDIS_URL, SUBJECT_HMAC_KEY, SUBJECT_SOURCES=header:x-api-key, …
	if err != nil {
		log.Fatal(err)
	}
	defer rl.Close()
	prom, err := prommetrics.New(prometheus.DefaultRegisterer, prommetrics.Options{Health: rl.Health})
	if err != nil {
		log.Fatal(err)
	}
	metrics := observers{prom}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")+os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "" {
		m, mp, err := otlp(context.Background(), rl.Health)
		if err != nil {
			log.Fatal(err)
		}
		defer mp.Shutdown(context.Background()) //nolint:errcheck // exiting
		metrics = append(metrics, m)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", getOrder)
	http.Handle("/metrics", promhttp.Handler())
	limited := rl.Handler(mux, ratelimit.HandlerOptions{API: "orders", Observer: metrics})
	http.Handle("/", limited)
	log.Fatal(http.ListenAndServe(cmp.Or(os.Getenv("ADDR"), ":8080"), nil)) // ADDR: beside make run, say :8081
}
