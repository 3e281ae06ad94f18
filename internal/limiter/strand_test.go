package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestStrandedOnlyInDoubt: a take that never reached the ledger (nothing
// listens) took nothing, so nothing is counted stranded; the failure
// mode decides, and the ledger error is counted.
func TestStrandedOnlyInDoubt(t *testing.T) {
	rdb := globalClient(t)
	prefix := testenv.Prefix(t, "strand")
	testenv.DeleteKeys(t, rdb, prefix)
	lt := ledger.New(ledgertest.Client(t, "http://127.0.0.1:1"), ledger.Options{Table: "none", Timeout: time.Second})
	l := limiter.New(rdb, limiter.Options{Prefix: prefix, Timeout: time.Second, Ledger: lt, DenyCacheSize: -1, LedgerTimeout: time.Second})
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	b := limiter.Bucket{ID: "q", Limit: 100, Period: 24 * time.Hour, Window: limiter.Daily, Global: "dial", FailClosed: true}
	for range 3 {
		if d, err := l.Allow(context.Background(), limiter.Request{Subject: "s", Buckets: []limiter.Bucket{b}, Cost: 1}); d.Allowed || err == nil {
			t.Fatalf("Allow with no ledger listening = %+v, %v; want a fail-closed deny", d, err)
		}
	}
	if st := l.GlobalStats(); st.Stranded != 0 || st.LedgerErrors == 0 {
		t.Errorf("GlobalStats() = %+v: want ledger errors and nothing stranded", st)
	}
}
