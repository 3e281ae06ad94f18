package limiter

import (
	"context"
	"errors"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// primaryWithReplica starts a private primary and one replica of it and
// returns a client of the primary and the replica.
func primaryWithReplica(t testing.TB) (*redis.Client, *testenv.RedisServer) {
	t.Helper()
	primary := testenv.StartRedis(t)
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica := testenv.StartRedis(t, "--replicaof", host, port)
	testenv.WaitRedis(t, replica.Addr, "INFO replication", func(s string) bool { return strings.Contains(s, "master_link_status:up") })
	c := redis.NewClient(&redis.Options{Addr: primary.Addr, ContextTimeoutEnabled: true, Protocol: 2, MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { c.Close() })
	// The replica acknowledges writes: a write, then WAIT, answers 1.
	ctx := context.Background()
	for end := time.Now().Add(10 * time.Second); ; {
		c.Set(ctx, "durable-ready", 1, time.Minute)
		if n, err := c.Do(ctx, "wait", 1, 1000).Int64(); err == nil && n == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the replica does not acknowledge writes")
		}
	}
	return c, replica
}

// durableQuota is a closed monthly quota of 1,000, durable or not.
func durableQuota(durable bool) Request {
	return Request{Subject: "durable-" + map[bool]string{true: "yes", false: "no"}[durable], Cost: 1,
		Buckets: []Bucket{{ID: "bill", Limit: 1000, Period: time.Hour, Window: Monthly, FailClosed: true, Durable: durable}}}
}

// TestDurable: a durable admission is acknowledged once a replica has it;
// with no replica to acknowledge it, it is a Redis failure the bucket's
// failure mode decides (closed: denied), while the same quota without the
// option is admitted, unreplicated. Redis answered, so the breaker stays
// closed, and durable requests are never leased.
func TestDurable(t *testing.T) {
	rdb, replica := primaryWithReplica(t)
	l := New(rdb, Options{Prefix: testenv.Prefix(t, "durable"), Timeout: 300 * time.Millisecond, LeaseMax: 64})
	t.Cleanup(func() { l.Close(context.Background()) })
	ctx := context.Background()

	for i := range 50 {
		d, err := l.Allow(ctx, durableQuota(true))
		if err != nil || !d.Allowed || d.Leased || d.FailOpen {
			t.Fatalf("durable Allow #%d with a replica = %+v, %v; want allowed by Redis", i, d, err)
		}
	}
	if st := l.Stats(); st.Leases != 0 || st.NotReplicated != 0 {
		t.Fatalf("stats = %+v: want no lease and every charge acknowledged", st)
	}

	replica.Kill()
	for i := range 6 {
		d, err := l.Allow(ctx, durableQuota(true))
		if !errors.Is(err, ErrNotReplicated) || d.Allowed {
			t.Fatalf("durable Allow #%d without a replica = %+v, %v; want denied with ErrNotReplicated", i, d, err)
		}
	}
	d, err := l.Allow(ctx, durableQuota(false))
	if err != nil || !d.Allowed || d.FailOpen {
		t.Fatalf("the same quota, not durable, without a replica = %+v, %v; want admitted by Redis", d, err)
	}
	st := l.Stats()
	if st.NotReplicated != 6 || st.Breaker != BreakerClosed || st.Errors != 0 {
		t.Errorf("stats = %+v: want 6 not replicated, no error, breaker closed", st)
	}
}

// BenchmarkDurable measures what the WAIT costs a quota admission on a
// primary with one replica on loopback: p50/p99 of Allow, durable or not.
func BenchmarkDurable(b *testing.B) {
	rdb, _ := primaryWithReplica(b)
	for _, durable := range []bool{false, true} {
		name := map[bool]string{false: "default", true: "durable"}[durable]
		b.Run(name, func(b *testing.B) {
			l := New(rdb, Options{Prefix: testenv.Prefix(b, "durable-bench"), Timeout: time.Second, DenyCacheSize: -1})
			req := durableQuota(durable)
			req.Buckets[0].Limit = 1 << 40
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
					b.Fatalf("Allow = %+v, %v", d, err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
