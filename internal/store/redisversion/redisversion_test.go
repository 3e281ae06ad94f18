package redisversion_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store/redisversion"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestBumpAfterRestart: the counter counts up by one per write, and a
// counter lost with a Redis restart starts again far from every earlier
// value (from the Redis clock in µs), so an authorizer that last saw the
// old value reloads instead of mistaking the new one for it.
func TestBumpAfterRestart(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	key := testenv.Prefix(t, "redisversion") + "rules:version"
	testenv.DeleteKeys(t, rdb, key)
	ctx := context.Background()
	c := redisversion.New(rdb, key)

	if v, err := c.Version(ctx); err != nil || v != 0 {
		t.Fatalf("Version() of a missing counter = %d, %v; want 0", v, err)
	}
	first, err := c.Bump(ctx)
	if err != nil {
		t.Fatalf("Bump(): %v", err)
	}
	now := time.Now().UnixMicro()
	if first < now-time.Minute.Microseconds() || first > now+time.Minute.Microseconds() {
		t.Errorf("first Bump() = %d, want about the clock in µs (%d)", first, now)
	}
	for want := first + 1; want < first+4; want++ {
		if v, err := c.Bump(ctx); err != nil || v != want {
			t.Fatalf("Bump() = %d, %v; want %d", v, err, want)
		}
	}
	if v, err := c.Version(ctx); err != nil || v != first+3 {
		t.Errorf("Version() = %d, %v; want %d", v, err, first+3)
	}

	// An existing counter (a deployment from before this scheme) keeps
	// counting from where it is.
	if err := rdb.Set(ctx, key, 41, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Bump(ctx); err != nil || v != 42 {
		t.Errorf("Bump() on 41 = %d, %v; want 42", v, err)
	}

	// Redis restarted empty: the counter is gone; the next value is none
	// an authorizer saw before.
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := c.Bump(ctx)
	if err != nil || v <= first+3 || v == 42 {
		t.Errorf("Bump() after the counter was lost = %d, %v; want a new value above %d", v, err, first+3)
	}
}

// TestBumpEmbedded: the script also runs on the embedded Redis of
// `sluice local` (miniredis).
func TestBumpEmbedded(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c := redisversion.New(rdb, "")
	first, err := c.Bump(context.Background())
	if err != nil || first < time.Now().Add(-time.Hour).UnixMicro() {
		t.Fatalf("Bump() = %d, %v; want the clock in µs", first, err)
	}
	if v, err := c.Bump(context.Background()); err != nil || v != first+1 {
		t.Errorf("second Bump() = %d, %v; want %d", v, err, first+1)
	}
}
