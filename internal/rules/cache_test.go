package rules_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
)

// fakeStore is a Loader whose rules and failure the test sets.
type fakeStore struct {
	mu    sync.Mutex
	rules []rules.Rule
	err   error
	loads atomic.Int64
}

func (s *fakeStore) LoadAll(ctx context.Context) (rules.Set, error) {
	s.loads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return rules.Set{}, s.err
	}
	return rules.Set{Rules: append([]rules.Rule(nil), s.rules...)}, nil
}

func (s *fakeStore) set(rs []rules.Rule, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules, s.err = rs, err
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

// limitOf returns the API-wide limit the snapshot applies, -1 for none.
func limitOf(s *rules.Snapshot) int64 {
	m := s.Match("api", "GET", "/", "someone")
	if m.API == nil {
		return -1
	}
	return m.API.Limit
}

// eventually polls c.Snapshot until cond holds, failing after d.
func eventually(t *testing.T, c *rules.Cache, d time.Duration, what string, cond func(*rules.Snapshot) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if cond(c.Snapshot()) {
			return time.Since(start)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("after %v: %s did not happen; stats %+v", d, what, c.Stats())
	return 0
}

func TestCacheReloadsWhenVersionMoves(t *testing.T) {
	t.Parallel()
	st := &fakeStore{rules: []rules.Rule{cacheRule("r1", 10)}}
	ver := &fakeVersion{}
	ver.v.Store(7)
	c, err := rules.NewCache(context.Background(), st, ver, rules.CacheOptions{Poll: 20 * time.Millisecond, Refresh: time.Hour})
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	if got := limitOf(c.Snapshot()); got != 10 {
		t.Fatalf("limit after init = %d, want 10", got)
	}
	if s := c.Stats(); !s.Loaded || s.Version != 7 || s.Rules != 1 || s.Reloads != 1 {
		t.Fatalf("Stats() after init = %+v, want loaded version 7, 1 rule, 1 reload", s)
	}

	// The version alone does not reload while it stays put.
	loads := st.loads.Load()
	time.Sleep(60 * time.Millisecond)
	for range 10 {
		c.Snapshot()
		time.Sleep(5 * time.Millisecond)
	}
	c.Wait()
	if got := st.loads.Load(); got != loads {
		t.Errorf("loads with an unchanged version = %d, want %d", got, loads)
	}
	if reads := ver.reads.Load(); reads < 1 || reads > 10 {
		t.Errorf("version reads in ~110ms at a 20ms poll = %d, want 1..10", reads)
	}

	st.set([]rules.Rule{cacheRule("r1", 20)}, nil)
	ver.v.Add(1)
	took := eventually(t, c, 2*time.Second, "reload after the version moved", func(s *rules.Snapshot) bool { return limitOf(s) == 20 })
	t.Logf("propagation through the cache: %v", took)
	if s := c.Stats(); s.Version != 8 {
		t.Errorf("Stats().Version = %d, want 8", s.Version)
	}
}

func TestCacheFullRefresh(t *testing.T) {
	t.Parallel()
	st := &fakeStore{rules: []rules.Rule{cacheRule("r1", 10)}}
	c, err := rules.NewCache(context.Background(), st, &fakeVersion{}, rules.CacheOptions{Poll: 10 * time.Millisecond, Refresh: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	st.set([]rules.Rule{cacheRule("r1", 30)}, nil) // no version bump
	eventually(t, c, 2*time.Second, "full refresh", func(s *rules.Snapshot) bool { return limitOf(s) == 30 })
	if age := c.Age(); age > time.Second {
		t.Errorf("Age() right after a refresh = %v, want small", age)
	}
}

func TestCacheFailedReloadKeepsSnapshot(t *testing.T) {
	t.Parallel()
	st := &fakeStore{rules: []rules.Rule{cacheRule("r1", 10)}}
	ver := &fakeVersion{}
	var errs atomic.Int64
	c, err := rules.NewCache(context.Background(), st, ver, rules.CacheOptions{
		Poll: 10 * time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond,
		OnError: func(error) { errs.Add(1) },
	})
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	st.set(nil, errors.New("database is down"))
	ver.v.Add(1)
	eventually(t, c, 2*time.Second, "a failed reload", func(*rules.Snapshot) bool { return c.Stats().Failures > 0 })
	if got := limitOf(c.Snapshot()); got != 10 {
		t.Fatalf("limit after a failed reload = %d, want the last snapshot's 10", got)
	}
	if s := c.Stats(); s.LastError == nil || !s.Loaded || errs.Load() == 0 {
		t.Errorf("Stats() after a failed reload = %+v (OnError calls %d), want loaded with LastError", s, errs.Load())
	}
	// The database comes back: the pending version change is picked up.
	st.set([]rules.Rule{cacheRule("r1", 40)}, nil)
	eventually(t, c, 2*time.Second, "reload after the database came back", func(s *rules.Snapshot) bool { return limitOf(s) == 40 })

	// Redis (the version) down too: the snapshot keeps serving.
	ver.down.Store(true)
	time.Sleep(30 * time.Millisecond)
	for range 5 {
		if got := limitOf(c.Snapshot()); got != 40 {
			t.Fatalf("limit with the version source down = %d, want 40", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCacheColdStartDatabaseDown(t *testing.T) {
	t.Parallel()
	st := &fakeStore{}
	st.set(nil, errors.New("dial tcp: connection refused"))
	def := &rules.Effective{Limit: 5, Period: time.Minute}
	c, err := rules.NewCache(context.Background(), st, &fakeVersion{}, rules.CacheOptions{
		Default: def, Poll: 5 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 80 * time.Millisecond,
	})
	if err == nil {
		t.Fatal("NewCache with the database down: no error")
	}
	if c == nil {
		t.Fatal("NewCache with the database down returned no cache")
	}
	m := c.Snapshot().Match("api", "GET", "/", "someone")
	if !m.Default || m.API == nil || m.API.Limit != 5 {
		t.Fatalf("Match on a cold cache = %+v, want the default rule", m)
	}
	if s := c.Stats(); s.Loaded {
		t.Errorf("Stats().Loaded = true before any load succeeded")
	}

	// Retries back off: 20, 40, 80, 80ms... so 300ms of calls make a handful
	// of loads, not one per call.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		c.Snapshot()
		time.Sleep(time.Millisecond)
	}
	c.Wait()
	if n := st.loads.Load(); n < 2 || n > 8 {
		t.Errorf("loads in 300ms of retries with backoff 20..80ms = %d, want 2..8", n)
	}

	st.set([]rules.Rule{cacheRule("r1", 10)}, nil)
	eventually(t, c, 2*time.Second, "load once the database is up", func(s *rules.Snapshot) bool { return limitOf(s) == 10 })
	if s := c.Stats(); !s.Loaded || s.LastError != nil {
		t.Errorf("Stats() after recovery = %+v, want loaded, no error", s)
	}
}

func TestCacheRefreshAndConcurrentReaders(t *testing.T) {
	t.Parallel()
	st := &fakeStore{rules: []rules.Rule{cacheRule("r1", 1)}}
	ver := &fakeVersion{}
	c, err := rules.NewCache(context.Background(), st, ver, rules.CacheOptions{Poll: time.Millisecond})
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
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
				if l := limitOf(c.Snapshot()); l < 1 {
					t.Errorf("limit = %d mid-reload, want a whole snapshot", l)
					return
				}
			}
		})
	}
	for i := int64(2); i < 20; i++ {
		st.set([]rules.Rule{cacheRule("r1", i)}, nil)
		if err := c.Refresh(context.Background(), true); err != nil {
			t.Errorf("Refresh: %v", err)
		}
		if got := limitOf(c.Snapshot()); got != i {
			t.Errorf("limit after Refresh = %d, want %d", got, i)
		}
	}
	close(stop)
	wg.Wait()
}
