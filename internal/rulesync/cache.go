package rulesync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
)

// Loader loads every rule and plan with their version. The store
// (PostgreSQL, the source of truth) is one; the snapshot the admin path
// publishes to Redis (Snapshots, in this package) is another, which
// returns an error wrapping rules.ErrNotFound when none was published.
type Loader interface {
	LoadAll(ctx context.Context) (rules.Set, error)
}

// VersionSource reads the version of the latest published set: the admin
// path moves it with every publish (Snapshots is one).
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
	Default *rules.Effective
	// Refresh is the interval of full reloads from the store, whatever the
	// version says: the backstop for a publish that never happened. Each
	// instance picks its interval at random within ±10% so that instances
	// started together do not reload together. Default 5m.
	Refresh time.Duration
	// Poll is how old the last version read may be when a request is
	// decided: a request that finds it older waits for a new one (and for
	// the snapshot it announces). It bounds the version reads too, to one
	// a Poll while requests arrive and none while none do. Default 1s.
	Poll time.Duration
	// VersionTimeout bounds one version read, which a request may wait
	// for: give it the Redis budget of a request. Default 100ms.
	VersionTimeout time.Duration
	// SnapshotTimeout bounds one read of Snapshots, which the requests
	// arriving when a new version shows wait for. Default 1s.
	SnapshotTimeout time.Duration
	// LoadTimeout bounds one load from the store; default 5s. No request
	// waits for one after NewCache: it runs in the background.
	LoadTimeout time.Duration
	// RetryMin and RetryMax bound the wait before retrying a failed load
	// from the store; it doubles on every failure from RetryMin (default
	// 1s) up to RetryMax (default 30s). Version reads go on every Poll
	// meanwhile.
	RetryMin, RetryMax time.Duration
	// OnError, when set, is called with every failed version read or load,
	// and with every snapshot the cache could not use (unreadable,
	// refused, or older than announced), from the goroutine that did it
	// (the cache itself does not log). A missing snapshot is not an error.
	// A refused version or snapshot (ErrRefused) is also counted
	// (CacheStats.Refused).
	OnError func(error)
	// OnReload, when set, is called after every successful load with the
	// set's version, where it came from, and the new snapshot, whose
	// Skipped lists the rules left out: a skipped rule can loosen a limit
	// (requests fall to a broader rule), so callers should say so.
	OnReload func(version int64, from Origin, snap *rules.Snapshot)
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
	// VersionReads counts the version reads, successful or not: one per
	// check, however many requests waited for it.
	VersionReads uint64
	// Refused counts the versions and snapshots refused (ErrRefused): not
	// signed by the rule writers, or from the future. Each was written by
	// a process holding Redis that is not a rule writer; the decider's
	// RulesRefused metric is its growth.
	Refused uint64
	// LastError is the last failed version read and the last failed load
	// (joined), each nil once an attempt of its kind succeeded since.
	LastError error
}

// Cache holds the current rules.Snapshot and keeps it fresh. A request decides
// on rules checked against the published version at most Poll ago: while
// the last version read is younger than Poll, Snapshot reads an atomic
// pointer and a clock; when it is older, the request waits for a version
// read (one small GET) and, when the version moved, for the snapshot it
// announces (one GET). Requests arriving meanwhile wait for the same
// reads: there is one check at a time, however many requests wait.
//
// When the version moved and no usable snapshot is published (none, too
// large, unreadable, or older than announced), the cache reloads from the
// store in the background, and requests go on with the rules held until
// it lands. Every Refresh it reloads from the store regardless, in the
// background too. A version lower than the held set's (Redis restarted
// empty or failed over to a replica that lagged, a snapshot not yet
// republished after the store moved on) is ignored; a set from the store
// replaces whatever is held, as the store is the source of truth.
//
// When the version read fails (Redis down or slow past VersionTimeout),
// the request goes on with the rules held; the next check is Poll later,
// so one request a Poll pays for a Redis that does not answer.
//
// Checks are started by requests: a function that sees no traffic reads
// nothing, and on AWS Lambda, where the process is frozen between
// invocations, the invocation that needs a check waits for it, so none is
// left half-way in a frozen process.
type Cache struct {
	store    Loader
	versions VersionSource
	opt      CacheOptions
	epoch    time.Time // freshUntil counts from here (monotonic clock)
	refresh  time.Duration

	cur        atomic.Pointer[cacheState]
	freshUntil atomic.Int64 // nanoseconds since epoch: no check needed before

	mu         sync.Mutex
	flight     *flight   // the check under way; nil when none
	loading    bool      // a load from the store is under way
	seen       int64     // the last version read; -1 before the first
	target     int64     // a version announced newer than the held set; 0 none
	failures   int       // consecutive failed loads from the store
	retryAt    time.Time // no load from the store before this after a failure
	fullAt     time.Time // the last load from the store, or the first load (Refresh)
	installs   uint64    // sets installed, to order a store load against them
	reloads    uint64
	failed     uint64
	snapLoads  uint64
	fullLoads  uint64
	verReads   uint64
	refused    uint64
	versionErr error // the last version read's error
	loadErr    error // the last load's error
}

