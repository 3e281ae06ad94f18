package rulesync

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// newSnapshots returns Snapshots on the test Redis under a prefix of the
// test's own, deleted when it ends.
func newSnapshots(t *testing.T, o SnapshotsOptions) (*Snapshots, *redis.Client) {
	t.Helper()
	rdb := testenv.Redis(t)
	o.Prefix = testenv.Prefix(t, "snapshot")
	testenv.DeleteKeys(t, rdb, o.Prefix)
	return NewSnapshots(rdb, o), rdb
}

// sampleSet returns n rules as an admin would write them, with plans.
func sampleSet(version int64, n int) rules.Set {
	set := rules.Set{Version: version, Plans: []rules.Plan{
		{Name: "gold", Limit: 1000, Period: rules.Period(time.Minute), Burst: new(int64(2000)), Description: "gold tier", Version: 3,
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), UpdatedAt: time.Date(2026, 1, 3, 3, 4, 5, 0, time.UTC)},
	}}
	rnd := rand.New(rand.NewPCG(uint64(n), 1)) // ids as random as UUIDs, and the same every run
	for i := range n {
		r := rules.Rule{
			ID:  fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", rnd.Uint32(), rnd.Uint32N(1<<16), rnd.Uint32N(1<<12), rnd.Uint32N(1<<16), rnd.Uint64N(1<<48)),
			API: "a1b2c3d4e5", Route: []string{"*", "GET /orders/{id}", "POST /orders", "ANY /pets/{petId}/photos"}[i%4],
			Subject: fmt.Sprintf("customer-%06d", i), Limit: new(int64(100 + i%900)), Period: rules.Period(time.Minute),
			Burst: new(int64(200 + i%900)), FailureMode: rules.FailOpen, Mode: rules.Enforce, Enabled: new(true),
			Description: "per-customer limit, ticket OPS-" + strconv.Itoa(i), Version: int64(1 + i%5),
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), UpdatedAt: time.Date(2026, 1, 3, 3, 4, 5, 0, time.UTC),
		}
		switch i % 10 {
		case 3:
			r.FailureMode = rules.FailClosed
		case 5:
			r.Limit, r.Period, r.Burst, r.Plan = nil, 0, nil, "gold"
		case 7:
			r.Cost, r.Mode = new(int64(5)), rules.Shadow
		}
		set.Rules = append(set.Rules, r)
	}
	return set
}

// stripped is set as a snapshot carries it: no descriptions, no timestamps.
func stripped(set rules.Set) rules.Set {
	out := rules.Set{Version: set.Version, Rules: []rules.Rule{}, Plans: []rules.Plan{}}
	for _, r := range set.Rules {
		r.Description, r.CreatedAt, r.UpdatedAt = "", time.Time{}, time.Time{}
		out.Rules = append(out.Rules, r)
	}
	for _, p := range set.Plans {
		p.Description, p.CreatedAt, p.UpdatedAt = "", time.Time{}, time.Time{}
		out.Plans = append(out.Plans, p)
	}
	return out
}

func TestPublishAndLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := newSnapshots(t, SnapshotsOptions{})
	if v, err := s.Version(ctx); v != 0 || err != nil {
		t.Errorf("Version() before any publish = %d, %v; want 0, nil", v, err)
	}
	if _, err := s.LoadAll(ctx); !errors.Is(err, rules.ErrNotFound) {
		t.Errorf("LoadAll() before any publish: error = %v, want rules.ErrNotFound", err)
	}
	for _, set := range []rules.Set{sampleSet(1_700_000_000_000_001, 40), sampleSet(1_700_000_000_000_002, 0)} {
		if ok, err := s.Publish(ctx, set); !ok || err != nil {
			t.Fatalf("Publish(version %d) = %v, %v; want true, nil", set.Version, ok, err)
		}
		if v, err := s.Version(ctx); v != set.Version || err != nil {
			t.Errorf("Version() = %d, %v; want %d", v, err, set.Version)
		}
		got, err := s.LoadAll(ctx)
		if err != nil {
			t.Fatalf("LoadAll() error = %v", err)
		}
		if diff := cmp.Diff(stripped(set), got); diff != "" {
			t.Errorf("LoadAll() mismatch (-published +loaded):\n%s", diff)
		}
	}
	if _, err := s.Publish(ctx, rules.Set{}); err == nil {
		t.Errorf("Publish(version 0): no error")
	}
}

