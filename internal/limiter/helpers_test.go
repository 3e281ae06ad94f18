package limiter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisURL returns the test Redis, skipping the test when there is none
// (or failing it when integration tests are required).
func redisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("SLUICE_TEST_REDIS_URL")
	if u == "" {
		if os.Getenv("SLUICE_REQUIRE_INTEGRATION") == "1" {
			t.Fatal("SLUICE_TEST_REDIS_URL is not set and SLUICE_REQUIRE_INTEGRATION=1")
		}
		t.Skip("SLUICE_TEST_REDIS_URL not set; run under scripts/testenv.sh")
	}
	return u
}

// newClient returns a client of the test Redis, created the way the
// Limiter needs it (ContextTimeoutEnabled), closed at the end of the test.
func newClient(t testing.TB, poolSize int) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(redisURL(t))
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", os.Getenv("SLUICE_TEST_REDIS_URL"), err)
	}
	o.ContextTimeoutEnabled = true
	o.PoolSize = poolSize
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testPrefix returns a key prefix of the test's own; its keys are deleted
// when the test ends (nothing shared is flushed).
func testPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	p := "t" + hex.EncodeToString(b[:]) + ":sl:"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, k := range scanKeys(ctx, t, c, p) {
			c.Del(ctx, k)
		}
	})
	return p
}

// scanKeys lists the keys under prefix.
func scanKeys(ctx context.Context, t testing.TB, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	var keys []string
	it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		t.Errorf("SCAN %s*: %v", prefix, err)
	}
	return keys
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
