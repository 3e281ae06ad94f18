package rules

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Loader loads every rule and plan with their version. The store
// (PostgreSQL, the source of truth) is one; the snapshot the admin path
// publishes to Redis (internal/store/redissnapshot) is another, which
// returns an error wrapping ErrNotFound when none was published.
type Loader interface {
	LoadAll(ctx context.Context) (Set, error)
}

// VersionSource reads the version of the latest published set: the admin
// path moves it with every publish (internal/store/redissnapshot is one).
// 0 means none was published.
type VersionSource interface {
	Version(ctx context.Context) (int64, error)
}

// Origin says where the rules a Cache serves came from.
type Origin string

const (
	// FromNothing: no load has succeeded; only the default rule applies.
	FromNothing Origin = "none"
	// FromSnapshot: the published snapshot (Redis).
	FromSnapshot Origin = "snapshot"
	// FromStore: the store itself (PostgreSQL).
	FromStore Origin = "store"
)

// CacheOptions configure a Cache. The zero value is usable: each field's
// default is written on it.
type CacheOptions struct {
	// Snapshots, when set, is read instead of the store at the first load
	// and whenever the version announces a newer set, so that neither a
	// cold start nor an admin write makes every instance read the store.
	// Its set is used only when newer than the one held (and at least the
	// version announced); when it fails, has none, or is older, the cache
	// loads from the store. Nil: always the store.
	Snapshots Loader
	// Default is the rule applied when no rule matches; nil allows.
	Default *Effective
	// Refresh is the interval of full reloads from the store, whatever the
	// version says: the backstop for a publish that never happened. Each
	// instance picks its interval at random within ±10% so that instances
	// started together do not reload together. Default 5m.
	Refresh time.Duration
	// Poll is the least time between two version reads; default 1s.
	Poll time.Duration
	// Debounce is the least time between two reloads the version
	// triggers: a change seen sooner after a reload is loaded when
	// Debounce has passed, together with every change after it. The first
	// change after a quiet spell loads at once. Default 1s.
	Debounce time.Duration
	// VersionTimeout bounds one version read; default 100ms.
	VersionTimeout time.Duration
	// SnapshotTimeout bounds one read of Snapshots; default 1s.
	SnapshotTimeout time.Duration
	// LoadTimeout bounds one load from the store; default 5s.
	LoadTimeout time.Duration
	// RetryMin and RetryMax bound the wait before retrying a failed load;
	// it doubles on every failure from RetryMin (default 1s) up to RetryMax
	// (default 30s). Version reads go on every Poll meanwhile.
	RetryMin, RetryMax time.Duration
	// OnError, when set, is called with every failed version read or load,
	// and with every snapshot the cache could not use (unreadable, or
	// older than announced), from the goroutine that did it (the cache
	// itself does not log). A missing snapshot is not an error.
	OnError func(error)
	// OnReload, when set, is called after every successful load with the
	// set's version, where it came from, and the new snapshot, whose
	// Skipped lists the rules left out: a skipped rule can loosen a limit
	// (requests fall to a broader rule), so callers should say so.
	OnReload func(version int64, from Origin, snap *Snapshot)
}

// CacheStats describe a Cache's state.
type CacheStats struct {
	// Loaded is false while the cache serves only the default rule because
	// no load has succeeded yet.
	Loaded bool
	// Origin is where the snapshot's rules came from (FromNothing when not
	// Loaded).
	Origin Origin
	// Version is the version of the snapshot's set; -1 when not Loaded.
	Version int64
	// Age is the time since the snapshot was loaded (since the cache was
	// created when no load has succeeded).
	Age time.Duration
	// Rules is the number of rules in the snapshot.
	Rules int
	// Reloads and Failures count successful and failed loads since New
	// (the initial load included). A load that fell back from the
	// snapshot to the store counts once.
	Reloads, Failures uint64
	// SnapshotLoads and StoreLoads count the reads of Snapshots and of
	// the store, successful or not.
	SnapshotLoads, StoreLoads uint64
	// LastError is the last failed load or version read, nil when the last
	// attempt of each succeeded.
	LastError error
}

