// Package redisversion keeps the rules version counter in Redis: the admin
// path bumps it after every successful write, and every warm authorizer polls
// it to know when to reload its rules snapshot.
//
// Authorizers reload when the version differs from the one they loaded, not
// only when it grows. A Redis that restarts empty loses the counter, so a
// counter restarted at 0 could climb back to exactly the value an idle
// authorizer last saw (1 → restart → 1) and that authorizer would never
// reload. Bump therefore starts a missing counter from Redis's clock in
// microseconds: after a restart the next version is above any earlier one
// unless writes came faster than one per microsecond.
package redisversion

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// DefaultKey is the counter's key when New is given none.
const DefaultKey = "sl:rules:version"

// Counter reads and bumps the rules version.
type Counter struct {
	client redis.UniversalClient
	key    string
}

// New returns a Counter on key; an empty key means DefaultKey.
func New(client redis.UniversalClient, key string) *Counter {
	if key == "" {
		key = DefaultKey
	}
	return &Counter{client: client, key: key}
}

// Version returns the current version; 0 when the key does not exist yet.
func (c *Counter) Version(ctx context.Context) (int64, error) {
	v, err := c.client.Get(ctx, c.key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get rules version %s: %w", c.key, err)
	}
	return v, nil
}

// bump increments KEYS[1]; a missing counter first takes Redis TIME in
// microseconds (seconds .. zero-padded microseconds, as text: Lua numbers
// are floats). About 1.8e15 today: an int64, and exact in JSON (< 2^53).
var bump = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[1], t[1] .. string.format('%06d', tonumber(t[2])))
end
return redis.call('INCR', KEYS[1])
`)

// Bump increments the version and returns the new value. A missing counter
// (the first write of a deployment, or the first since Redis restarted
// empty) starts from the Redis clock in microseconds, so the value does not
// repeat one a warm authorizer saw before a restart.
func (c *Counter) Bump(ctx context.Context) (int64, error) {
	v, err := bump.Run(ctx, c.client, []string{c.key}).Int64()
	if err != nil {
		return 0, fmt.Errorf("bump rules version %s: %w", c.key, err)
	}
	return v, nil
}
