package authorizer_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// snaps is a fixed snapshot source.
type snaps struct{ s *rules.Snapshot }

func (s snaps) Snapshot(context.Context) *rules.Snapshot { return s.s }

// stack is an Authorizer over real Redis and a fixed rule set.
type stack struct {
	a      *authorizer.Authorizer
	lim    *limiter.Limiter
	rdb    *redis.Client
	prefix string // of its keys
}

type stackOpts struct {
	rules   []rules.Rule
	def     *rules.Effective
	sources []identity.Source
	redis   string // default: the test Redis
	lim     limiter.Options
	core    authorizer.Options // Sources is sources
}

// newStack builds a stack on its own key prefix, whose keys in the test
// Redis are deleted when the test ends.
func newStack(tb testing.TB, o stackOpts) stack {
	tb.Helper()
	url := o.redis
	if url == "" {
		url = testenv.RedisURL(tb)
	}
	o.lim.Prefix = testenv.Prefix(tb, "auth")
	if o.lim.Timeout == 0 {
		// Generous: -race and parallel tests on a shared machine are slow;
		// the first call also dials and loads the script.
		o.lim.Timeout = time.Second
	}
	rdb := testenv.Client(tb, url, func(o *redis.Options) { o.PoolSize, o.MinIdleConns = 32, 4 })
	if o.redis == "" {
		tb.Cleanup(func() { testenv.DeleteKeys(tb, rdb, o.lim.Prefix) })
	}
	lim := limiter.New(rdb, o.lim)
	snap := rules.NewSnapshot(o.rules, nil, rules.SnapshotOptions{Default: o.def})
	if sk := snap.Skipped(); len(sk) > 0 {
		tb.Fatalf("rules skipped: %+v", sk)
	}
	o.core.Sources = o.sources
	return stack{a: authorizer.New(snaps{snap}, lim, o.core), lim: lim, rdb: rdb, prefix: o.lim.Prefix}
}

// rule returns an enabled inline rule.
func rule(id, api, route, subject string, limit int64, period time.Duration) rules.Rule {
	return rules.Rule{ID: id, API: api, Route: route, Subject: subject, Limit: new(limit), Period: rules.Period(period)}
}
