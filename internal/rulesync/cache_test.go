package rulesync_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
)

// fakeLoader is a Loader whose set and failure the test sets: it stands for
// the store, or for the published snapshot. The real ones (PostgreSQL,
// Redis) are exercised in internal/app and internal/rulesync.
type fakeLoader struct {
	mu    sync.Mutex
	set   rules.Set
	err   error
	loads atomic.Int64
}

func (s *fakeLoader) LoadAll(ctx context.Context) (rules.Set, error) {
	s.loads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return rules.Set{}, s.err
	}
	return rules.Set{Version: s.set.Version, Rules: append([]rules.Rule(nil), s.set.Rules...)}, nil
}

// put sets the rules of version v, and err.
func (s *fakeLoader) put(v int64, rs []rules.Rule, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set, s.err = rules.Set{Version: v, Rules: rs}, err
}

// fakeVersion is a VersionSource.
type fakeVersion struct {
	v     atomic.Int64
	down  atomic.Bool
	reads atomic.Int64
}

func (f *fakeVersion) Version(ctx context.Context) (int64, error) {
	f.reads.Add(1)
	if f.down.Load() {
		return 0, errors.New("redis: connection refused")
	}
	return f.v.Load(), nil
}

func cacheRule(id string, limit int64) rules.Rule {
	return rules.Rule{ID: id, API: "*", Route: "*", Subject: "*", Limit: &limit, Period: rules.Period(time.Minute)}
}

// one returns the single API-wide rule of that limit.
func one(limit int64) []rules.Rule { return []rules.Rule{cacheRule("r1", limit)} }

// limitOf returns the API-wide limit the snapshot applies, -1 for none.
func limitOf(s *rules.Snapshot) int64 {
	m := s.Match("api", "GET", "/", "someone")
	if m.API == nil {
		return -1
	}
	return m.API.Limit
}

// advance lets d pass on the clock of the synctest bubble the test runs
// in, once every other goroutine in it is blocked: no real time passes
// (synctest.Wait panics outside a bubble).
func advance(d time.Duration) {
	synctest.Wait()
	time.Sleep(d) // sleep: virtual, on the bubble's clock
}

// eventually polls c.Snapshot until cond holds, failing after d on the
// bubble's clock.
func eventually(t *testing.T, c *rulesync.Cache, d time.Duration, what string, cond func(*rules.Snapshot) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if cond(c.Snapshot(context.Background())) {
			return time.Since(start)
		}
		advance(2 * time.Millisecond)
	}
	t.Fatalf("after %v: %s did not happen; stats %+v", d, what, c.Stats())
	return 0
}

// drive calls c.Snapshot for d on the bubble's clock, as a stream of
// requests does, and waits for the last check.
func drive(c *rulesync.Cache, d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		c.Snapshot(context.Background())
		advance(time.Millisecond)
	}
	c.Wait()
}

// publish puts rs in l (the store or the snapshots) at version v, and
// announces v.
func publish(l *fakeLoader, ver *fakeVersion, v int64, rs []rules.Rule) {
	l.put(v, rs, nil)
	ver.v.Store(v)
}

// newCache is rulesync.NewCache, failing the test on an error.
func newCache(t *testing.T, st rulesync.Loader, ver rulesync.VersionSource, o rulesync.CacheOptions) *rulesync.Cache {
	t.Helper()
	c, err := rulesync.NewCache(context.Background(), st, ver, o)
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	return c
}

// snapshotCache returns a Cache over an empty store, whose snapshots
// (o.Snapshots) hold version v, a rule of limit limit, announced.
func snapshotCache(t *testing.T, v, limit int64, o rulesync.CacheOptions) (c *rulesync.Cache, st, snaps *fakeLoader, ver *fakeVersion) {
	t.Helper()
	st, snaps, ver = &fakeLoader{}, &fakeLoader{}, &fakeVersion{}
	publish(snaps, ver, v, one(limit))
	o.Snapshots = snaps
	return newCache(t, st, ver, o), st, snaps, ver
}

