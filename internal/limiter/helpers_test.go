package limiter

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// newClient returns a client of the test Redis, created the way the
// Limiter needs it (ContextTimeoutEnabled) and as internal/config makes it
// (RESP2), closed at the end of the test.
func newClient(t testing.TB, poolSize int) *redis.Client {
	t.Helper()
	return testenv.Client(t, testenv.RedisURL(t), func(o *redis.Options) {
		o.PoolSize = poolSize
		// RESP3 makes go-redis look for push notifications around every
		// command (a read syscall; ~15 % of the client's CPU in
		// BenchmarkAllow); the Limiter needs nothing RESP3 offers.
		o.Protocol = 2
	})
}

// testTimeout is the Redis budget of tests that are not about timeouts:
// the 25 ms default is exhausted by a loaded make test, and such a test
// then reads a fail-open decision where it checks the arithmetic.
const testTimeout = time.Second

// testPrefix returns a key prefix of the test's own; its keys are deleted
// when the test ends (nothing shared is flushed).
func testPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	p := testenv.Prefix(t, "limiter")
	testenv.DeleteKeys(t, c, p)
	return p
}

// redisNow is the Redis server's TIME.
func redisNow(t testing.TB, c redis.UniversalClient) time.Time {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

// crowd runs goroutines workers on each of ls for run, real time (the
// refill is what the bounds count), each calling call(l, n), n its calls
// so far, until stop is set (by crowd, once run is over). Each connects
// first: a bucket starts full, so refill during a slow start would be
// lost. It returns two brackets of timeClient's Redis TIME: the outer one
// starts at t0 and ends at the caller's next reading, holding every call;
// the inner one, [i0, i1], lies within the calls (i0 after a first call
// returned, i1 while every worker still calls).
func crowd(t *testing.T, timeClient redis.UniversalClient, ls []*Limiter, goroutines int, run time.Duration, stop *atomic.Bool, call func(l *Limiter, n int)) (t0, i0, i1 time.Time) {
	t.Helper()
	var first atomic.Bool
	firstDone, start := make(chan struct{}), make(chan struct{})
	var wg, ready sync.WaitGroup
	for _, l := range ls {
		for range goroutines {
			wg.Add(1)
			ready.Add(1)
			go func() {
				defer wg.Done()
				if err := l.rdb.(*redis.Client).Ping(context.Background()).Err(); err != nil {
					t.Error(err)
				}
				ready.Done()
				<-start
				for n := 0; !stop.Load(); n++ {
					call(l, n)
					if first.CompareAndSwap(false, true) {
						close(firstDone)
					}
				}
			}()
		}
	}
	ready.Wait()
	t0 = redisNow(t, timeClient)
	close(start)
	<-firstDone
	i0 = redisNow(t, timeClient)
	time.Sleep(run) // sleep: the run is real time on Redis TIME, the refill the bound counts
	i1 = redisNow(t, timeClient)
	stop.Store(true)
	wg.Wait()
	return t0, i0, i1
}

// subject returns a subject unique to this call.
func subject(t testing.TB, i int) string {
	return "key-" + t.Name() + "-" + strconv.Itoa(i)
}

// bucketKey is the Redis key of bucket b of subject under prefix (a
// Limiter without a SubjectKey): a quota's names its window too.
func bucketKey(prefix, subject string, b Bucket) string {
	return prefix + "{" + SubjectHash(subject) + "}:" + string(appendKeyID(nil, b))
}
