package limiter

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
)

// twice sends every script call two times, as go-redis does when a
// connection breaks after Redis ran the call (MaxRetries).
type twice struct{}

func (twice) DialHook(next redis.DialHook) redis.DialHook { return next }
func (twice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (twice) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			_ = next(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

// TestUsagePoolsOnce: a usage report's call sent twice charges the pools
// of its global buckets once, charge and refund alike (a refund charged
// twice would put tokens in the pool that nobody spent).
func TestUsagePoolsOnce(t *testing.T) {
	endpoint, table := ledgertest.Table(t)
	rdb := newClient(t, 4)
	rdb.AddHook(twice{})
	l := New(rdb, Options{Prefix: testPrefix(t, rdb), Timeout: time.Second, DenyCacheSize: -1,
		Ledger: ledger.New(ledgertest.Client(t, endpoint), ledger.Options{Table: table}), LedgerTimeout: time.Second})
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	b := Bucket{ID: "q", Limit: 1000, Period: 24 * time.Hour, Window: Daily, Global: "once"}
	ctx := context.Background()
	level := func() int64 {
		l.global.bg.Wait()
		p := l.poolFor(l.hash.digest("s"), b, l.global.clock())
		n, _ := rdb.Get(ctx, p.key).Int64()
		return n
	}
	if d, err := l.Allow(ctx, Request{Subject: "s", Buckets: []Bucket{b}, Cost: 1}); err != nil || !d.Allowed {
		t.Fatalf("Allow = %+v, %v", d, err)
	}
	before := level()
	if _, err := l.Charge(ctx, "s", []Bucket{b}, 5, "scope", ""); err != nil {
		t.Fatal(err)
	}
	if got := level(); got != before-5 {
		t.Errorf("a charge of 5 sent twice left the pool at %d, want %d - 5", got, before)
	}
	if _, err := l.Charge(ctx, "s", []Bucket{b}, -5, "scope", ""); err != nil {
		t.Fatal(err)
	}
	if got := level(); got != before {
		t.Errorf("a refund of 5 sent twice left the pool at %d, want %d", got, before)
	}
}
