package app_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/stats"
)

// TestStatsPart: the admin-stats function's graph needs no Redis and no
// database (it runs outside the VPC), and answers GET /stats from the
// reader it is given, 503 without one.
func TestStatsPart(t *testing.T) {
	ev := events.APIGatewayProxyRequest{HTTPMethod: "GET", Resource: "/stats", Path: "/stats"}
	for _, tt := range []struct {
		name   string
		reader admin.StatsReader
		want   int
	}{{"no reader", nil, http.StatusServiceUnavailable}, {"a reader", stats.New(stats.Options{}), http.StatusOK}} {
		cfg, err := config.FromEnv(func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(context.Background(), cfg, app.Options{Parts: app.Stats, Out: io.Discard, StatsReader: tt.reader})
		if err != nil {
			t.Fatalf("New(Stats) with %s = %v, want no error without Redis or a database", tt.name, err)
		}
		if a.Redis != nil || a.Store != nil {
			t.Errorf("New(Stats) built Redis %v, store %v; want neither", a.Redis, a.Store)
		}
		resp, _ := a.AdminHandler(admin.RouteStats)(context.Background(), ev)
		if resp.StatusCode != tt.want {
			t.Errorf("GET /stats with %s = %d %s, want %d", tt.name, resp.StatusCode, resp.Body, tt.want)
		}
		a.Close()
	}
}
