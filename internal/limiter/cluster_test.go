package limiter

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// startCluster starts a private 3-master Redis Cluster and returns its
// addresses.
func startCluster(t *testing.T) []string {
	t.Helper()
	var addrs []string
	for _, s := range testenv.StartCluster(t, 3) {
		addrs = append(addrs, s.Addr)
	}
	return addrs
}

func TestCluster(t *testing.T) {
	addrs := startCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	l := New(c, Options{Prefix: "t:sl:", Timeout: time.Second})
	ctx := context.Background()
	bs := []Bucket{
		{ID: "api", Limit: 5, Period: time.Hour},
		{ID: "route", Limit: 3, Period: time.Hour},
		{ID: "shadow", Limit: 1, Period: time.Hour, Shadow: true},
	}
	const subjects = 20
	for i := range subjects {
		sub := "cluster-" + strconv.Itoa(i)
		for n := int64(1); n <= 4; n++ {
			d, err := l.Allow(ctx, Request{Subject: sub, Buckets: bs, Cost: 1})
			if err != nil {
				t.Fatalf("Allow(%s) #%d: %v", sub, n, err)
			}
			wantAllowed, wantMask := n <= 3, uint32(0)
			if n >= 2 {
				wantMask = 0b100
			}
			if d.Allowed != wantAllowed || d.Bucket != 1 || d.ShadowDenied != wantMask {
				t.Errorf("Allow(%s) #%d = %+v, want allowed %v by bucket 1, shadow mask %b", sub, n, d, wantAllowed, wantMask)
			}
		}
		st, err := l.Peek(ctx, sub, bs)
		if err != nil {
			t.Fatalf("Peek(%s): %v", sub, err)
		}
		if st[0].Remaining != 2 || st[1].Remaining != 0 || st[2].Remaining != 0 {
			t.Errorf("Peek(%s) = %+v, want 2, 0, 0 left", sub, st)
		}
		if err := l.Reset(ctx, sub, bs); err != nil {
			t.Fatalf("Reset(%s): %v", sub, err)
		}
		if st, err := l.Peek(ctx, sub, bs); err != nil || st[0].Remaining != 5 {
			t.Errorf("Peek(%s) after Reset = %+v, %v, want full", sub, st, err)
		}
		if _, err := l.Allow(ctx, Request{Subject: sub, Buckets: bs, Cost: 1}); err != nil {
			t.Fatalf("Allow(%s) after Reset: %v", sub, err)
		}
	}
	// The subjects spread over the masters.
	var used atomic.Int32
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if n > 0 {
			used.Add(1)
		}
		return err
	})
	if err != nil {
		t.Fatalf("DBSIZE: %v", err)
	}
	if used.Load() < 2 {
		t.Errorf("keys on %d masters, want them spread over at least 2", used.Load())
	}
	if s := l.Stats(); s.Errors != 0 {
		t.Errorf("Stats().Errors = %d, want 0", s.Errors)
	}
}
