package apigw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

type snaps struct{ s *rules.Snapshot }

func (s snaps) Snapshot(context.Context) *rules.Snapshot { return s.s }

// decision is the core over lim with the rules rs and the options ao.
func decision(lim *limiter.Limiter, ao authorizer.Options, rs ...rules.Rule) *authorizer.Authorizer {
	return authorizer.New(snaps{rules.NewSnapshot(rs, nil, rules.SnapshotOptions{})}, lim, ao)
}

// redisLimiter is a limiter over the test Redis, under a key prefix of
// its own made from name.
func redisLimiter(tb testing.TB, name string) *limiter.Limiter {
	tb.Helper()
	return limiter.New(testenv.Redis(tb), limiter.Options{Prefix: testenv.Prefix(tb, name), Timeout: time.Second})
}

// downLimiter is a limiter over downRedis: every call fails within 2 ms,
// and the breaker, once open, stays open.
func downLimiter(tb testing.TB) *limiter.Limiter {
	tb.Helper()
	return limiter.New(downRedis(tb), limiter.Options{Timeout: 2 * time.Millisecond, BreakerCooldown: time.Hour})
}

// everywhere is the rule id: limit per period on every API, route and
// subject.
func everywhere(id string, limit int64, period time.Duration) rules.Rule {
	return rules.Rule{ID: id, API: "*", Route: "*", Subject: "*", Limit: &limit, Period: rules.Period(period)}
}

// shopRules are the rules on API a1b2c3: apiLimit per period API-wide,
// orderLimit per period on GET /orders/{id}.
func shopRules(apiLimit, orderLimit int64, period time.Duration) []rules.Rule {
	return []rules.Rule{
		{ID: "r-api", API: "a1b2c3", Route: "*", Subject: "*", Limit: &apiLimit, Period: rules.Period(period)},
		{ID: "r-order", API: "a1b2c3", Route: "GET /orders/{id}", Subject: "*", Limit: &orderLimit, Period: rules.Period(period)},
	}
}

// benchClient is a client of the test Redis pooled for 16 callers.
func benchClient(tb testing.TB) *redis.Client {
	return testenv.Client(tb, testenv.RedisURL(tb), func(o *redis.Options) { o.PoolSize, o.MinIdleConns = 32, 16 })
}

// warm sends the first 32 of evs (round robin) through h's REST handler,
// to open the pool's connections and load the script.
func warm(tb testing.TB, h *apigw.Handler, evs []events.APIGatewayCustomAuthorizerRequestTypeRequest) {
	tb.Helper()
	for i := range 32 {
		if _, err := h.REST(context.Background(), evs[i%len(evs)]); err != nil {
			tb.Fatal(err)
		}
	}
}

// jsonLog is a JSON logger writing to w.
func jsonLog(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// sample returns the bytes of the repository's sample event name
// (events/).
func sample(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "events", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// edited is the JSON event raw after set changed its decoded form.
func edited(tb testing.TB, raw []byte, set func(ev map[string]any)) []byte {
	tb.Helper()
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		tb.Fatal(err)
	}
	set(ev)
	b, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// emfLine is one line metrics wrote: its text, and its JSON decoded into
// a T.
type emfLine[T any] struct {
	text string
	v    T
}

// emfLines decodes every line metrics wrote to w.
func emfLines[T any](t *testing.T, w *bytes.Buffer) []emfLine[T] {
	t.Helper()
	var out []emfLine[T]
	for line := range strings.SplitSeq(strings.TrimSpace(w.String()), "\n") {
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("EMF line %q: %v", line, err)
		}
		out = append(out, emfLine[T]{line, v})
	}
	return out
}
