package authorizer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/rules"
)

// BenchmarkDecide is the domain decision alone (subject, snapshot lookup,
// one limiter call) against real Redis, for its allocations: what the
// limiter and go-redis need, nothing per request on top but the buckets.
func BenchmarkDecide(b *testing.B) {
	s := newStack(b, stackOpts{rules: []rules.Rule{
		rule("r-api", "a1b2c3", "*", "*", 1_000_000_000, time.Second),
		rule("r-route", "a1b2c3", "GET /orders/{id}", "*", 1_000_000_000, time.Second),
	}})
	reqs := make([]authorizer.Request, 1000)
	for i := range reqs {
		reqs[i] = get(fmt.Sprintf("bench-%04d", i), "/orders/{id}")
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.a.Decide(ctx, &reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
