package limiter

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// bareScript is a minimal one-bucket GCRA (redis_rate's shape): the
// reference for what any EVALSHA token bucket costs through go-redis.
var bareScript = redis.NewScript(`
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1704067200) * 1000000 + tonumber(t[2])
local T = tonumber(ARGV[2]) / tonumber(ARGV[1])
local tau = tonumber(ARGV[3]) * T
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new = tat + T
if new - now > tau then
	return {0, 0, math.ceil((new - tau - now) / 1000), math.ceil((tat - now) / 1000)}
end
redis.call('SET', KEYS[1], new, 'PX', math.ceil((new - now) / 1000))
return {1, math.floor((tau - (new - now)) / T), 0, math.ceil((new - now) / 1000)}
`)

// BenchmarkBareScript is the reference row for BenchmarkAllow's x-ping: a
// bare redis.Script.Run of a minimal one-bucket script, no limiter around
// it.
func BenchmarkBareScript(b *testing.B) {
	for _, callers := range []int{16, 64} {
		c := newClient(b, callers)
		prefix := testPrefix(b, c)
		ping := func(ctx context.Context, _ int) error { return c.Ping(ctx).Err() }
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			run(b, callers, func(ctx context.Context, i int) error {
				key := prefix + "{" + strconv.Itoa(i%10000) + "}:api"
				return bareScript.Run(ctx, c, []string{key}, 1_000_000, time.Second.Microseconds(), 1_000_000).Err()
			}, nil, baseline{"x-ping", ping})
		})
	}
}
