package authorizer_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/rules"
)

// TestFailOpenStormLogsOnce: with Redis killed (a port that refuses
// connections), every decision fails open; the log has one line for the
// storm, whose "suppressed" counts the rest, while the metrics count
// every fail-open.
func TestFailOpenStormLogsOnce(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // killed: nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	lim := limiter.New(rdb, limiter.Options{Timeout: 50 * time.Millisecond, BreakerThreshold: -1})
	snap := rules.NewSnapshot([]rules.Rule{rule("open", "*", "*", "*", 10, time.Minute)}, nil, rules.SnapshotOptions{})
	var logs, emf bytes.Buffer
	m := metrics.New(metrics.Options{W: &emf, Interval: time.Hour})
	a := authorizer.New(snaps{snap}, lim, authorizer.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: m,
		FailLogInterval: time.Hour})
	const n = 50
	for i := range n {
		res, err := a.Decide(context.Background(), &authorizer.Request{API: "a", Method: "GET", Resource: "/x", Headers: map[string]string{"x-api-key": "k"}})
		if err == nil || !res.FailOpen || !res.Allowed {
			t.Fatalf("decision %d = %+v, %v; want a fail-open with the error", i+1, res, err)
		}
		if errors.Is(err, authorizer.ErrNoSubject) {
			t.Fatal(err)
		}
	}
	var lines int
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		var l struct {
			Decision   string
			Suppressed int
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Decision == authorizer.DecisionFailOpen {
			lines++
			if l.Suppressed != 0 {
				t.Errorf("first line suppressed = %d, want 0", l.Suppressed)
			}
		}
	}
	if lines != 1 {
		t.Errorf("%d fail-open lines for %d fail-opens, want 1", lines, n)
	}
	m.Flush()
	if !strings.Contains(emf.String(), `"FailOpen":50`) {
		t.Errorf("EMF line %s: want FailOpen 50, every decision counted", emf.String())
	}
}
