package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/cdn"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestEdgeThroughTheGraphs runs the edge tier's source half as the
// functions build it: the authorizer's graph records a blocked subject
// and a spent quota, the publisher's graph puts both in the store, an
// admin reset (the admin-subjects graph) deletes the quota's entry there
// and leaves the block's (the block still denies), and a short denial
// never reaches the store.
func TestEdgeThroughTheGraphs(t *testing.T) {
	const edgeKey = "edge-key-0123456789abcdef"
	env := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "REDIS_URL": testenv.RedisURL(t),
		"EDGE_KEY": edgeKey, "REDIS_TIMEOUT": "1s"}
	ctx := context.Background()
	adm, _ := newAdmin(t, env)
	for _, r := range []string{
		`{"api":"a1b2c3d4e5","route":"*","subject":"blocked-key","limit":0,"period":"1h"}`,
		`{"api":"a1b2c3d4e5","route":"*","subject":"quota-key","kind":"quota","limit":1,"period":"1d"}`,
		`{"api":"a1b2c3d4e5","route":"*","subject":"*","limit":1,"period":"10s"}`,
	} {
		call(t, adm.Service, "POST", "/rules", nil, json.RawMessage(r), http.StatusCreated)
	}
	d, _ := newApp(t, env)
	if d.Edge == nil {
		t.Fatal("NewDecider with EDGE_KEY built no edge recorder")
	}
	for _, key := range []string{"blocked-key", "quota-key", "short-key"} {
		res := decide(t, d, key)
		if res.Allowed {
			res = decide(t, d, key)
		}
		if long := res.RetryAfter >= cdn.MinRetryAfter; res.Allowed || long != (key != "short-key") {
			t.Fatalf("%s: allowed %v, retry after %v", key, res.Allowed, res.RetryAfter)
		}
	}
	if err := d.Edge.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	st := &cdn.MemoryStore{}
	cfg, o, _ := testConfig(t, env)
	pub, err := app.NewEdgePublisher(ctx, cfg, o, app.EdgeOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	if r, err := pub.Handle(ctx); err != nil || r.Put != 2 {
		t.Fatalf("Handle = %+v, %v; want two puts", r, err)
	}
	if _, err := st.Get(cdn.Key(edgeKey, "short-key")); err == nil {
		t.Error("a short denial reached the store")
	}

	for _, key := range []string{"quota-key", "blocked-key"} {
		call(t, adm.Service, "DELETE", "/subjects/"+key+"/buckets?api=a1b2c3d4e5", nil, nil, http.StatusNoContent)
	}
	if r, err := pub.Handle(ctx); err != nil || r.Deleted != 1 {
		t.Fatalf("after the resets: Handle = %+v, %v; want the quota's entry deleted", r, err)
	}
	if _, err := st.Get(cdn.Key(edgeKey, "quota-key")); err == nil {
		t.Error("quota-key's entry outlived its reset")
	}
	if _, err := st.Get(cdn.Key(edgeKey, "blocked-key")); err != nil {
		t.Errorf("blocked-key's entry went with a reset that leaves the block: %v", err)
	}
}

// TestEdgePublisherRounds: one invocation runs rounds until its margin
// before the deadline, so an entry recorded during it goes out in it.
func TestEdgePublisherRounds(t *testing.T) {
	env := map[string]string{"REDIS_URL": testenv.RedisURL(t), "EDGE_KEY": "edge-key-0123456789abcdef"}
	cfg, o, _ := testConfig(t, env)
	st := &cdn.MemoryStore{}
	ctx := context.Background()
	pub, err := app.NewEdgePublisher(ctx, cfg, o, app.EdgeOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	pub.Interval, pub.Margin = 20*time.Millisecond, 20*time.Millisecond
	rdb := testenv.Redis(t)
	out := cdn.KeysFor(cfg.RedisPrefix).Out
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	go func() {
		// sleep: a record made while the invocation runs, a round later.
		time.Sleep(200 * time.Millisecond)
		rdb.HSet(context.Background(), out, cdn.Key("k", "late"), "")
	}()
	start := time.Now()
	r, err := pub.Handle(ctx)
	if err != nil || r.Deleted != 1 {
		t.Errorf("Handle = %+v, %v; want the delete recorded during the invocation", r, err)
	}
	if took := time.Since(start); took < 1900*time.Millisecond || took > 2*time.Second {
		t.Errorf("Handle took %v of its 2s, want it to stop within its margin", took)
	}
}