// Cache holds the current Snapshot and keeps it fresh. The request path
// only reads an atomic pointer and a clock; every version read and reload
// happens in one background goroutine at a time, started by the request
// that finds a check due, while requests keep using the old snapshot.
//
// A check reads the version (one small read). When it moved past the held
// set, the cache reloads: from Snapshots (one read, no store query), else
// from the store. Every Refresh it reloads from the store regardless. A
// version lower than the held set's (Redis restarted empty or failed over
// to a replica that lagged, a snapshot not yet republished after the store
// moved on) is ignored; a set from the store replaces whatever is held, as
// the store is the source of truth.
//
// On AWS Lambda the process is frozen between invocations: a check started
// by an invocation normally completes within it; one frozen half-way
// completes, or times out and is retried, when the next invocation thaws
// the process. Because checks are started by requests, a function that
// sees no traffic reads nothing.
type Cache struct {
	store    Loader
	versions VersionSource
	opt      CacheOptions
	epoch    time.Time // nextCheck counts from here (monotonic clock)

	cur       atomic.Pointer[cacheState]
	nextCheck atomic.Int64 // nanoseconds since epoch
	busy      atomic.Bool  // a check goroutine is running

	// Only the check goroutine (or New) touches these.
	seen       int64     // the last version read; -1 before the first
	target     int64     // a version announced newer than the held set; 0 none
	failures   int       // consecutive failed loads
	retryAt    time.Time // no load before this after a failure
	reloadedAt time.Time // the last successful load (Debounce)
	fullAt     time.Time // the last load from the store, or the first load (Refresh)
	refresh    time.Duration

	mu        sync.Mutex // guards the fields below
	reloads   uint64
	failed    uint64
	snapLoads uint64
	fullLoads uint64
	lastErr   error
}

// cacheState is one snapshot and where it came from; replaced as a whole.
type cacheState struct {
	snap     *Snapshot
	version  int64 // -1: nothing loaded
	origin   Origin
	loadedAt time.Time // zero: never loaded (default rule only)
}

