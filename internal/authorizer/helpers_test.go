package authorizer_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
)

// redisURL returns the test Redis, skipping (or failing under
// SLUICE_REQUIRE_INTEGRATION=1) when there is none.
func redisURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("SLUICE_TEST_REDIS_URL")
	if u == "" {
		if os.Getenv("SLUICE_REQUIRE_INTEGRATION") == "1" {
			tb.Fatal("SLUICE_TEST_REDIS_URL is not set and SLUICE_REQUIRE_INTEGRATION=1")
		}
		tb.Skip("SLUICE_TEST_REDIS_URL not set; run under scripts/testenv.sh")
	}
	return u
}

func newRedis(tb testing.TB, url string, poolSize int) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("parse redis url: %v", err)
	}
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = poolSize
	opt.MinIdleConns = min(poolSize, 4)
	c := redis.NewClient(opt)
	tb.Cleanup(func() { c.Close() })
	return c
}

// prefix returns a key prefix of the test's own.
func prefix(tb testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sltest:auth:" + hex.EncodeToString(b[:]) + ":"
}

// snaps is a fixed snapshot source.
type snaps struct{ s *rules.Snapshot }

func (s snaps) Snapshot() *rules.Snapshot { return s.s }

// stack is an Authorizer over real Redis and a fixed rule set.
type stack struct {
	a   *authorizer.Authorizer
	lim *limiter.Limiter
}

type stackOpts struct {
	rules   []rules.Rule
	def     *rules.Effective
	sources []authorizer.Source
	redis   string // default: the test Redis
	lim     limiter.Options
}

func newStack(tb testing.TB, o stackOpts) stack {
	tb.Helper()
	url := o.redis
	if url == "" {
		url = redisURL(tb)
	}
	o.lim.Prefix = prefix(tb)
	if o.lim.Timeout == 0 {
		// Generous: -race and parallel tests on a shared machine are slow;
		// the first call also dials and loads the script.
		o.lim.Timeout = time.Second
	}
	lim := limiter.New(newRedis(tb, url, 32), o.lim)
	snap := rules.NewSnapshot(o.rules, nil, rules.SnapshotOptions{Default: o.def})
	if sk := snap.Skipped(); len(sk) > 0 {
		tb.Fatalf("rules skipped: %+v", sk)
	}
	return stack{a: authorizer.New(snaps{snap}, lim, authorizer.Options{Sources: o.sources}), lim: lim}
}

func ptr[T any](v T) *T { return &v }

// rule returns an enabled inline rule.
func rule(id, api, route, subject string, limit int64, period time.Duration) rules.Rule {
	return rules.Rule{ID: id, API: api, Route: route, Subject: subject, Limit: ptr(limit), Period: rules.Period(period)}
}
