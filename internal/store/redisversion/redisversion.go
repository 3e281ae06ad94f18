// Package redisversion keeps the rules version counter in Redis: the admin
// path bumps it after every successful write, and every warm authorizer polls
// it to know when to reload its rules snapshot.
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

// Bump increments the version and returns the new value.
func (c *Counter) Bump(ctx context.Context) (int64, error) {
	v, err := c.client.Incr(ctx, c.key).Result()
	if err != nil {
		return 0, fmt.Errorf("bump rules version %s: %w", c.key, err)
	}
	return v, nil
}
