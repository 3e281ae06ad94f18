package limiter

import (
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

// deadClient returns a client of an address where nothing listens.
func deadClient(t testing.TB) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