// NewCache returns a Cache after a first load bounded by ctx: from
// o.Snapshots when it has a readable set, else from the store. When no load
// succeeds the Cache is still returned, serving only o.Default, together
// with the error; it retries in the background of later Snapshot calls,
// backing off from RetryMin to RetryMax. A failed version read or an
// unusable snapshot alone is not an error here (OnError hears of it).
func NewCache(ctx context.Context, store Loader, versions VersionSource, o CacheOptions) (*Cache, error) {
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Debounce <= 0 {
		o.Debounce = time.Second
	}
	if o.VersionTimeout <= 0 {
		o.VersionTimeout = 100 * time.Millisecond
	}
	if o.SnapshotTimeout <= 0 {
		o.SnapshotTimeout = time.Second
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
	c := &Cache{store: store, versions: versions, opt: o, epoch: time.Now(), seen: -1,
		refresh: time.Duration(float64(o.Refresh) * (0.9 + 0.2*rand.Float64()))}
	c.cur.Store(&cacheState{snap: NewSnapshot(nil, nil, SnapshotOptions{Default: o.Default}), version: -1, origin: FromNothing})
	c.busy.Store(true)
	err := c.check(ctx, false)
	c.busy.Store(false)
	if c.cur.Load().origin != FromNothing {
		err = nil
	}
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

// Refresh checks now, as a due check would, waiting for a check already
// running; force reloads from the store whatever the version says, and
// ignores the backoff and Debounce. It returns the error of its own
// version read or load. Tests and the local stack use it; the request path
// relies on Snapshot.
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
		Loaded:        !st.loadedAt.IsZero(),
		Origin:        st.origin,
		Version:       st.version,
		Rules:         st.snap.Len(),
		Reloads:       c.reloads,
		Failures:      c.failed,
		SnapshotLoads: c.snapLoads,
		StoreLoads:    c.fullLoads,
		LastError:     c.lastErr,
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
	loaded := st.origin != FromNothing
	now := time.Now()

	vctx, cancel := context.WithTimeout(ctx, c.opt.VersionTimeout)
	v, verr := c.versions.Version(vctx)
	cancel()
	if verr != nil {
		verr = fmt.Errorf("read rules version: %w", verr)
		c.report(verr)
	} else if v != c.seen {
		// Act on a version once, when it first shows: a version at or
		// below the held set's is ignored, and stays ignored, so a Redis
		// that went back does not make every poll reload.
		c.seen = v
		if v > st.version {
			c.target = v
		}
	}

	full := force || loaded && now.Sub(c.fullAt) >= c.refresh
	want := !loaded || c.target > st.version
	if !full && !want {
		c.setLastErr(verr)
		c.schedule(c.opt.Poll)
		return verr
	}
	if !force {
		if wait := c.retryAt.Sub(now); wait > 0 {
			c.setLastErr(verr)
			c.schedule(min(wait, c.opt.Poll))
			return verr
		}
		if wait := c.reloadedAt.Add(c.opt.Debounce).Sub(now); !full && loaded && wait > 0 {
			c.setLastErr(verr)
			c.schedule(wait)
			return verr
		}
	}

	var (
		set    Set
		origin = FromStore
	)
	// The snapshot, unless this is a full reload, none was published
	// (version 0), or Redis did not answer the version read (it would not
	// answer this either).
	if !full && c.opt.Snapshots != nil && verr == nil && v != 0 {
		sctx, cancel := context.WithTimeout(ctx, c.opt.SnapshotTimeout)
		s, err := c.opt.Snapshots.LoadAll(sctx)
		cancel()
		c.count(&c.snapLoads)
		switch {
		case errors.Is(err, ErrNotFound):
			// None published (a new deployment, Redis restarted empty, a
			// set too large to publish): the store it is.
		case err != nil:
			c.report(fmt.Errorf("load rules snapshot, loading from the store instead: %w", err))
		case s.Version < c.target:
			// Older than the version read, hence than the set held when
			// one is (the target is above it): never installed.
			c.report(fmt.Errorf("rules snapshot version %d is older than the announced %d (held: %d): ignored, loading from the store", s.Version, c.target, st.version))
		default:
			set, origin = s, FromSnapshot
		}
	}
	if origin == FromStore {
		lctx, cancel := context.WithTimeout(ctx, c.opt.LoadTimeout)
		s, err := c.store.LoadAll(lctx)
		cancel()
		c.count(&c.fullLoads)
		if err != nil {
			err = fmt.Errorf("load rules: %w", err)
			c.failures++
			wait := c.opt.RetryMin << min(c.failures-1, 16)
			if wait > c.opt.RetryMax || wait <= 0 {
				wait = c.opt.RetryMax
			}
			c.retryAt = now.Add(wait)
			c.mu.Lock()
			c.failed++
			c.lastErr = errors.Join(verr, err)
			c.mu.Unlock()
			c.report(err)
			c.schedule(min(wait, c.opt.Poll))
			return errors.Join(verr, err)
		}
		set = s
	}

	snap := NewSnapshot(set.Rules, set.Plans, SnapshotOptions{Default: c.opt.Default})
	done := time.Now()
	c.cur.Store(&cacheState{snap: snap, version: set.Version, origin: origin, loadedAt: done})
	// The store is the truth: a set from it ends any announcement, even
	// one of a higher version (a snapshot of another lineage, such as a
	// database restored to an earlier point).
	c.target = 0
	c.failures, c.retryAt, c.reloadedAt = 0, time.Time{}, done
	if origin == FromStore || !loaded {
		c.fullAt = done
	}
	c.mu.Lock()
	c.reloads++
	c.lastErr = verr
	c.mu.Unlock()
	if c.opt.OnReload != nil {
		c.opt.OnReload(set.Version, origin, snap)
	}
	c.schedule(c.opt.Poll)
	return verr
}

func (c *Cache) schedule(after time.Duration) {
	c.nextCheck.Store(int64(time.Since(c.epoch) + after))
}

func (c *Cache) count(n *uint64) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
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