// cacheState is one snapshot and where it came from; replaced as a whole.
type cacheState struct {
	snap     *rules.Snapshot
	version  int64 // -1: nothing loaded
	origin   Origin
	loadedAt time.Time // zero: never loaded (default rule only)
}

// flight is one check under way; done closes when it ends.
type flight struct {
	start time.Time
	done  chan struct{}
}

// NewCache returns a Cache after a first load bounded by ctx: from
// o.Snapshots when it has a readable set, else from the store. When no load
// succeeds the Cache is still returned, serving only o.Default, together
// with the error; it retries in the background of later Snapshot calls,
// backing off from RetryMin to RetryMax. A failed version read or an
// unusable snapshot alone is not an error here (OnError hears of it).
func NewCache(ctx context.Context, store Loader, versions VersionSource, o CacheOptions) (*Cache, error) {
	orDefault(&o.Refresh, 5*time.Minute)
	orDefault(&o.Poll, time.Second)
	orDefault(&o.VersionTimeout, 100*time.Millisecond)
	orDefault(&o.SnapshotTimeout, time.Second)
	orDefault(&o.LoadTimeout, 5*time.Second)
	orDefault(&o.RetryMin, time.Second)
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(30*time.Second, o.RetryMin)
	}
	c := &Cache{store: store, versions: versions, opt: o, epoch: time.Now(), seen: -1,
		refresh: time.Duration(float64(o.Refresh) * (0.9 + 0.2*rand.Float64()))}
	c.cur.Store(&cacheState{snap: rules.NewSnapshot(nil, nil, rules.SnapshotOptions{Default: o.Default}), version: -1, origin: FromNothing})
	err := c.check(ctx, nil, false)
	if c.cur.Load().origin != FromNothing {
		err = nil
	}
	return c, err
}

// Snapshot returns the rules to decide a request on. When the last version
// read is older than Poll it waits for a check (see Cache) before it
// returns, or until ctx ends, and then returns what is held.
func (c *Cache) Snapshot(ctx context.Context) *rules.Snapshot {
	if c.since() < c.freshUntil.Load() {
		return c.cur.Load().snap
	}
	f := c.join()
	select {
	case <-f.done:
	case <-ctx.Done():
	}
	return c.cur.Load().snap
}

// join returns the check under way, or starts one. A check that has run
// longer than any of its reads may (a process frozen half-way, on Lambda)
// is left to finish alone: a new one starts.
func (c *Cache) join() *flight {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.flight; f != nil && time.Since(f.start) < max(c.opt.Poll, c.opt.VersionTimeout+c.opt.SnapshotTimeout) {
		return f
	}
	f := &flight{start: time.Now(), done: make(chan struct{})}
	c.flight = f
	go func() {
		_ = c.check(context.Background(), f, false)
		c.mu.Lock()
		if c.flight == f {
			c.flight = nil
		}
		c.mu.Unlock()
		close(f.done)
	}()
	return f
}

