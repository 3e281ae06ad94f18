package limiter_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
)

// TestHorizonsAgree pins the one bound rules validation and the limiter
// both hold: what rules validation accepts, the limiter takes (through
// BucketFor), and nothing beyond.
func TestHorizonsAgree(t *testing.T) {
	if rules.MaxHorizon != limiter.MaxHorizon {
		t.Fatalf("rules.MaxHorizon = %v, limiter.MaxHorizon = %v; want one bound", rules.MaxHorizon, limiter.MaxHorizon)
	}
	// At the boundary, in the units each counts in: rules in nanoseconds,
	// the limiter in the script's microseconds. A Limiter whose Redis is
	// not there answers an accepted bucket with a Redis failure, a refused
	// one with ErrInvalidRequest before any call.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	l := limiter.New(c, limiter.Options{BreakerThreshold: -1})
	for _, tc := range []struct {
		limit, burst int64
		period       time.Duration
	}{
		{1, 10, rules.Year},
		{1, 11, rules.Year},
		{7, 851, 30 * rules.Day},
		{7, 852, 30 * rules.Day},
		{1, 315_360_000, time.Second},
		{1, 315_360_001, time.Second},
	} {
		accepted := rules.WithinHorizon(tc.burst, tc.limit, tc.period)
		b := limiter.BucketFor(&rules.Effective{ID: "r", Limit: tc.limit, Burst: tc.burst, Period: tc.period})
		_, err := l.Allow(t.Context(), limiter.Request{Subject: "s", Buckets: []limiter.Bucket{b}, Cost: 1})
		if err == nil {
			t.Fatalf("Allow(%+v) with no Redis = nil error", b)
		}
		if refused := errors.Is(err, limiter.ErrInvalidRequest); refused == accepted {
			t.Errorf("%d/%v burst %d: rules accepts %v, limiter refuses %v (%v)", tc.limit, tc.period, tc.burst, accepted, refused, err)
		}
	}
}

// TestForDurable: a durable quota reaches the limiter as a durable bucket,
// through the snapshot the authorizer matches against; a quota without
// the option does not.
func TestForDurable(t *testing.T) {
	for _, durable := range []bool{true, false} {
		limit := int64(1000)
		r := rules.Rule{ID: "q", API: "api", Route: rules.Wildcard, Subject: rules.Wildcard, Kind: rules.Quota,
			Limit: &limit, Period: rules.Month, FailureMode: rules.FailClosed, Durable: durable, Enabled: new(true)}
		r.Normalize()
		snap := rules.NewSnapshot([]rules.Rule{r}, nil, rules.SnapshotOptions{})
		var got []bool
		for _, e := range snap.Match("api", "GET", "/x", "someone").All() {
			if e != nil {
				got = append(got, limiter.BucketFor(e).Durable)
			}
		}
		if len(got) != 1 || got[0] != durable {
			t.Errorf("durable %v: buckets' Durable = %v (skipped: %v), want [%v]", durable, got, snap.Skipped(), durable)
		}
	}
}
