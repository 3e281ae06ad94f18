package limiter

import (
	"context"
	"strconv"
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

// subject returns a subject unique to this call.
func subject(t testing.TB, i int) string {
	return "key-" + t.Name() + "-" + strconv.Itoa(i)
}

// bucketKey is the Redis key of bucket b of subject under prefix (a
// Limiter without a SubjectKey): a quota's names its window too.
func bucketKey(prefix, subject string, b Bucket) string {
	return prefix + "{" + SubjectHash(subject) + "}:" + string(appendKeyID(nil, b))
}
