package rules

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Loader loads every rule and plan with their version: the store
// (PostgreSQL) is one.
type Loader interface {
	LoadAll(ctx context.Context) (Set, error)
}

// VersionSource reads the rules version, a counter the admin path bumps
// after every write (internal/store/redisversion is one).
type VersionSource interface {
	Version(ctx context.Context) (int64, error)
}

// CacheOptions configure a Cache. The zero value is usable: each field's
// default is written on it.
type CacheOptions struct {
	// Default is the rule applied when no rule matches; nil allows.
	Default *Effective
	// Refresh is the interval of full reloads, whatever the version says;
	// default 5m.
	Refresh time.Duration
	// Poll is the least time between two version reads; default 1s.
	Poll time.Duration
	// VersionTimeout bounds one version read; default 100ms.
	VersionTimeout time.Duration
	// LoadTimeout bounds one load; default 5s.
	LoadTimeout time.Duration
	// RetryMin and RetryMax bound the wait before retrying a failed load;
	// it doubles on every failure from RetryMin (default 1s) up to RetryMax
	// (default 30s).
	RetryMin, RetryMax time.Duration
	// OnError, when set, is called with every failed version read or load,
	// from the goroutine that did it (the cache itself does not log).
	OnError func(error)
	// OnReload, when set, is called after every successful load with the
	// version loaded (-1 when it could not be read) and the new snapshot,
	// whose Skipped lists the rules left out: a skipped rule can loosen a
	// limit (requests fall to a broader rule), so callers should say so.
	OnReload func(version int64, snap *Snapshot)
}

// CacheStats describe a Cache's state.
type CacheStats struct {
	// Loaded is false while the cache serves only the default rule because
	// no load has succeeded yet.
	Loaded bool
	// Version is the rules version of the snapshot; -1 when unknown.
	Version int64
	// Age is the time since the snapshot was loaded (since the cache was
	// created when no load has succeeded).
	Age time.Duration
	// Rules is the number of rules in the snapshot.
	Rules int
	// Reloads and Failures count successful and failed loads since New
	// (the initial load included).
	Reloads, Failures uint64
	// LastError is the last failed load or version read, nil when the last
	// attempt of each succeeded.
	LastError error
}

// Cache holds the current Snapshot and keeps it fresh. The request path
// only reads an atomic pointer and a clock; every version read and reload
// happens in one background goroutine at a time, started by the request
// that finds a check due, while requests keep using the old snapshot.
//
// On AWS Lambda the process is frozen between invocations: a check started
// by an invocation normally completes within it (a version read is one
// Redis GET); one frozen half-way completes, or times out and is retried,
// when the next invocation thaws the process. Because checks are started
// by requests, a function that sees no traffic reads nothing.
type Cache struct {
	loader   Loader
	versions VersionSource
	opt      CacheOptions
	epoch    time.Time // nextCheck counts from here (monotonic clock)

	cur       atomic.Pointer[cacheState]
	nextCheck atomic.Int64 // nanoseconds since epoch
	busy      atomic.Bool  // a check goroutine is running

	// failures is the number of consecutive failed loads; only the check
	// goroutine (or New) touches it.
	failures int

	mu      sync.Mutex // guards the fields below
	reloads uint64
	failed  uint64
	lastErr error
}

// cacheState is one snapshot and where it came from; replaced as a whole.
type cacheState struct {
	snap     *Snapshot
	version  int64     // -1: unknown
	loadedAt time.Time // zero: never loaded (default rule only)
}

// NewCache returns a Cache after a first load bounded by ctx and
// o.LoadTimeout. When that load fails the Cache is still returned, serving
// only o.Default, together with the error; it retries in the background of
// later Snapshot calls, backing off from RetryMin to RetryMax.
func NewCache(ctx context.Context, loader Loader, versions VersionSource, o CacheOptions) (*Cache, error) {
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.VersionTimeout <= 0 {
		o.VersionTimeout = 100 * time.Millisecond
	}
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = 5 * time.Second
	}
	if o.RetryMin <= 0 {
		o.RetryMin = time.Second
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(30*time.Second, o.RetryMin)
	}
	c := &Cache{loader: loader, versions: versions, opt: o, epoch: time.Now()}
	c.cur.Store(&cacheState{snap: NewSnapshot(nil, nil, SnapshotOptions{Default: o.Default}), version: -1})
	c.busy.Store(true)
	err := c.check(ctx, true)
	c.busy.Store(false)
	return c, err
}

