package chaos_test

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chaos"
)

// TestMain runs the harness's roles when this test binary is re-run as
// one inside a host's namespace (see chaos.IsRole).
func TestMain(m *testing.M) {
	if chaos.IsRole() {
		os.Exit(chaos.RunRole())
	}
	os.Exit(m.Run())
}

// TestChaosShort is the short run of make test: a decision host cut from
// Redis for 10 s, then the primary killed and replaced by Sentinel (with
// durable quotas beside the default ones), each
// under load with a rule changed during the fault; then, on three Regions
// sharing a ledger, a global rule under steady load and with one Region
// cut from the ledger (fail-open), 12 s each. Every bound of
// docs/RELIABILITY.md must hold. It needs root (network namespaces): it
// skips without, unless SLUICE_REQUIRE_INTEGRATION=1.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), chaos.Stop...)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 240*time.Second)
	defer cancel()
	var log strings.Builder
	results, err := chaos.Run(ctx, chaos.Options{Dir: t.TempDir(), Self: self, Scenarios: chaos.ShortScenarios(), Log: &log})
	t.Log("\n" + log.String())
	if errors.Is(err, chaos.ErrNoNamespaces) {
		if os.Getenv("SLUICE_REQUIRE_INTEGRATION") == "1" {
			t.Fatalf("SLUICE_REQUIRE_INTEGRATION=1 but %v", err)
		}
		t.Skipf("skipped: %v (the fault harness needs root to create network namespaces)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	chaos.WriteTable(&table, results)
	t.Log("\n" + table.String())
	for _, r := range results {
		for _, p := range r.Problems {
			t.Errorf("%s: %s", r.Scenario, p)
		}
	}
}
