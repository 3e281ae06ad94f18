// Package testenv finds the Redis, PostgreSQL and DynamoDB (dynalite)
// servers that scripts/testenv.sh starts for integration tests, and gives
// each test what it needs to share them safely: a client and a key prefix
// of its own.
//
// The servers are named by SLUICE_TEST_REDIS_URL, SLUICE_TEST_DATABASE_URL
// and SLUICE_TEST_DYNAMODB_URL.
// Without them a test is skipped, unless SLUICE_REQUIRE_INTEGRATION=1 (make
// test, CI), where it fails instead: a run that must cover the integration
// tests never passes by skipping them.
//
//	func TestSomething(t *testing.T) {
//		rdb := testenv.Redis(t)               // skips without a test Redis
//		prefix := testenv.Prefix(t, "admin")  // "sltest:admin:<random>:"
//		testenv.DeleteKeys(t, rdb, prefix)    // optional: remove them at the end
//	}
//
// Nothing here flushes a server: tests share it, each under its own prefix
// (Redis), database (PostgreSQL, see internal/store/postgres/pgtest) or
// table (DynamoDB, see internal/ledger).
//
// Tests that kill, restart or slow a server start their own: StartRedis (a
// private redis-server, also in Sentinel mode), StartCluster (a private
// Redis Cluster), and Proxy (a TCP proxy that can go down or add a delay)
// in front of either. Buffer collects the logs of goroutines and
// subprocesses such tests start, and AwaitLift follows a cached denial
// until what lifted it elsewhere reaches the cache.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The environment variables scripts/testenv.sh exports.
const (
	RedisURLVar    = "SLUICE_TEST_REDIS_URL"    // redis://host:port of a private Redis
	DatabaseURLVar = "SLUICE_TEST_DATABASE_URL" // postgres:// URL of a private server (any database)
	DynamoDBURLVar = "SLUICE_TEST_DYNAMODB_URL" // http://host:port of a private dynalite
	RequireVar     = "SLUICE_REQUIRE_INTEGRATION"
)

// Lookup returns the value of the environment variable name. When it is
// empty, Lookup skips the test, or fails it when SLUICE_REQUIRE_INTEGRATION=1;
// either way the test goes no further.
func Lookup(tb testing.TB, name string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv(RequireVar) == "1" {
			tb.Fatalf("%s is not set and %s=1; run under scripts/testenv.sh", name, RequireVar)
		}
		tb.Skipf("%s not set; run under scripts/testenv.sh", name)
	}
	return v
}

// RedisURL returns SLUICE_TEST_REDIS_URL, skipping or failing the test as
// Lookup does when it is not set.
func RedisURL(tb testing.TB) string {
	tb.Helper()
	return Lookup(tb, RedisURLVar)
}

// RedisAddr returns the host:port of SLUICE_TEST_REDIS_URL (which may
// carry a database number or options), for a proxy in front of it.
func RedisAddr(tb testing.TB) string {
	tb.Helper()
	o, err := redis.ParseURL(RedisURL(tb))
	if err != nil {
		tb.Fatalf("testenv: parse %s: %v", RedisURLVar, err)
	}
	return o.Addr
}

// DatabaseURL returns SLUICE_TEST_DATABASE_URL, skipping or failing the test
// as Lookup does when it is not set. Tests must not use that database
// itself: pgtest creates one per test.
func DatabaseURL(tb testing.TB) string {
	tb.Helper()
	return Lookup(tb, DatabaseURLVar)
}

// DynamoDBURL returns SLUICE_TEST_DYNAMODB_URL, the endpoint of a private
// dynalite (any credentials and Region do), skipping or failing the test
// as Lookup does when it is not set. Tests create tables of their own and
// delete no one else's.
func DynamoDBURL(tb testing.TB) string {
	tb.Helper()
	return Lookup(tb, DynamoDBURLVar)
}

// Redis returns a client of the test Redis (see RedisURL) with default pool
// settings; see Client.
func Redis(tb testing.TB) *redis.Client {
	tb.Helper()
	return Client(tb, RedisURL(tb), nil)
}

// Client returns a client of the Redis at url, set up as the code under test
// expects it: ContextTimeoutEnabled, so a context deadline bounds each call.
// configure, when not nil, adjusts the options before the client is made
// (pool sizes, for example). The client is closed when the test ends.
func Client(tb testing.TB, url string, configure func(*redis.Options)) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("testenv: parse Redis URL: %v", err)
	}
	opt.ContextTimeoutEnabled = true
	if configure != nil {
		configure(opt)
	}
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a Redis key prefix no other test uses:
// "sltest:<scope>:<12 random hex digits>:". scope names the package or
// suite, so that a key left behind says where it came from.
func Prefix(tb testing.TB, scope string) string {
	tb.Helper()
	return "sltest:" + scope + ":" + Random(tb) + ":"
}

// Random returns 12 random hex digits, for names a test must not share
// (key prefixes, subjects, database names).
func Random(tb testing.TB) string {
	tb.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("testenv: random: %v", err)
	}
	return hex.EncodeToString(b[:])
}

// Keys lists the keys under prefix (SCAN; a failure is a test error).
func Keys(ctx context.Context, tb testing.TB, c redis.UniversalClient, prefix string) []string {
	tb.Helper()
	var keys []string
	it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		tb.Errorf("testenv: SCAN %s*: %v", prefix, err)
	}
	return keys
}

// DeleteKeys deletes every key under prefix from c when the test ends (and
// before c, if it came from Client, is closed), for tests whose keys do not
// expire by themselves. Call it after the client was created. The keys go
// in pipelined batches (a benchmark leaves hundreds of thousands), each
// with its own timeout.
func DeleteKeys(tb testing.TB, c redis.UniversalClient, prefix string) {
	tb.Helper()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		keys := Keys(ctx, tb, c, prefix)
		for len(keys) > 0 {
			batch := keys[:min(len(keys), 1000)]
			keys = keys[len(batch):]
			if err := unlink(ctx, c, batch); err != nil {
				tb.Errorf("testenv: delete %d keys under %s: %v", len(batch)+len(keys), prefix, err)
				return
			}
		}
	})
}

// unlink deletes keys, one UNLINK a key in one pipeline: in a cluster the
// keys may live on different slots, and the cluster client sends each
// command to its node.
func unlink(ctx context.Context, c redis.UniversalClient, keys []string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Unlink(ctx, k)
		}
		return nil
	})
	return err
}

// ChromiumVar names the browser the console's browser tests drive; default
// the first of chromium, chromium-browser, google-chrome on PATH.
const ChromiumVar = "SLUICE_TEST_CHROMIUM"

// Chromium returns the path of a Chromium to drive headless, skipping the
// test, or failing it under SLUICE_REQUIRE_INTEGRATION=1, when there is
// none (scripts/testenv.sh installs Debian's chromium).
func Chromium(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(ChromiumVar); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(RequireVar) == "1" {
		tb.Fatalf("no chromium on PATH and %s=1; run under scripts/testenv.sh, which installs it", RequireVar)
	}
	tb.Skip("no chromium on PATH; run under scripts/testenv.sh")
	return ""
}