func TestCacheReloadsWhenVersionMoves(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &fakeLoader{}
		st.put(7, one(10), nil)
		ver := &fakeVersion{}
		ver.v.Store(7)
		c := newCache(t, st, ver, rulesync.CacheOptions{Poll: 20 * time.Millisecond, Refresh: time.Hour})
		if got := limitOf(c.Snapshot(context.Background())); got != 10 {
			t.Fatalf("limit after init = %d, want 10", got)
		}
		if s := c.Stats(); !s.Loaded || s.Version != 7 || s.Rules != 1 || s.Reloads != 1 || s.Origin != rulesync.FromStore {
			t.Fatalf("Stats() after init = %+v, want loaded from the store, version 7, 1 rule, 1 reload", s)
		}

		// The version alone does not reload while it stays put.
		loads := st.loads.Load()
		advance(60 * time.Millisecond)
		for range 10 {
			c.Snapshot(context.Background())
			advance(5 * time.Millisecond)
		}
		c.Wait()
		if got := st.loads.Load(); got != loads {
			t.Errorf("loads with an unchanged version = %d, want %d", got, loads)
		}
		if reads := ver.reads.Load(); reads < 1 || reads > 10 {
			t.Errorf("version reads in ~110ms at a 20ms poll = %d, want 1..10", reads)
		}

		publish(st, ver, 8, one(20))
		took := eventually(t, c, 2*time.Second, "reload after the version moved", func(s *rules.Snapshot) bool { return limitOf(s) == 20 })
		t.Logf("propagation through the cache: %v", took)
		if s := c.Stats(); s.Version != 8 {
			t.Errorf("Stats().Version = %d, want 8", s.Version)
		}
	})
}

func TestCacheFullRefresh(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &fakeLoader{}
		st.put(1, one(10), nil)
		snaps := &fakeLoader{}
		snaps.put(1, one(10), nil)
		ver := &fakeVersion{}
		ver.v.Store(1)
		c := newCache(t, st, ver, rulesync.CacheOptions{Snapshots: snaps, Poll: 10 * time.Millisecond, Refresh: 50 * time.Millisecond})
		if s := c.Stats(); s.Origin != rulesync.FromSnapshot || st.loads.Load() != 0 {
			t.Fatalf("after init: %+v and %d store loads, want the snapshot and no store load", s, st.loads.Load())
		}
		// A write whose publish was lost: the version stays, the store moved.
		st.put(2, one(30), nil)
		eventually(t, c, 2*time.Second, "full refresh", func(s *rules.Snapshot) bool { return limitOf(s) == 30 })
		if s := c.Stats(); s.Origin != rulesync.FromStore || s.Version != 2 {
			t.Errorf("Stats() after the full refresh = %+v, want version 2 from the store", s)
		}
		if age := c.Age(); age > time.Second {
			t.Errorf("Age() right after a refresh = %v, want small", age)
		}
	})
}

func TestCacheFailedReloadKeepsSnapshot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &fakeLoader{}
		st.put(1, one(10), nil)
		ver := &fakeVersion{}
		ver.v.Store(1)
		var errs atomic.Int64
		c := newCache(t, st, ver, rulesync.CacheOptions{
			Poll: 10 * time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond,
			OnError: func(error) { errs.Add(1) },
		})
		st.put(0, nil, errors.New("database is down"))
		ver.v.Store(2)
		eventually(t, c, 2*time.Second, "a failed reload", func(*rules.Snapshot) bool { return c.Stats().Failures > 0 })
		if got := limitOf(c.Snapshot(context.Background())); got != 10 {
			t.Fatalf("limit after a failed reload = %d, want the last snapshot's 10", got)
		}
		if s := c.Stats(); s.LastError == nil || !s.Loaded || errs.Load() == 0 {
			t.Errorf("Stats() after a failed reload = %+v (OnError calls %d), want loaded with LastError", s, errs.Load())
		}
		// The database comes back: the pending version change is picked up.
		st.put(2, one(40), nil)
		eventually(t, c, 2*time.Second, "reload after the database came back", func(s *rules.Snapshot) bool { return limitOf(s) == 40 })

		// Redis (the version) down too: the snapshot keeps serving.
		ver.down.Store(true)
		advance(30 * time.Millisecond)
		for range 5 {
			if got := limitOf(c.Snapshot(context.Background())); got != 40 {
				t.Fatalf("limit with the version source down = %d, want 40", got)
			}
			advance(10 * time.Millisecond)
		}
	})
}