// TestPublishOutOfOrder: a set older than, or as old as, the one Redis
// holds is not written, whatever order concurrent publishers land in.
func TestPublishOutOfOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := newSnapshots(t, SnapshotsOptions{})
	if ok, err := s.Publish(ctx, sampleSet(20, 2)); !ok || err != nil {
		t.Fatalf("Publish(20) = %v, %v", ok, err)
	}
	for _, v := range []int64{10, 20} {
		if ok, err := s.Publish(ctx, sampleSet(v, 3)); ok || err != nil {
			t.Errorf("Publish(%d) after 20 = %v, %v; want false, nil", v, ok, err)
		}
	}
	if got, err := s.LoadAll(ctx); err != nil || got.Version != 20 || len(got.Rules) != 2 {
		t.Errorf("LoadAll() = version %d, %d rules, %v; want version 20's 2 rules", got.Version, len(got.Rules), err)
	}

	// 30 publishers, versions 21..50, in random order: 50 stays.
	var wg sync.WaitGroup
	for _, i := range rand.Perm(30) {
		wg.Go(func() {
			if _, err := s.Publish(ctx, sampleSet(int64(21+i), 21+i)); err != nil {
				t.Errorf("Publish(%d): %v", 21+i, err)
			}
		})
	}
	wg.Wait()
	got, err := s.LoadAll(ctx)
	if v, _ := s.Version(ctx); err != nil || got.Version != 50 || len(got.Rules) != 50 || v != 50 {
		t.Errorf("after 30 racing publishes: version key %d, snapshot version %d with %d rules, %v; want 50 everywhere", v, got.Version, len(got.Rules), err)
	}
}

// TestCorrupt: a value that is not a snapshot this code wrote is
// ErrCorrupt, never a set.
func TestCorrupt(t *testing.T) {
	t.Parallel()
	good, err := encode(sampleSet(7, 5), nil)
	if err != nil {
		t.Fatal(err)
	}
	resum := func(b []byte) []byte { // a body change with a matching checksum
		out, _ := encodeRaw(7, b)
		return out
	}
	flip := append([]byte(nil), good...)
	flip[len(flip)-10] ^= 0x40
	tests := map[string][]byte{
		"empty":             {},
		"truncated header":  good[:20],
		"truncated body":    good[:len(good)-5],
		"a flipped bit":     flip,
		"unknown format":    append([]byte("SLR9"), good[4:]...),
		"version 0":         append(append([]byte(magicUnsigned), make([]byte, 8)...), good[12:]...),
		"not gzip":          resum([]byte("plain text")),
		"gzip of not JSON":  resum(gz(t, []byte("{\"rules\": [oops"))),
		"a rule of strings": resum(gz(t, []byte(`{"rules": [{"limit": "ten"}]}`))),
		"bomb":              resum(gz(t, make([]byte, maxDecoded+10))),
	}
	ctx := t.Context()
	s, rdb := newSnapshots(t, SnapshotsOptions{})
	_, key := s.Keys()
	for name, b := range tests {
		if _, err := decode(b, nil, 0); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode(%s) error = %v, want ErrCorrupt", name, err)
		}
	}
	// Through Redis, as an authorizer meets it.
	if err := rdb.Set(ctx, key, flip, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadAll(ctx); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("LoadAll() of a flipped bit: error = %v, want ErrCorrupt naming the checksum", err)
	}
}

