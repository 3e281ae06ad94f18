package apigw_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/testenv"
)

// staticSet is a rulesync.Loader of one set: the store in these benchmarks,
// read once.
type staticSet rules.Set

func (s staticSet) LoadAll(context.Context) (rules.Set, error) { return rules.Set(s), nil }

// redisVersion reads the rules version as internal/rulesync
// does: one GET of a short value.
type redisVersion struct {
	rdb redis.UniversalClient
	key string
}

func (v redisVersion) Version(ctx context.Context) (int64, error) {
	n, err := v.rdb.Get(ctx, v.key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// BenchmarkRulesFreshness is BenchmarkAuthorizer's REST path with the rules
// from a rulesync.Cache whose version is read from the same Redis, to measure
// what deciding on rules no older than RULES_VERSION_POLL costs:
//
//   - poll=1h: the version is never read (the rules held, as before at
//     steady state);
//   - poll=1s: production's default; under a steady stream one request a
//     second waits for the version GET;
//   - every-request: each request finds the last read older than the poll
//     and waits for one GET (what the first request after a quiet spell
//     pays), concurrent ones sharing it.
//
// Run with
//
//	scripts/testenv.sh go test -run '^$' -bench BenchmarkRulesFreshness -benchtime 20000x ./internal/edge/apigw/
func BenchmarkRulesFreshness(b *testing.B) {
	rdb := benchClient(b)
	prefix := testenv.Prefix(b, "bench")
	lim := limiter.New(rdb, limiter.Options{Prefix: prefix, Timeout: time.Second})
	vkey := prefix + "{rules}:version"
	ctx := context.Background()
	if err := rdb.Set(ctx, vkey, "1", time.Hour).Err(); err != nil {
		b.Fatal(err)
	}
	set := staticSet{Version: 1, Rules: shopRules(1_000_000_000, 1_000_000_000, time.Second)}
	for _, mode := range []struct {
		name string
		poll time.Duration
	}{{"poll=1h", time.Hour}, {"poll=1s", time.Second}, {"every-request", time.Nanosecond}} {
		cache, err := rulesync.NewCache(ctx, set, redisVersion{rdb, vkey}, rulesync.CacheOptions{Poll: mode.poll, VersionTimeout: time.Second, Refresh: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		h := apigw.NewHandler(authorizer.New(cache, lim, authorizer.Options{Logger: jsonLog(io.Discard),
			Metrics: metrics.New(metrics.Options{W: io.Discard})}), apigw.Options{})
		evs := make([]events.APIGatewayCustomAuthorizerRequestTypeRequest, 1000)
		for i := range evs {
			evs[i] = restEvent(fmt.Sprintf("fresh-key-%06d", i))
		}
		warm(b, h, evs)
		for _, callers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/callers=%d", mode.name, callers), func(b *testing.B) {
				reads := cache.Stats().VersionReads
				n := runAllowed(b, h, evs, callers)
				b.ReportMetric(float64(cache.Stats().VersionReads-reads)/float64(n), "version-GETs/decision")
			})
		}
		cache.Wait()
	}
}