func TestCacheColdStartDatabaseDown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &fakeLoader{}
		st.put(0, nil, errors.New("dial tcp: connection refused"))
		def := &rules.Effective{Limit: 5, Period: time.Minute}
		c, err := rulesync.NewCache(context.Background(), st, &fakeVersion{}, rulesync.CacheOptions{
			Default: def, Poll: 5 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 80 * time.Millisecond,
		})
		if err == nil {
			t.Fatal("NewCache with the database down: no error")
		}
		if c == nil {
			t.Fatal("NewCache with the database down returned no cache")
		}
		m := c.Snapshot(context.Background()).Match("api", "GET", "/", "someone")
		if !m.Default || m.API == nil || m.API.Limit != 5 {
			t.Fatalf("Match on a cold cache = %+v, want the default rule", m)
		}
		if s := c.Stats(); s.Loaded || s.Origin != rulesync.FromNothing || s.Version != -1 {
			t.Errorf("Stats() before any load succeeded = %+v, want not loaded, origin none, version -1", s)
		}

		// Retries back off: 20, 40, 80, 80ms... so 300ms of calls make a handful
		// of loads, not one per call.
		drive(c, 300*time.Millisecond)
		if n := st.loads.Load(); n < 2 || n > 8 {
			t.Errorf("loads in 300ms of retries with backoff 20..80ms = %d, want 2..8", n)
		}

		st.put(1, one(10), nil)
		eventually(t, c, 2*time.Second, "load once the database is up", func(s *rules.Snapshot) bool { return limitOf(s) == 10 })
		if s := c.Stats(); !s.Loaded || s.LastError != nil {
			t.Errorf("Stats() after recovery = %+v, want loaded, no error", s)
		}
	})
}

func TestCacheRefreshAndConcurrentReaders(t *testing.T) {
	t.Parallel()
	st := &fakeLoader{}
	st.put(1, one(1), nil)
	ver := &fakeVersion{}
	c := newCache(t, st, ver, rulesync.CacheOptions{Poll: time.Millisecond})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if l := limitOf(c.Snapshot(context.Background())); l < 1 {
					t.Errorf("limit = %d mid-reload, want a whole snapshot", l)
					return
				}
			}
		})
	}
	for i := int64(2); i < 20; i++ {
		st.put(i, one(i), nil)
		if err := c.Refresh(context.Background(), true); err != nil {
			t.Errorf("Refresh: %v", err)
		}
		if got := limitOf(c.Snapshot(context.Background())); got != i {
			t.Errorf("limit after Refresh = %d, want %d", got, i)
		}
	}
	close(stop)
	wg.Wait()
}

// TestCacheSnapshotFirst: with a published snapshot, neither the first load
// nor a reload the version announces reads the store.
func TestCacheSnapshotFirst(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st, snaps, ver := &fakeLoader{}, &fakeLoader{}, &fakeVersion{}
		st.put(0, nil, errors.New("dial tcp: connection refused")) // cold start with the database down
		publish(snaps, ver, 100, one(10))
		var reloads []string
		c, err := rulesync.NewCache(context.Background(), st, ver, rulesync.CacheOptions{
			Snapshots: snaps, Poll: 5 * time.Millisecond, Refresh: time.Hour,
			OnReload: func(v int64, from rulesync.Origin, _ *rules.Snapshot) {
				reloads = append(reloads, fmt.Sprint(v, " ", from))
			},
		})
		if err != nil {
			t.Fatalf("NewCache with the snapshot up, the database down: %v", err)
		}
		if got, s := limitOf(c.Snapshot(context.Background())), c.Stats(); got != 10 || s.Origin != rulesync.FromSnapshot || s.Version != 100 {
			t.Fatalf("after a cold start with the database down: limit %d, stats %+v; want the snapshot's 10, version 100", got, s)
		}

		publish(snaps, ver, 101, one(20))
		eventually(t, c, 2*time.Second, "reload from the snapshot", func(s *rules.Snapshot) bool { return limitOf(s) == 20 })
		c.Wait()
		if n := st.loads.Load(); n != 0 {
			t.Errorf("store loads = %d, want none", n)
		}
		if got := strings.Join(reloads, ","); got != "100 snapshot,101 snapshot" {
			t.Errorf("reloads = %s, want 100 snapshot,101 snapshot", got)
		}
	})
}

