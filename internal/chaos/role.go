package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
)

// The harness re-runs its own executable inside the hosts' namespaces, in
// one of these roles, named by SLUICE_CHAOS_ROLE.
const (
	roleVar    = "SLUICE_CHAOS_ROLE"
	roleDecide = "decide"   // a decision process: app.New, served over HTTP
	roleLoad   = "load"     // the load client
	roleDelay  = "nfqdelay" // the packet delayer of a latency fault
	roleLedger = "ledger"   // the ledger host's proxies (global.go)

	decideAddrVar    = "SLUICE_CHAOS_ADDR"    // where a decision process listens
	decideNameVar    = "SLUICE_CHAOS_NAME"    // its host name, in its logs
	decideMigrateVar = "SLUICE_CHAOS_MIGRATE" // "1": migrate the database first
	loadConfigVar    = "SLUICE_CHAOS_LOAD"    // the load client's config file
	delayQueueVar    = "SLUICE_CHAOS_QUEUE"   // the NFQUEUE number to serve
	delayVar         = "SLUICE_CHAOS_DELAY"   // how long to hold each packet
	decideStatsVar   = "SLUICE_CHAOS_STATS"   // where a decision process writes its global counters at exit
)

// IsRole reports whether this process was started as one of the harness's
// roles; a main (or TestMain) then calls RunRole and exits with its code.
func IsRole() bool { return os.Getenv(roleVar) != "" }

// RunRole runs the role SLUICE_CHAOS_ROLE names until it is done or gets
// SIGTERM or SIGINT, and returns the process's exit code.
func RunRole() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch r := os.Getenv(roleVar); r {
	case roleDecide:
		err = runDecide(ctx)
	case roleLoad:
		err = runLoad(ctx, os.Getenv(loadConfigVar))
	case roleDelay:
		err = runDelay(ctx, os.Getenv(delayQueueVar), os.Getenv(delayVar))
	case roleLedger:
		err = runLedger(ctx)
	default:
		err = fmt.Errorf("unknown role %q", r)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "chaos %s: %v\n", os.Getenv(roleVar), err)
		return 1
	}
	return 0
}

// runDecide is one decision process, built by app.New as the Lambdas and
// sluice local build theirs (the Decide and Administer parts), serving
// the check API (POST /check, the check Lambda's handler) and the admin
// API (/admin/...) over HTTP on its host's address.
func runDecide(ctx context.Context) error {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	name := os.Getenv(decideNameVar)
	if os.Getenv(decideMigrateVar) == "1" {
		if err := migrate(ctx, cfg, name); err != nil {
			return err
		}
	}
	a, err := app.NewLocal(ctx, cfg, app.Options{Out: os.Stderr, Function: "chaos-" + name})
	if err != nil {
		return err
	}
	defer a.Close()
	defer func() {
		a.Shutdown() // leases go back, as on a Lambda's SIGTERM
		if p := os.Getenv(decideStatsVar); p != "" {
			b, _ := json.Marshal(a.Limiter.GlobalStats())
			_ = os.WriteFile(p, b, 0o644)
		}
	}()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.Handle("POST /check", a.Check) // the check Lambda's handler, as sluice local mounts it
	mux.Handle("/admin/", http.StripPrefix("/admin", a.Admin.Service.Handler(admin.HandlerOptions{Actor: func(*http.Request) string { return "chaos" }})))
	srv := &http.Server{Addr: os.Getenv(decideAddrVar), Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(a.Log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// migrate applies the migrations, retrying while the database starts.
func migrate(ctx context.Context, cfg config.Config, name string) error {
	mig, err := app.NewMigrator(ctx, cfg, app.Options{Out: os.Stderr, Function: "chaos-" + name})
	if err != nil {
		return err
	}
	defer mig.Close()
	return poll(ctx, 30*time.Second, 500*time.Millisecond, nil, func() error { return mig.Migrator.Once(ctx, io.Discard) })
}
