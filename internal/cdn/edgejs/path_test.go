package edgejs_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/cdn"
	"github.com/sluicehq/sluice/internal/cdn/edgejs"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

type fixed struct{ s *rules.Snapshot }

func (f fixed) Snapshot(context.Context) *rules.Snapshot { return f.s }

// TestDecideToEdge runs the whole path on one machine: the core decides on
// a real Redis, its Denied hook records, the Publisher fills the store,
// and the function under goja answers 429 for the blocked subject and
// passes the one whose denial was short.
func TestDecideToEdge(t *testing.T) {
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, "cdnpath")
	ctx := context.Background()
	one, zero := int64(1), int64(0)
	snap := rules.NewSnapshot([]rules.Rule{
		{ID: "block", API: "api", Route: rules.Wildcard, Subject: "blocked", Limit: &zero, Period: rules.Period(2 * time.Minute)},
		{ID: "rate", API: "api", Route: rules.Wildcard, Subject: rules.Wildcard, Limit: &one, Period: rules.Period(time.Second)},
	}, nil, rules.SnapshotOptions{})
	if sk := snap.Skipped(); len(sk) > 0 {
		t.Fatalf("skipped: %+v", sk)
	}
	rec, err := cdn.NewRecorder(rdb, cdn.RecorderOptions{EdgeKey: "edge-key", Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	lim := limiter.New(rdb, limiter.Options{Prefix: prefix, Timeout: time.Second})
	a := authorizer.New(fixed{snap}, lim, authorizer.Options{Denied: rec.Denied})
	for _, key := range []string{"blocked", "short", "short"} {
		if _, err := a.Decide(ctx, &authorizer.Request{API: "api", Method: "GET", Resource: "/orders", Headers: map[string]string{"x-api-key": key}}); err != nil {
			t.Fatal(err)
		}
	}
	rec.Close()
	st := &cdn.MemoryStore{}
	pub := cdn.NewPublisher(rdb, st, cdn.PublisherOptions{Prefix: prefix})
	if r := pub.Once(ctx); r.Put != 1 {
		t.Fatalf("Once = %+v; want the 2-minute block alone", r)
	}
	src, err := cdn.Function(cdn.FunctionOptions{StoreID: "s", EdgeKey: "edge-key", API: "api", Sources: identity.DefaultSources})
	if err != nil {
		t.Fatal(err)
	}
	f, err := edgejs.Load(src, st.Get, nil)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int{"blocked": 429, "short": 0} {
		var e edgejs.Event
		e.Request = viewer(raw{headers: [][2]string{{"x-api-key", key}}})
		got, err := f.Handle(e)
		if err != nil {
			t.Fatal(err)
		}
		status := 0
		if got != nil {
			status = got.StatusCode
		}
		if status != want {
			t.Errorf("edge answer to %s = %d, want %d (0: passed)", key, status, want)
		}
		if got == nil {
			continue
		}
		if n, _ := strconv.Atoi(got.Headers["retry-after"].Value); n < 100 || n > 120 {
			t.Errorf("Retry-After = %q, want about 120", got.Headers["retry-after"].Value)
		}
	}
}
