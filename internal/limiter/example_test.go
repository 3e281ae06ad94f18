package limiter_test

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/limiter"
)

// The client is created once, with ContextTimeoutEnabled so the Limiter's
// per-call timeout reaches the socket, and a pool sized for the callers.
func Example() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true,
		PoolSize:              4,
	})
	lim := limiter.New(rdb, limiter.Options{
		OnBreakerChange: func(from, to limiter.BreakerState) {
			slog.Warn("redis breaker", "from", from.String(), "to", to.String())
		},
	})

	d, err := lim.Allow(context.Background(), limiter.Request{
		Subject: "api-key-123",
		Buckets: []limiter.Bucket{
			{ID: "api-wide-rule", Limit: 100, Period: time.Minute, Burst: 200},
			{ID: "route-rule", Limit: 10, Period: time.Second, FailClosed: true},
		},
		Cost: 1,
	})
	if err != nil {
		// d still holds the failure mode's decision; log the error.
		slog.Error("limiter", "error", err, "failOpen", d.FailOpen)
	}
	if !d.Allowed {
		slog.Info("429", "retryAfterMs", d.RetryAfter.Milliseconds(), "bucket", d.Bucket)
	}
}