// Snapshot returns the current snapshot. When a check is due it starts one
// in the background and returns the current snapshot without waiting.
func (c *Cache) Snapshot() *Snapshot {
	if int64(time.Since(c.epoch)) >= c.nextCheck.Load() && c.busy.CompareAndSwap(false, true) {
		go func() {
			_ = c.check(context.Background(), false)
			c.busy.Store(false)
		}()
	}
	return c.cur.Load().snap
}

// Refresh checks the version now and reloads when it moved, when the
// snapshot is older than Refresh, or when no load has succeeded yet
// (force reloads in any case). It waits for a check already running and
// returns the error of its own load or version read. Tests and the local
// stack use it; the request path relies on Snapshot.
func (c *Cache) Refresh(ctx context.Context, force bool) error {
	for !c.busy.CompareAndSwap(false, true) {
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	defer c.busy.Store(false)
	return c.check(ctx, force)
}

// Wait waits for a background check to finish.
func (c *Cache) Wait() {
	for c.busy.Load() {
		time.Sleep(time.Millisecond)
	}
}

// Stats returns the cache's state.
func (c *Cache) Stats() CacheStats {
	st := c.cur.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := CacheStats{
		Loaded:    !st.loadedAt.IsZero(),
		Version:   st.version,
		Rules:     st.snap.Len(),
		Reloads:   c.reloads,
		Failures:  c.failed,
		LastError: c.lastErr,
	}
	if s.Loaded {
		s.Age = time.Since(st.loadedAt)
	} else {
		s.Age = time.Since(c.epoch)
	}
	return s
}

// Age returns the time since the current snapshot was loaded (since the
// cache was created when no load has succeeded).
func (c *Cache) Age() time.Duration {
	if st := c.cur.Load(); !st.loadedAt.IsZero() {
		return time.Since(st.loadedAt)
	}
	return time.Since(c.epoch)
}

// check reads the version and reloads when needed. The caller holds busy.
func (c *Cache) check(ctx context.Context, force bool) error {
	st := c.cur.Load()
	reload := force || st.loadedAt.IsZero() || time.Since(st.loadedAt) >= c.opt.Refresh

	vctx, cancel := context.WithTimeout(ctx, c.opt.VersionTimeout)
	v, verr := c.versions.Version(vctx)
	cancel()
	if verr != nil {
		// Unknown: keep the snapshot's version so the next good read that
		// differs reloads.
		v = st.version
		verr = fmt.Errorf("read rules version: %w", verr)
		c.report(verr)
	} else if v != st.version {
		reload = true
	}
	if !reload {
		c.setLastErr(verr)
		c.schedule(c.opt.Poll)
		return verr
	}

	lctx, cancel := context.WithTimeout(ctx, c.opt.LoadTimeout)
	set, err := c.loader.LoadAll(lctx)
	cancel()
	if err != nil {
		err = fmt.Errorf("load rules: %w", err)
		c.failures++
		wait := c.opt.RetryMin << min(c.failures-1, 16)
		if wait > c.opt.RetryMax || wait <= 0 {
			wait = c.opt.RetryMax
		}
		c.mu.Lock()
		c.failed++
		c.lastErr = errors.Join(verr, err)
		c.mu.Unlock()
		c.report(err)
		c.schedule(wait)
		return errors.Join(verr, err)
	}
	snap := NewSnapshot(set.Rules, set.Plans, SnapshotOptions{Default: c.opt.Default})
	c.cur.Store(&cacheState{snap: snap, version: v, loadedAt: time.Now()})
	c.failures = 0
	c.mu.Lock()
	c.reloads++
	c.lastErr = verr
	c.mu.Unlock()
	if c.opt.OnReload != nil {
		c.opt.OnReload(v, snap)
	}
	c.schedule(c.opt.Poll)
	return verr
}

func (c *Cache) schedule(after time.Duration) {
	c.nextCheck.Store(int64(time.Since(c.epoch) + after))
}

func (c *Cache) setLastErr(err error) {
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
}

func (c *Cache) report(err error) {
	if c.opt.OnError != nil {
		c.opt.OnError(err)
	}
}