// TestCacheSnapshotFallbacks: a snapshot the cache cannot use sends it to
// the store, and says why; a missing one silently.
func TestCacheSnapshotFallbacks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		snapV    int64
		snapErr  error
		announce int64
		wantErr  string // in OnError; "" none
	}{
		{"corrupt", 0, errors.New("checksum mismatch"), 20, "checksum mismatch"},
		{"missing", 0, fmt.Errorf("no rules snapshot: %w", rules.ErrNotFound), 20, ""},
		{"older than held", 5, nil, 20, "(held: 10): ignored"},
		{"older than announced", 15, nil, 20, "older than the announced 20"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				st, snaps, ver := &fakeLoader{}, &fakeLoader{}, &fakeVersion{}
				st.put(10, one(10), nil)
				snaps.put(0, nil, fmt.Errorf("no rules snapshot: %w", rules.ErrNotFound))
				ver.v.Store(10)
				var errs []string
				var mu sync.Mutex
				c := newCache(t, st, ver, rulesync.CacheOptions{
					Snapshots: snaps, Poll: time.Millisecond, Refresh: time.Hour,
					OnError: func(err error) { mu.Lock(); errs = append(errs, err.Error()); mu.Unlock() },
				})
				snaps.put(tc.snapV, one(tc.snapV), tc.snapErr)
				publish(st, ver, tc.announce, one(tc.announce))
				eventually(t, c, 2*time.Second, "reload from the store", func(s *rules.Snapshot) bool { return limitOf(s) == tc.announce })
				if s := c.Stats(); s.Origin != rulesync.FromStore || s.Version != tc.announce {
					t.Errorf("Stats() = %+v, want version %d from the store", s, tc.announce)
				}
				mu.Lock()
				defer mu.Unlock()
				all := strings.Join(errs, "\n")
				if tc.wantErr == "" && all != "" || !strings.Contains(all, tc.wantErr) {
					t.Errorf("OnError heard %q, want %q", all, tc.wantErr)
				}
			})
		})
	}
}

// TestCacheVersionGoesBack: a version below the held set's (Redis restarted
// empty, or failed over to a replica that lagged) changes nothing and costs
// no reload on later polls; the next publish, newer, is loaded.
func TestCacheVersionGoesBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st, snaps, ver := &fakeLoader{}, &fakeLoader{}, &fakeVersion{}
		st.put(50, one(50), nil)
		publish(snaps, ver, 50, one(50))
		c := newCache(t, st, ver, rulesync.CacheOptions{
			Snapshots: snaps, Poll: time.Millisecond, Refresh: time.Hour,
		})
		for _, back := range []int64{0, 30} { // empty, then an old snapshot
			publish(snaps, ver, back, one(back))
			before := snaps.loads.Load() + st.loads.Load()
			drive(c, 50*time.Millisecond)
			if got := limitOf(c.Snapshot(context.Background())); got != 50 {
				t.Errorf("version back to %d: limit %d, want the held 50", back, got)
			}
			if n := snaps.loads.Load() + st.loads.Load() - before; n != 0 {
				t.Errorf("version back to %d: %d loads, want none", back, n)
			}
		}
		publish(snaps, ver, 51, one(51))
		eventually(t, c, 2*time.Second, "the next publish", func(s *rules.Snapshot) bool { return limitOf(s) == 51 })
	})
}

// TestCacheStoreWins: a set from the store replaces the held one even when
// Redis announced a higher version (a snapshot of a database since restored
// to an earlier point), and that announcement is not loaded again.
func TestCacheStoreWins(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, st, _, _ := snapshotCache(t, 90, 90, rulesync.CacheOptions{Poll: time.Millisecond, Refresh: time.Hour})
		st.put(70, one(70), nil)
		if err := c.Refresh(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		drive(c, 50*time.Millisecond)
		if s := c.Stats(); limitOf(c.Snapshot(context.Background())) != 70 || s.Origin != rulesync.FromStore || s.Version != 70 {
			t.Errorf("after a full reload below the announced version: %+v, want the store's version 70 kept", s)
		}
	})
}

// TestCacheBurstOfWrites: a burst of writes, each announcing a new version,
// while requests keep arriving, makes at most one check and one reload per
// Poll, each one snapshot read; the last version is what it ends on.
func TestCacheBurstOfWrites(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const poll = 20 * time.Millisecond
		c, _, snaps, ver := snapshotCache(t, 1, 1, rulesync.CacheOptions{Poll: poll, Refresh: time.Hour})
		start := time.Now()
		for v := int64(2); v <= 200; v++ { // 199 writes in ~200ms
			publish(snaps, ver, v, one(v))
			c.Snapshot(context.Background())
			advance(time.Millisecond)
		}
		burst := time.Since(start)
		advance(poll)
		if got := limitOf(c.Snapshot(context.Background())); got != 200 {
			t.Fatalf("limit on the first request a Poll after the last write = %d, want 200", got)
		}
		s := c.Stats()
		reloads := s.Reloads - 1
		most := uint64((burst+poll)/poll) + 2
		t.Logf("%d writes in %v: %d version reads, %d reloads, %d snapshot reads, %d store reads", 199, burst.Round(time.Millisecond), s.VersionReads-1, reloads, s.SnapshotLoads-1, s.StoreLoads)
		if reloads < 2 || reloads > most || s.VersionReads-1 > most {
			t.Errorf("%d writes over %v at a %v poll: %d reloads, %d version reads; want 2..%d of each at most", 199, burst, poll, reloads, s.VersionReads-1, most)
		}
		if s.SnapshotLoads-1 != reloads || s.StoreLoads != 0 {
			t.Errorf("snapshot reads %d, store reads %d for %d reloads; want one snapshot read a reload, no store read", s.SnapshotLoads-1, s.StoreLoads, reloads)
		}
	})
}

