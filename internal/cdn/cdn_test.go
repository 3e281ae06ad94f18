package cdn_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/cdn"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

func denial(eff *rules.Effective, subject string, retry time.Duration) *authorizer.Result {
	return &authorizer.Result{Effective: eff, Rule: eff.ID, Subject: subject, DimensionSubject: subject,
		DimensionSource: identity.SourceHeader, Dimension: identity.DefaultDimension, Limit: eff.Limit,
		RetryAfter: retry, Reset: retry, Cost: 1}
}

// TestRecordPublishSweep runs the tier's source half on a real Redis: a
// long denial reaches the store in one batch, a short one never does, a
// reset (Forget) deletes the entry, a rule change drops its entries, and
// an expired entry is swept.
func TestRecordPublishSweep(t *testing.T) {
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, "cdn")
	ctx := context.Background()
	now := time.Unix(1_900_000_000, 0)
	clock := func() time.Time { return now }
	rec, err := cdn.NewRecorder(rdb, cdn.RecorderOptions{EdgeKey: "edge", Prefix: prefix, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	quota := &rules.Effective{ID: "q", API: "api", Route: rules.Wildcard, Subject: rules.Wildcard, Limit: 10, Burst: 10, Cost: 1,
		Period: 24 * time.Hour, Kind: rules.Quota, PolicyName: `"q"`, Policy: `"q";q=10;w=86400`}
	route := *quota
	route.ID, route.Route = "route", "GET /orders"
	current := []rules.Effective{*quota, route}
	st := &cdn.MemoryStore{}
	pub := cdn.NewPublisher(rdb, st, cdn.PublisherOptions{Prefix: prefix, Now: clock,
		Rules: func(context.Context) ([]rules.Effective, error) { return current, nil }})
	pub.Once(ctx) // record the rules as they are

	rec.Denied("api", denial(quota, "long", 2*time.Hour))
	rec.Denied("api", denial(quota, "short", 30*time.Second))
	rec.Denied("api", denial(&route, "routed", 2*time.Hour))
	rec.Denied("api", denial(quota, "long", 2*time.Hour)) // again: one write
	rec.Close()
	if r := pub.Once(ctx); r.Put != 1 {
		t.Fatalf("Once = %+v; want one put (the long, API-wide denial)", r)
	}
	v, err := st.Get(cdn.Key("edge", "long"))
	if err != nil {
		t.Fatalf("Get(long) = %v", err)
	}
	if e, _ := cdn.DecodeEntry(v); e.Expires != now.Add(2*time.Hour).Unix() || e.Rule != "q" || e.API != "api" {
		t.Errorf("entry = %+v", e)
	}
	for _, s := range []string{"short", "routed"} {
		if _, err := st.Get(cdn.Key("edge", s)); err == nil {
			t.Errorf("%s reached the store", s)
		}
	}

	// Undo: a reset deletes at once at the source, the next round at the store.
	rec2, _ := cdn.NewRecorder(rdb, cdn.RecorderOptions{EdgeKey: "edge", Prefix: prefix, Now: clock})
	defer rec2.Close()
	if err := rec2.Forget(ctx, "long"); err != nil {
		t.Fatal(err)
	}
	if r := pub.Once(ctx); r.Deleted != 1 || st.Len() != 0 {
		t.Fatalf("after Forget: Once = %+v, store holds %d", r, st.Len())
	}

	// A rule change drops the rule's entries.
	rec2.Denied("api", denial(quota, "again", 2*time.Hour))
	if err := rec2.Flush(ctx); err != nil { // the recorder's writer is a goroutine of its own
		t.Fatal(err)
	}
	pub.Once(ctx)
	if st.Len() != 1 {
		t.Fatalf("store holds %d, want 1", st.Len())
	}
	changed := *quota
	changed.Limit, changed.Burst = 1000, 1000
	current = []rules.Effective{changed, route}
	if r := pub.Once(ctx); r.Deleted != 1 || st.Len() != 0 {
		t.Fatalf("after a rule change: Once = %+v, store holds %d", r, st.Len())
	}

	// Expiry: swept once past.
	rec3, _ := cdn.NewRecorder(rdb, cdn.RecorderOptions{EdgeKey: "edge", Prefix: prefix, Now: clock})
	rec3.Denied("api", denial(&changed, "expires", 2*time.Minute))
	rec3.Close()
	pub.Once(ctx)
	now = now.Add(3 * time.Minute)
	if r := pub.Once(ctx); r.Deleted != 1 || st.Len() != 0 {
		t.Fatalf("after expiry: Once = %+v, store holds %d", r, st.Len())
	}
}

// TestPublishConflict: a store whose ETag moved is read again and the
// batch retried once.
func TestPublishConflict(t *testing.T) {
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, "cdn")
	ctx := context.Background()
	st := &cdn.MemoryStore{}
	pub := cdn.NewPublisher(rdb, st, cdn.PublisherOptions{Prefix: prefix})
	if err := rdb.HSet(ctx, cdn.KeysFor(prefix).Out, cdn.Key("k", "a"), "").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	// Another writer moves the ETag.
	etag, _ := st.ETag(ctx)
	if _, err := st.Update(ctx, etag, map[string]string{"other": "{}"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, cdn.KeysFor(prefix).Out, cdn.Key("k", "b"), "").Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := pub.Publish(ctx); err != nil || r.Deleted != 1 {
		t.Fatalf("Publish after a conflict = %+v, %v", r, err)
	}
}

func TestFunctionSize(t *testing.T) {
	src, err := cdn.Function(cdn.FunctionOptions{StoreID: "s", EdgeKey: "k", API: "a", Sources: identity.DefaultSources})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("edge function: %d bytes of %d", len(src), cdn.MaxFunctionBytes)
	many := make([]identity.Source, 0, 16)
	for range 16 {
		many = append(many, identity.HeaderSource("x-"+strings.Repeat("h", 126)))
	}
	if _, err := cdn.Function(cdn.FunctionOptions{Sources: many}); err != nil {
		t.Errorf("16 long sources: %v", err)
	}
}

// TestMemoryStoreFull: the local store refuses a batch past the
// service's 5 MB, as the service does, and writes none of it.
func TestMemoryStoreFull(t *testing.T) {
	ctx := context.Background()
	st := &cdn.MemoryStore{}
	value := strings.Repeat("v", cdn.MaxValueBytes)
	var err error
	n := 0
	for batch := 0; err == nil && batch < 200; batch++ { // 200 batches: twice what fits
		puts := map[string]string{}
		for i := range cdn.MaxBatch {
			puts[cdn.Key("k", strconv.Itoa(batch*cdn.MaxBatch+i))] = value
		}
		etag, _ := st.ETag(ctx)
		if _, err = st.Update(ctx, etag, puts, nil); err == nil {
			n += len(puts)
		}
	}
	if got := st.Len(); got != n || n*(cdn.KeyLen+cdn.MaxValueBytes) > cdn.MaxStoreBytes || n < cdn.MaxStoreBytes/(cdn.KeyLen+cdn.MaxValueBytes)-cdn.MaxBatch {
		t.Errorf("store took %d entries (holds %d) before refusing: %v", n, got, err)
	}
}

// TestFunctionFor: the environment's spelling gives Function's code, and
// a setting the authorizer would refuse is an error naming it.
func TestFunctionFor(t *testing.T) {
	got, err := cdn.FunctionFor("s", "k", "a", "", "")
	want, _ := cdn.Function(cdn.FunctionOptions{StoreID: "s", EdgeKey: "k", API: "a", Sources: identity.DefaultSources})
	if err != nil || got != want {
		t.Errorf("FunctionFor(defaults) differs from Function(defaults): %v", err)
	}
	for _, bad := range [][2]string{{"cookie:x", ""}, {"", "draft99"}} {
		if _, err := cdn.FunctionFor("s", "k", "a", bad[0], bad[1]); err == nil {
			t.Errorf("FunctionFor(%q, %q) = nil error", bad[0], bad[1])
		}
	}
}