// Refresh checks now, waiting for the checks and loads under way first;
// force reloads from the store whatever the version says, and ignores the
// backoff. It waits for its own loads and returns the error of its version
// read or load. Tests and the local stack use it; the request path relies
// on Snapshot.
func (c *Cache) Refresh(ctx context.Context, force bool) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.check(ctx, nil, force)
}

// Wait waits for the check and the load under way, if any, to finish.
func (c *Cache) Wait() { _ = c.wait(context.Background()) }

func (c *Cache) wait(ctx context.Context) error {
	for {
		c.mu.Lock()
		idle := c.flight == nil && !c.loading
		c.mu.Unlock()
		if idle {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// Stats returns the cache's state.
func (c *Cache) Stats() CacheStats {
	st := c.cur.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{
		Loaded:        !st.loadedAt.IsZero(),
		Origin:        st.origin,
		Version:       st.version,
		Rules:         st.snap.Len(),
		Reloads:       c.reloads,
		Failures:      c.failed,
		SnapshotLoads: c.snapLoads,
		StoreLoads:    c.fullLoads,
		VersionReads:  c.verReads,
		Refused:       c.refused,
		LastError:     errors.Join(c.versionErr, c.loadErr),
		Age:           c.age(st),
	}
}

// Age returns the time since the current snapshot was loaded (since the
// cache was created when no load has succeeded).
func (c *Cache) Age() time.Duration { return c.age(c.cur.Load()) }

func (c *Cache) age(st *cacheState) time.Duration {
	if !st.loadedAt.IsZero() {
		return time.Since(st.loadedAt)
	}
	return time.Since(c.epoch)
}

func (c *Cache) since() int64 { return int64(time.Since(c.epoch)) }

// check reads the version and loads what it announces: the snapshot here,
// the store here too when f is nil (NewCache) or force (Refresh), else in
// the background. f is the flight it runs as (nil for NewCache and
// Refresh); of the flights, only the current one moves freshUntil.
func (c *Cache) check(ctx context.Context, f *flight, force bool) error {
	start := time.Now()
	vctx, cancel := context.WithTimeout(ctx, c.opt.VersionTimeout)
	v, verr := c.versions.Version(vctx)
	cancel()
	if verr != nil {
		verr = fmt.Errorf("read rules version: %w", verr)
		c.report(verr)
	}

	c.mu.Lock()
	c.verReads++
	c.versionErr = verr
	st := c.cur.Load()
	if verr == nil && v != c.seen {
		// Act on a version once, when it first shows: a version at or
		// below the held set's is ignored, and stays ignored, so a Redis
		// that went back does not make every check reload.
		c.seen = v
		if v > st.version {
			c.target = v
		}
	}
	loaded := st.origin != FromNothing
	full := force || loaded && time.Since(c.fullAt) >= c.refresh
	want := !loaded || c.target > st.version
	target, installs := c.target, c.installs
	c.mu.Unlock()

	var err error
	// The snapshot, unless this is a full reload, none was published
	// (version 0), or Redis did not answer the version read (it would not
	// answer this either).
	if want && !full && c.opt.Snapshots != nil && verr == nil && v != 0 {
		if c.loadSnapshot(ctx, st, target, installs) {
			want = false
		}
	}
	if full || want {
		err = c.startStoreLoad(ctx, force, f == nil || force)
	}

	c.mu.Lock()
	if f == nil || c.flight == f {
		// Rules checked at start are fresh until start+Poll; after a
		// failed read, the next check is a Poll away all the same.
		from := start
		if verr != nil {
			from = time.Now()
		}
		c.freshUntil.Store(int64(from.Sub(c.epoch) + c.opt.Poll))
	}
	c.mu.Unlock()
	return errors.Join(verr, err)
}

// loadSnapshot reads Snapshots and installs its set when usable: at least
// the announced target. It reports whether it did.
func (c *Cache) loadSnapshot(ctx context.Context, held *cacheState, target int64, installs uint64) bool {
	sctx, cancel := context.WithTimeout(ctx, c.opt.SnapshotTimeout)
	s, err := c.opt.Snapshots.LoadAll(sctx)
	cancel()
	c.count(&c.snapLoads)
	switch {
	case errors.Is(err, rules.ErrNotFound):
		// None published (a new deployment, Redis restarted empty, a set
		// too large to publish): the store it is.
		return false
	case err != nil:
		c.report(fmt.Errorf("load rules snapshot, loading from the store instead: %w", err))
		return false
	case s.Version < target:
		// Older than the version read, hence than the set held when one
		// is (the target is above it): never installed.
		c.report(fmt.Errorf("rules snapshot version %d is older than the announced %d (held: %d): ignored, loading from the store", s.Version, target, held.version))
		return false
	}
	c.install(s, FromSnapshot, installs)
	return true
}

// startStoreLoad loads from the store, here when inline, else in the
// background, unless a load is under way or, without force, the backoff
// after a failure has not passed. Inline with force it waits for the load
// under way, then loads.
func (c *Cache) startStoreLoad(ctx context.Context, force, inline bool) error {
	c.mu.Lock()
	for force && c.loading {
		c.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
		c.mu.Lock()
	}
	if c.loading || !force && time.Now().Before(c.retryAt) {
		c.mu.Unlock()
		return nil
	}
	c.loading = true
	installs := c.installs
	c.mu.Unlock()
	if inline {
		return c.loadStore(ctx, installs)
	}
	go func() { _ = c.loadStore(context.WithoutCancel(ctx), installs) }()
	return nil
}

// loadStore loads every rule from the store and installs them; the caller
// set loading. installs is the count of sets installed when the caller
// decided to load.
func (c *Cache) loadStore(ctx context.Context, installs uint64) error {
	lctx, cancel := context.WithTimeout(ctx, c.opt.LoadTimeout)
	s, err := c.store.LoadAll(lctx)
	cancel()
	if err != nil {
		err = fmt.Errorf("load rules: %w", err)
		c.mu.Lock()
		c.fullLoads++
		c.failures++
		wait := c.opt.RetryMin << min(c.failures-1, 16)
		if wait > c.opt.RetryMax || wait <= 0 {
			wait = c.opt.RetryMax
		}
		c.retryAt = time.Now().Add(wait)
		c.failed++
		c.loadErr = err
		c.loading = false
		c.mu.Unlock()
		c.report(err)
		return err
	}
	c.count(&c.fullLoads)
	c.install(s, FromStore, installs)
	c.mu.Lock()
	c.loading = false
	c.mu.Unlock()
	return nil
}

// install makes set the current snapshot. installs is the count of sets
// installed when its load was decided: a set from the store replaces
// whatever is held (the store is the truth: a set from it ends any
// announcement, even one of a higher version, such as a snapshot of a
// database restored to an earlier point), except a newer set installed
// while it loaded; a snapshot replaces only an older set.
func (c *Cache) install(set rules.Set, origin Origin, installs uint64) {
	snap := rules.NewSnapshot(set.Rules, set.Plans, rules.SnapshotOptions{Default: c.opt.Default})
	c.mu.Lock()
	st := c.cur.Load()
	loaded := st.origin != FromNothing
	done := time.Now()
	if origin == FromStore {
		c.failures, c.retryAt, c.fullAt = 0, time.Time{}, done
	}
	c.reloads++
	c.loadErr = nil
	if loaded && set.Version < st.version && (origin == FromSnapshot || c.installs != installs) {
		// Stale: counted as a reload, not installed.
		c.mu.Unlock()
		return
	}
	c.cur.Store(&cacheState{snap: snap, version: set.Version, origin: origin, loadedAt: done})
	c.installs++
	if origin == FromStore || set.Version >= c.target {
		c.target = 0
	}
	if !loaded {
		c.fullAt = done
	}
	c.mu.Unlock()
	if c.opt.OnReload != nil {
		c.opt.OnReload(set.Version, origin, snap)
	}
}

// orDefault sets an option left zero or negative to its default.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

func (c *Cache) count(n *uint64) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
}

func (c *Cache) report(err error) {
	if errors.Is(err, ErrRefused) {
		c.count(&c.refused)
	}
	if c.opt.OnError != nil {
		c.opt.OnError(err)
	}
}