// TestTooLarge: a set over MaxBytes moves the version and deletes the
// older snapshot, so no authorizer loads that one as current.
func TestTooLarge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := newSnapshots(t, SnapshotsOptions{MaxBytes: 1500})
	if ok, err := s.Publish(ctx, sampleSet(10, 1)); !ok || err != nil {
		t.Fatalf("Publish(small) = %v, %v", ok, err)
	}
	ok, err := s.Publish(ctx, sampleSet(11, 200))
	if !ok || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Publish(200 rules over 1500 bytes) = %v, %v; want true and ErrTooLarge", ok, err)
	}
	if v, _ := s.Version(ctx); v != 11 {
		t.Errorf("Version() = %d, want 11", v)
	}
	if _, err := s.LoadAll(ctx); !errors.Is(err, rules.ErrNotFound) {
		t.Errorf("LoadAll() after a too-large publish: error = %v, want rules.ErrNotFound", err)
	}
}

// TestSize logs the published size of realistic rule sets (up to the
// default cap, 10,000) and keeps the largest under DefaultMaxBytes.
//
//	go test -run TestSize -v ./internal/rulesync/
func TestSize(t *testing.T) {
	t.Parallel()
	for _, n := range []int{100, 1000, 10_000} {
		set := sampleSet(1, n)
		b, err := encode(set, nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := decode(b, nil, 0); err != nil {
			t.Fatal(err)
		}
		t.Logf("%6d rules: %8d bytes published (%.0f per rule), decoded in %v", n, len(b), float64(len(b))/float64(n), time.Since(start).Round(time.Microsecond))
		if len(b) > DefaultMaxBytes/10 {
			t.Errorf("%d rules encode to %d bytes, want well under DefaultMaxBytes (%d)", n, len(b), DefaultMaxBytes)
		}
	}
}

// TestCluster: the two keys share a slot, so the publish script runs on a
// Redis Cluster (ElastiCache cluster mode and Serverless).
func TestCluster(t *testing.T) {
	t.Parallel()
	addr := startClusterNode(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	s := NewSnapshots(rdb, SnapshotsOptions{})
	vk, sk := s.Keys()
	a, errA := rdb.ClusterKeySlot(ctx, vk).Result()
	b, errB := rdb.ClusterKeySlot(ctx, sk).Result()
	if errA != nil || errB != nil || a != b {
		t.Errorf("slots of %s and %s = %d, %d (%v, %v); want one", vk, sk, a, b, errA, errB)
	}
	if ok, err := s.Publish(ctx, sampleSet(5, 10)); !ok || err != nil {
		t.Fatalf("Publish on a cluster = %v, %v", ok, err)
	}
	if got, err := s.LoadAll(ctx); err != nil || got.Version != 5 || len(got.Rules) != 10 {
		t.Errorf("LoadAll on a cluster = version %d, %d rules, %v", got.Version, len(got.Rules), err)
	}
}

func FuzzDecode(f *testing.F) {
	good, err := encode(sampleSet(3, 3), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:headerUnsigned])
	f.Add([]byte(magicUnsigned))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := decode(b, nil, 0)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode error = %v, want ErrCorrupt", err)
		}
		if err == nil && set.Version < 1 {
			t.Errorf("decode = version %d, want >= 1", set.Version)
		}
	})
}

// encodeRaw frames body as a snapshot of version v with a valid checksum.
func encodeRaw(v int64, body []byte) ([]byte, error) {
	good, err := encode(rules.Set{Version: v}, nil)
	if err != nil {
		return nil, err
	}
	out := append(good[:headerUnsigned:headerUnsigned], body...)
	sum := sha256Sum(body)
	copy(out[len(magicUnsigned)+8:], sum)
	return out, nil
}

// startClusterNode starts a private one-node Redis Cluster owning every
// slot (cross-slot scripts fail there as on any cluster) and returns its
// address; the server is killed, by pid, when the test ends.
func startClusterNode(t *testing.T) string {
	t.Helper()
	addr := testenv.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "$DIR/nodes.conf").Addr
	node := redis.NewClient(&redis.Options{Addr: addr})
	defer node.Close()
	ctx := t.Context()
	if err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	testenv.Await(t, 10*time.Second, 10*time.Millisecond, "cluster on "+addr+" ok", func() bool {
		info, _ := node.ClusterInfo(ctx).Result()
		return strings.Contains(info, "cluster_state:ok")
	})
	return addr
}