// TestCacheNextRequestSeesChange: after a quiet spell, the first request
// decides on the rules published during it, and so does the first request
// a Poll after a second write made right after the first: no debounce.
func TestCacheNextRequestSeesChange(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const poll = 50 * time.Millisecond
		c, _, snaps, ver := snapshotCache(t, 1, 10, rulesync.CacheOptions{Poll: poll, Refresh: time.Hour})
		c.Snapshot(context.Background())
		advance(3 * poll) // quiet
		publish(snaps, ver, 2, one(0))
		if got := limitOf(c.Snapshot(context.Background())); got != 0 {
			t.Fatalf("first request after a quiet spell and a write: limit %d, want the written 0", got)
		}
		// A second write right after: the first request a Poll later has it.
		publish(snaps, ver, 3, one(5))
		advance(poll)
		if got := limitOf(c.Snapshot(context.Background())); got != 5 {
			t.Fatalf("first request a Poll after a second write: limit %d, want 5", got)
		}
		if s := c.Stats(); s.Reloads != 3 || s.StoreLoads != 0 {
			t.Errorf("Stats() = %+v, want 3 reloads from the snapshot", s)
		}
	})
}

// TestCacheSecondWriteNotDebounced: of two writes in a row, the second
// reaches a stream of requests within a Poll, as the first did (before, a
// reload waited 1s after the previous one).
func TestCacheSecondWriteNotDebounced(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const poll = 20 * time.Millisecond
		c, _, snaps, ver := snapshotCache(t, 1, 1, rulesync.CacheOptions{Poll: poll, Refresh: time.Hour})
		for v := int64(2); v <= 3; v++ {
			publish(snaps, ver, v, one(v))
			took := eventually(t, c, 2*time.Second, fmt.Sprint("write ", v-1), func(s *rules.Snapshot) bool { return limitOf(s) == v })
			if took > 10*poll {
				t.Errorf("write %d reached the requests after %v, want within about a Poll (%v)", v-1, took, poll)
			}
		}
	})
}

// slowVersion is a VersionSource whose reads wait for release (or their
// context) before answering.
type slowVersion struct {
	fakeVersion
	release chan struct{}
}

func (s *slowVersion) Version(ctx context.Context) (int64, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		s.reads.Add(1)
		return 0, ctx.Err()
	}
	return s.fakeVersion.Version(ctx)
}

// TestCacheConcurrentRequestsShareOneCheck: requests arriving together at
// a stale cache wait for one version read and one snapshot read, not one
// each, and every one of them decides on the new rules.
func TestCacheConcurrentRequestsShareOneCheck(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st, snaps := &fakeLoader{}, &fakeLoader{}
		ver := &slowVersion{release: make(chan struct{})}
		close(ver.release)
		publish(snaps, &ver.fakeVersion, 1, one(10))
		c := newCache(t, st, ver, rulesync.CacheOptions{Snapshots: snaps, Poll: 20 * time.Millisecond, Refresh: time.Hour})
		ver.release = make(chan struct{})
		publish(snaps, &ver.fakeVersion, 2, one(20))
		advance(30 * time.Millisecond) // stale
		before := c.Stats()

		const requests = 64
		var (
			wg     sync.WaitGroup
			ready  sync.WaitGroup
			limits = make([]int64, requests)
		)
		ready.Add(requests)
		for i := range requests {
			wg.Go(func() {
				ready.Done()
				limits[i] = limitOf(c.Snapshot(context.Background()))
			})
		}
		ready.Wait()
		synctest.Wait() // every request is waiting
		close(ver.release)
		wg.Wait()
		for i, l := range limits {
			if l != 20 {
				t.Errorf("request %d decided on limit %d, want the new 20", i, l)
			}
		}
		after := c.Stats()
		if n := after.VersionReads - before.VersionReads; n != 1 {
			t.Errorf("%d concurrent requests at a stale cache made %d version reads, want 1", requests, n)
		}
		if n := after.SnapshotLoads - before.SnapshotLoads; n != 1 {
			t.Errorf("%d concurrent requests at a stale cache made %d snapshot reads, want 1", requests, n)
		}
	})
}

