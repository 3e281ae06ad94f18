// Command service is a net/http service on ECS, EKS or EC2 behind Sluice's
// limits, with its metrics for Prometheus: README.md's "Not behind API
// Gateway?" snippet (its test keeps each of the snippet's lines here, in
// order).
package main

import (
	"context"
	"io"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/prommetrics"
)

func getOrder(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, `{"order":"`+r.PathValue("id")+`"}`)
}

func main() {
	rl, err := ratelimit.FromEnv(context.Background()) // REDIS_URL, SUBJECT_HMAC_KEY, SUBJECT_SOURCES=header:x-api-key, …
	if err != nil {
		log.Fatal(err)
	}
	defer rl.Close()
	metrics, err := prommetrics.New(prometheus.DefaultRegisterer, prommetrics.Options{Health: rl.Health})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", getOrder)
	http.Handle("/metrics", promhttp.Handler())
	limited := rl.Handler(mux, ratelimit.HandlerOptions{API: "orders", Observer: metrics})
	http.Handle("/", limited)
	log.Fatal(http.ListenAndServe(":8080", nil))
}
