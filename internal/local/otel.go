package local

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/otelmetrics"
)

// otelWanted reports whether the standard variables ask for OpenTelemetry
// metrics: OTEL_METRICS_EXPORTER=otlp, or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or …_METRICS_ENDPOINT) with the exporter
// not set to another; never with OTEL_SDK_DISABLED=true.
func otelWanted(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_METRICS_EXPORTER"))); exp {
	case "otlp":
		return true
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT")+getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
	default: // none, prometheus, console: not ours to export
		return false
	}
}

// otelObserver is the decisions as OpenTelemetry metrics (otelmetrics),
// exported over OTLP/HTTP as examples/service does. The endpoint
// (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT
// plus /v1/metrics; default http://localhost:4318/v1/metrics) and
// OTEL_METRIC_EXPORT_INTERVAL (milliseconds, 60 s) are read through
// getenv, as every setting of sluice local is; the rest of OTEL_* (headers,
// timeout, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) the SDK reads from
// the process environment. shutdown flushes the last interval.
func otelObserver(getenv func(string) string, health func() ratelimit.Health) (obs ratelimit.Observer, shutdown func(), err error) {
	var opts []otlpmetrichttp.Option
	if u := getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"); u != "" {
		opts = append(opts, otlpmetrichttp.WithEndpointURL(u))
	} else if u := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); u != "" {
		opts = append(opts, otlpmetrichttp.WithEndpointURL(strings.TrimRight(u, "/")+"/v1/metrics"))
	}
	var readerOpts []sdkmetric.PeriodicReaderOption
	if v := getenv("OTEL_METRIC_EXPORT_INTERVAL"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, nil, fmt.Errorf("%w: OTEL_METRIC_EXPORT_INTERVAL=%q: want milliseconds, such as 60000", ErrConfig, v)
		}
		readerOpts = append(readerOpts, sdkmetric.WithInterval(time.Duration(ms)*time.Millisecond))
	}
	exp, err := otlpmetrichttp.New(context.Background(), opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the OTLP metric exporter: %w", ErrConfig, err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, readerOpts...)))
	m, err := otelmetrics.New(otelmetrics.Options{MeterProvider: mp, Health: health})
	if err != nil {
		mp.Shutdown(context.Background()) //nolint:errcheck // the error said already
		return nil, nil, fmt.Errorf("the OpenTelemetry metrics: %w", err)
	}
	return m, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		mp.Shutdown(ctx) //nolint:errcheck // exiting; the exporter logs through otel's handler
	}, nil
}

// observers tells each of its observers of every decision.
type observers []ratelimit.Observer

func (obs observers) ObserveDecision(d ratelimit.Decision) {
	for _, o := range obs {
		o.ObserveDecision(d)
	}
}