// TestCacheVersionReadFails: when the version read fails or hangs, a
// request waits at most VersionTimeout (or its own context) and decides on
// the rules held; the next read is a Poll later, not one a request.
func TestCacheVersionReadFails(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const poll, timeout = 200 * time.Millisecond, 30 * time.Millisecond
		st := &fakeLoader{}
		st.put(1, one(10), nil)
		ver := &slowVersion{release: make(chan struct{})}
		close(ver.release)
		ver.v.Store(1)
		var errs atomic.Int64
		c, err := rulesync.NewCache(context.Background(), st, ver, rulesync.CacheOptions{Poll: poll, VersionTimeout: timeout, Refresh: time.Hour,
			OnError: func(error) { errs.Add(1) }})
		if err != nil {
			t.Fatal(err)
		}
		ver.release = make(chan struct{}) // Redis hangs from now on
		advance(poll)
		start := time.Now()
		if got := limitOf(c.Snapshot(context.Background())); got != 10 {
			t.Errorf("limit with the version read hanging = %d, want the held 10", got)
		}
		if took := time.Since(start); took < timeout || took > timeout+150*time.Millisecond {
			t.Errorf("request waited %v for a hanging version read, want about VersionTimeout (%v)", took, timeout)
		}
		reads := ver.reads.Load()
		for range 20 {
			c.Snapshot(context.Background())
		}
		if n := ver.reads.Load() - reads; n != 0 {
			t.Errorf("20 requests within a Poll of a failed read made %d more reads, want none", n)
		}
		if s := c.Stats(); s.LastError == nil || errs.Load() != 1 {
			t.Errorf("after a failed version read: LastError %v, OnError calls %d; want the error, once", s.LastError, errs.Load())
		}

		// A request's own deadline bounds its wait too.
		advance(poll)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		start = time.Now()
		c.Snapshot(ctx)
		if took := time.Since(start); took > timeout {
			t.Errorf("request with a 5ms deadline waited %v", took)
		}
		c.Wait()
	})
}

// gatedLoader is a Loader whose loads wait for release.
type gatedLoader struct {
	fakeLoader
	release chan struct{}
}

func (g *gatedLoader) LoadAll(ctx context.Context) (rules.Set, error) {
	<-g.release
	return g.fakeLoader.LoadAll(ctx)
}

// TestCacheStoreLoadInBackground: when the version moved and no snapshot
// is published, requests do not wait for the store: they go on with the
// rules held until its load lands.
func TestCacheStoreLoadInBackground(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &gatedLoader{release: make(chan struct{})}
		close(st.release)
		st.put(1, one(10), nil)
		ver := &fakeVersion{}
		ver.v.Store(1)
		c := newCache(t, st, ver, rulesync.CacheOptions{Poll: 5 * time.Millisecond, Refresh: time.Hour})
		st.release = make(chan struct{})
		publish(&st.fakeLoader, ver, 2, one(20))
		advance(10 * time.Millisecond)
		start := time.Now()
		if got := limitOf(c.Snapshot(context.Background())); got != 10 {
			t.Errorf("limit while the store loads = %d, want the held 10", got)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("request waited %v for a load from the store", took)
		}
		close(st.release)
		eventually(t, c, 2*time.Second, "the store's set", func(s *rules.Snapshot) bool { return limitOf(s) == 20 })
	})
}

// TestCacheRedisDownAtColdStart: when the version read fails, the first
// load goes straight to the store, without waiting on the snapshot too.
func TestCacheRedisDownAtColdStart(t *testing.T) {
	t.Parallel()
	st, snaps, ver := &fakeLoader{}, &fakeLoader{}, &fakeVersion{}
	st.put(3, one(3), nil)
	snaps.put(2, one(2), nil)
	ver.down.Store(true)
	c, err := rulesync.NewCache(context.Background(), st, ver, rulesync.CacheOptions{Snapshots: snaps})
	if err != nil {
		t.Fatalf("NewCache with Redis down, the store up: %v", err)
	}
	if s := c.Stats(); s.Origin != rulesync.FromStore || s.Version != 3 || snaps.loads.Load() != 0 {
		t.Errorf("Stats() = %+v after %d snapshot reads; want the store's version 3, no snapshot read", s, snaps.loads.Load())
	}
}
