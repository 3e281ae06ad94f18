package adminlambda_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/admin/adminlambda"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestNewService wires a Service from the environment the Lambdas get and
// serves one request on a fresh database.
func TestNewService(t *testing.T) {
	env := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "REDIS_URL": testenv.RedisURL(t)}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	svc, err := adminlambda.NewService(context.Background(), cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	resp := svc.HandleRoute(context.Background(), admin.RouteListPlans, admin.Request{Method: "GET"})
	if resp.Status != 200 || string(resp.Body) != "{\"plans\":[]}\n" {
		t.Errorf("GET /plans = %d %s, want 200 and no plans", resp.Status, resp.Body)
	}
}
