package limiter

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Global budgets (docs/global.md).
//
// A global bucket (Bucket.Global) has one budget per window shared by
// every Region of a deployment family, kept in a ledger every Region
// reaches (Options.Ledger: DynamoDB with multi-Region strong consistency
// in production). A Region never asks the ledger per request: it takes a
// block of tokens from the ledger's item for the window, one conditional
// write that never passes the limit, into its pool, a Redis key beside
// the subject's buckets, and decides from the pool inside the same script
// call as every other bucket (pool.lua). A token is in exactly one place
// at a time, the ledger's unleased remainder, one Region's pool, or spent,
// so the Regions together admit at most the limit per window whatever the
// timing: that is what makes it exact.
//
// A quota's ledger window is its calendar window; a rate's, a fixed
// window of its period since the Unix epoch, within which the regional
// token bucket still smooths. Both are computed from this process's clock
// (the regional buckets keep Redis's): near a window's edge a request may
// be counted in the neighbouring window's item, never in none or two.
//
// A pool is refilled before it runs dry: a decision that leaves it under
// its low-water mark (a quarter of the last block this process took, else
// the least block) starts one refill in the background, behind a lock in
// Redis so the Region's processes do not all lease at once, and only if
// the pool is still under the mark once the lock is held. Only a request
// that finds the pool empty waits for the ledger (at most LedgerTimeout).
// A block is sized to about GlobalHorizon of the Region's recent rate, at
// least a thousandth of the limit and at most limit/(2·Regions): a steady
// Region leases rarely, and no Region can hold more than half its share.
// A pool nobody spent from for GlobalIdle goes back to the ledger, given
// back by any of the Region's processes that used it, as is every pool a
// process used when it closes (a Lambda: when its environment shuts
// down). A Region whose every process is frozen (a Lambda Region whose
// traffic left) holds its pools until one closes or the window ends.
//
// Cut off from the ledger, a Region spends what its pool holds; then a
// fail-closed bucket denies, and a fail-open one admits from an allowance
// of OpenShare of the limit per window, counted in Redis, after which it
// denies. So over-admission is at most the allowance of each Region cut
// off, and nothing while every Region reaches the ledger.

// Ledger holds global budgets: per window item, the tokens every Region
// has taken. internal/ledger implements it on DynamoDB.
type Ledger interface {
	// Take adds up to want tokens to key's count, never past limit, and
	// returns how many it took: 0 when the window's budget is spent.
	// expires is the window's end.
	Take(ctx context.Context, key string, want, limit int64, expires time.Time) (int64, error)
	// Give returns n unspent tokens to key.
	Give(ctx context.Context, key string, n int64) error
	// Used returns key's count: what every Region took, spent or not.
	Used(ctx context.Context, key string) (int64, error)
}

// Defaults of the global options.
const (
	DefaultLedgerTimeout = 200 * time.Millisecond
	DefaultGlobalHorizon = 5 * time.Second
	DefaultGlobalIdle    = 10 * time.Second
)

var (
	//go:embed pool.lua
	poolLua string
	//go:embed pool_fill.lua
	poolFillLua string

	// globalScript is chargeScript with pool.lua around it.
	globalScript   = redis.NewScript(globalSrc())
	poolFillScript = redis.NewScript(poolFillLua)
)

func globalSrc() string {
	before, after, ok := strings.Cut(poolLua, "-- #after\n")
	if !ok {
		panic("limiter: pool.lua without its \"-- #after\" line")
	}
	return "local charging, every_end = true, false\n" + before + bucketSrc + chargeLua + after
}

// ErrLedger wraps a ledger failure a decision met (its failure mode
// decided it).
var ErrLedger = errors.New("limiter: ledger")

// globals is a Limiter's global state: the pools it knows.
type globals struct {
	ledger    Ledger
	regions   int64
	timeout   time.Duration
	horizon   time.Duration
	idle      time.Duration
	openShare float64

	mu        sync.Mutex
	pools     map[poolKey]*pool
	lastSweep time.Time // of the ledger, by this process's loop
	started   bool      // the loop runs (under mu)
	loop      sync.Once
	stop      chan struct{}
	done      chan struct{}

	takes, taken, gives, given, stranded, ledgerErrors, waits, credits atomic.Uint64
}

// pool is what this process knows of one Region pool: one global bucket
// of one subject in one window.
type pool struct {
	key, lock, meta, credit string // Redis keys
	item                    string // the ledger's key
	limit                   int64
	start, end              time.Time
	open                    int64 // the fail-open allowance

	filling atomic.Bool
	// mark is the low-water mark: a quarter of the last block this
	// process took; 0 until it takes one.
	mark atomic.Int64
	// spentUntil, Unix ns: until then the window's budget is taken as
	// spent (the ledger had nothing left), and the ledger is not asked.
	// Tokens another Region gives back reach this one after it.
	spentUntil atomic.Int64
	mu         sync.Mutex
	seen       int64 // the level last seen by the idle check
	seenAt     time.Time
}

func newGlobals(o Options) *globals {
	if o.Ledger == nil {
		return nil
	}
	g := &globals{
		ledger:    o.Ledger,
		regions:   int64(max(o.Regions, 1)),
		timeout:   o.LedgerTimeout,
		horizon:   o.GlobalHorizon,
		idle:      o.GlobalIdle,
		openShare: o.OpenShare,
		pools:     map[poolKey]*pool{},
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if g.timeout <= 0 {
		g.timeout = DefaultLedgerTimeout
	}
	if g.horizon <= 0 {
		g.horizon = DefaultGlobalHorizon
	}
	if g.idle <= 0 {
		g.idle = DefaultGlobalIdle
	}
	if g.openShare <= 0 || g.openShare > 1 {
		g.openShare = 1 / float64(g.regions)
	}
	return g
}

// hasGlobal reports whether a bucket of bs is global.
func hasGlobal(bs []Bucket) bool {
	for _, b := range bs {
		if b.Global != "" {
			return true
		}
	}
	return false
}

// GlobalWindow returns the ledger window of b at now: a quota's calendar
// window (Window, Anchor), a rate's fixed window of its Period counted
// from the Unix epoch.
func GlobalWindow(b Bucket, now time.Time) (start, end time.Time) {
	now = now.UTC()
	if b.Window == NoWindow {
		p := int64(b.Period)
		s := now.UnixNano() / p * p
		return time.Unix(0, s).UTC(), time.Unix(0, s+p).UTC()
	}
	a := b.Anchor.UTC().Truncate(time.Millisecond)
	if b.Anchor.IsZero() {
		a = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	switch b.Window {
	case Daily, Weekly:
		d := 24 * time.Hour
		if b.Window == Weekly {
			d *= 7
		}
		k := now.Sub(a) / d
		if now.Before(a.Add(k * d)) {
			k--
		}
		s := a.Add(k * d)
		return s, s.Add(d)
	}
	step := 1
	if b.Window == Yearly {
		step = 12
	}
	k := ((now.Year()-a.Year())*12 + int(now.Month()-a.Month())) / step
	s := addMonths(a, k*step)
	for s.After(now) {
		k--
		s = addMonths(a, k*step)
	}
	return s, addMonths(a, (k+1)*step)
}

// addMonths adds k calendar months to a, a day past the month's end
// clamped to it (Jan 31 + 1 month is Feb 28 or 29), as bucket.lua does.
func addMonths(a time.Time, k int) time.Time {
	m := int(a.Month()) - 1 + k
	y := a.Year() + m/12
	if m %= 12; m < 0 {
		m += 12
		y--
	}
	d := min(a.Day(), time.Date(y, time.Month(m+2), 0, 0, 0, 0, 0, time.UTC).Day())
	return time.Date(y, time.Month(m+1), d, a.Hour(), a.Minute(), a.Second(), a.Nanosecond(), time.UTC)
}

// poolKey names a pool in this process: no string is built to find one.
type poolKey struct {
	id    string
	sd    subjectDigest
	start int64 // the window's start, Unix ns
	limit int64
}

// poolFor returns the pool of global bucket b of the subject sd at now.
func (l *Limiter) poolFor(sd subjectDigest, b Bucket, now time.Time) *pool {
	g := l.global
	start, end := GlobalWindow(b, now)
	k := poolKey{id: b.ID, sd: sd, start: start.UnixNano(), limit: b.Limit}
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.pools[k]; p != nil {
		return p
	}
	hash := string(appendSubjectHash(nil, sd))
	ms := strconv.FormatInt(start.UnixMilli(), 10)
	key := l.prefix + "{" + hash + "}:" + b.ID + ":g" + ms
	p := &pool{
		key: key, lock: key + ":l", meta: key + ":m", credit: key + ":o",
		item:  b.Global + "#" + hash + "#" + ms,
		limit: b.Limit, start: start, end: end,
		open: int64(math.Ceil(float64(b.Limit) * g.openShare)),
	}
	g.pools[k] = p
	g.loop.Do(func() {
		g.started = true
		go g.run(l)
	})
	return p
}

// spentRecheck is how long a process takes a window's budget as spent
// before it asks the ledger again (tokens a drained Region gave back).
const spentRecheck = 5 * time.Second

// spent reports whether p's budget is taken as spent at now.
func (p *pool) spent(now time.Time) bool { return now.UnixNano() < p.spentUntil.Load() }

// blockBounds returns the least and the most a block of p may hold.
func (g *globals) blockBounds(p *pool, cost int64) (lo, hi int64) {
	lo = max(cost, (p.limit+999)/1000)
	hi = max(lo, p.limit/(2*g.regions))
	return lo, hi
}

// allowGlobal is Allow for a request with global buckets: the regional
// buckets and the Region's pools in one script call (pool.lua); a pool
// found empty is filled from the ledger while the request waits, and the
// call made again.
func (l *Limiter) allowGlobal(ctx context.Context, sub *subjects, req Request, ck denyKey, useCache bool) (Decision, error) {
	g := l.global
	now := time.Now()
	var ps []*pool
	var at []int // the bucket index of each pool
	for i, b := range req.Buckets {
		if b.Global == "" {
			continue
		}
		ps, at = append(ps, l.poolFor(sub.of(i), b, now)), append(at, i)
	}
	var ledgerErr error // a ledger failure the fail-open allowance answered
	// A request waits for the ledger at most this long, then denies
	// briefly: a pool another process fills, or refills others spend.
	deadline := now.Add(g.timeout + 2*l.timeout)
	for {
		start := l.now()
		ok, probe := l.breaker.enter(start)
		if !ok {
			l.st.skipped.Add(1)
			return l.failure(req, ErrBreakerOpen)
		}
		r, short, levels, err := l.runGlobal(ctx, sub, req, ps, at)
		if err != nil {
			l.st.errors.Add(1)
			l.breaker.done(l.now(), false, probe)
			return l.failure(req, err)
		}
		l.breaker.done(0, true, probe)
		if short < 0 {
			for j, p := range ps {
				if !r.allowed {
					break // nothing was charged: the pools are as they were
				}
				if levels[j] < l.lowWater(p, req.Cost) {
					l.refillAsync(p, req.Cost)
				}
			}
			d := l.decided(r, req, start, ck, useCache)
			d.FailOpen = ledgerErr != nil && d.Allowed
			return d, ledgerErr
		}
		p, i := ps[short], at[short]
		if p.spent(time.Now()) {
			// The ledger had nothing left when last asked, and the pool
			// holds too little: the Region's share is spent.
			return l.globalDeny(req, i, p, time.Now(), ck, useCache), nil
		}
		if time.Now().After(deadline) {
			l.st.denied.Add(1)
			return Decision{Limit: p.limit, Bucket: i, RetryAfter: 100 * time.Millisecond}, ledgerErr
		}
		g.waits.Add(1)
		_, locked, err := l.fill(ctx, p, req.Cost, req.Cost, false)
		switch {
		case err != nil:
			b := req.Buckets[i]
			err = fmt.Errorf("limiter: subject %s: %w", l.SubjectHash(req.Subject), err)
			if b.FailClosed {
				l.st.failClosed.Add(1)
				l.st.denied.Add(1)
				return Decision{Limit: b.Limit, Bucket: i, RetryAfter: time.Second}, err
			}
			n, cerr := l.credit(ctx, p, req.Cost)
			if cerr != nil || n == 0 {
				// The allowance is spent (or Redis failed): deny until the
				// ledger answers again.
				l.st.denied.Add(1)
				return Decision{Limit: b.Limit, Bucket: i, RetryAfter: time.Second}, errors.Join(err, cerr)
			}
			l.st.failOpen.Add(1)
			ledgerErr = err
		case !locked:
			// Another process of the Region is filling the pool.
			select {
			case <-ctx.Done():
				l.st.denied.Add(1)
				return Decision{Limit: p.limit, Bucket: i, RetryAfter: 100 * time.Millisecond}, ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		}
		// Filled (or found spent, or credited): decide again.
	}
}

// globalDeny denies a request whose global bucket i has spent its window's
// budget in every Region: until the window ends.
func (l *Limiter) globalDeny(req Request, i int, p *pool, now time.Time, ck denyKey, useCache bool) Decision {
	l.st.denied.Add(1)
	wait := max(p.end.Sub(now), time.Millisecond)
	d := Decision{Limit: req.Buckets[i].Limit, Bucket: i, Reset: wait, RetryAfter: wait}
	if useCache {
		start := l.now()
		l.cache.add(ck, d, start, l.cacheUntil(start, wait))
	}
	return d
}

// runGlobal runs globalScript. short is the index in ps of a pool that
// lacked the tokens (then nothing was charged), else -1; levels holds each
// pool's level after the charge.
//
// On Redis Cluster a request whose buckets count several subjects is one
// call per subject (dimensions.go), each carrying its buckets' pools
// (runGlobalSplit).
func (l *Limiter) runGlobal(ctx context.Context, sub *subjects, req Request, ps []*pool, at []int) (r reply, short int, levels []int64, err error) {
	if l.cluster && sub.many && !sub.sameSubject(len(req.Buckets)) {
		return l.runGlobalSplit(ctx, sub, req, ps, at)
	}
	return l.globalCall(ctx, sub, req.Cost, req.Buckets, ps)
}

// globalCall runs globalScript once over bs, all of one hash tag but for
// a single-node Redis, with the pools ps.
func (l *Limiter) globalCall(ctx context.Context, sub *subjects, cost int64, bs []Bucket, ps []*pool) (r reply, short int, levels []int64, err error) {
	c := getCall()
	defer putCall(c)
	c.build(l.prefix, sub, cost, bs)
	keys := c.keys
	for _, p := range ps {
		keys = append(keys, p.key)
	}
	args := append(c.args[:len(c.args):len(c.args)], len(ps))
	c.ctx.arm(ctx, l.timeout)
	l.st.redisCalls.Add(1)
	res, err := globalScript.Run(&c.ctx, l.rdb, keys, args...).Text()
	if err != nil {
		return reply{}, -1, nil, err
	}
	if rest, ok := strings.CutPrefix(res, "p "); ok {
		j, _, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(j)
		if err != nil || n < 1 || n > len(ps) {
			return reply{}, -1, nil, fmt.Errorf("limiter: bad pool reply %q", res)
		}
		return reply{}, n - 1, nil, nil
	}
	rd := replyReader{s: res}
	r, err = parseReply(&rd, len(bs))
	if err != nil {
		return reply{}, -1, nil, err
	}
	if r.allowed {
		levels = make([]int64, len(ps))
		for j := range levels {
			levels[j] = rd.next()
		}
		if rd.err != nil {
			return reply{}, -1, nil, rd.err
		}
	}
	return r, -1, levels, nil
}

// runGlobalSplit is runGlobal on Redis Cluster for buckets of several
// subjects. One pipelined read of every pool first reports an empty one
// before anything is charged (the caller fills it and calls again); then
// each subject's buckets are one call with their pools, in order, as
// runSplit's. A pool another process emptied between the read and its
// call denies briefly; the calls before it stay charged, as on any
// Cluster request whose later subject denies.
func (l *Limiter) runGlobalSplit(ctx context.Context, sub *subjects, req Request, ps []*pool, at []int) (reply, int, []int64, error) {
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	pipe := l.rdb.Pipeline()
	gets := make([]*redis.StringCmd, len(ps))
	for j, p := range ps {
		gets[j] = pipe.Get(rctx, p.key)
	}
	_, err := pipe.Exec(rctx)
	cancel()
	if err != nil && !errors.Is(err, redis.Nil) {
		return reply{}, -1, nil, err
	}
	for j := range ps {
		if n, _ := gets[j].Int64(); n < req.Cost {
			return reply{}, j, nil, nil
		}
	}
	var (
		out    reply
		found  bool
		mask   uint16
		done   [MaxBuckets]bool
		levels = make([]int64, len(ps))
	)
	for first := range req.Buckets {
		if done[first] {
			continue
		}
		one := subjects{id: sub.of(first)}
		var idx []int
		var group []Bucket
		var gps []*pool
		var gj []int // index in ps of each of gps
		for i := first; i < len(req.Buckets); i++ {
			if !done[i] && sub.of(i) == one.id {
				done[i] = true
				idx, group = append(idx, i), append(group, req.Buckets[i])
				if j := slices.Index(at, i); j >= 0 {
					gps, gj = append(gps, ps[j]), append(gj, j)
				}
			}
		}
		r, short, lv, err := l.globalCall(ctx, &one, req.Cost, group, gps)
		if err != nil {
			return reply{}, -1, nil, fmt.Errorf("subject %d of the request: %w", first, err)
		}
		if short >= 0 {
			return reply{index: at[gj[short]], retry: 100}, -1, nil, nil
		}
		for k := range group {
			if r.mask&(1<<k) != 0 {
				mask |= 1 << idx[k]
			}
		}
		r.index = idx[r.index]
		if !r.allowed {
			r.mask = mask
			return r, -1, nil, nil
		}
		for k, j := range gj {
			levels[j] = lv[k]
		}
		if !found || preferLimiting(req.Buckets, r, out) {
			out, found = r, true
		}
	}
	out.mask = mask
	return out, -1, levels, nil
}

// refillAsync starts one background refill of p, unless one runs.
func (l *Limiter) refillAsync(p *pool, cost int64) {
	if p.spent(time.Now()) || !p.filling.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.filling.Store(false)
		// No request waits on this one: it may wait for a slow ledger
		// longer than LedgerTimeout, where a take that times out after
		// DynamoDB applied it would strand its block.
		ctx, cancel := context.WithTimeout(context.Background(), backgroundTake(l.global.timeout)+3*l.timeout)
		defer cancel()
		if _, _, err := l.fill(ctx, p, cost, l.lowWater(p, cost), true); err != nil {
			l.global.ledgerErrors.Add(1)
		}
	}()
}

// fill takes a block from the ledger into p and returns its size: 0 when
// the window's budget is spent. It first takes the Region's lock for p:
// locked is false, and nothing is done, when another process holds it
// (that one is filling the pool). It takes nothing when the pool holds
// need tokens once the lock is held. A background fill waits for the
// ledger up to backgroundTake, a request's up to LedgerTimeout.
func (l *Limiter) fill(ctx context.Context, p *pool, cost, need int64, background bool) (got int64, locked bool, err error) {
	g := l.global
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	pipe := l.rdb.Pipeline()
	lock := pipe.SetNX(rctx, p.lock, "1", backgroundTake(g.timeout)+time.Second)
	meta := pipe.Get(rctx, p.meta)
	level := pipe.Get(rctx, p.key)
	_, err = pipe.Exec(rctx)
	cancel()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, fmt.Errorf("fill pool: %w", err)
	}
	if !lock.Val() {
		return 0, false, nil
	}
	defer func() {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		l.rdb.Del(uctx, p.lock)
		ucancel()
	}()
	if n, _ := level.Int64(); n >= need {
		return 0, true, nil // another process filled it since
	}
	now := time.Now()
	lo, hi := g.blockBounds(p, cost)
	want := lo
	if last, amount, ok := parseMeta(meta.Val()); ok {
		if dt := now.Sub(last); dt > 0 {
			want = int64(math.Ceil(float64(amount) * float64(g.horizon) / float64(dt)))
		} else {
			want = hi
		}
	}
	want = min(max(want, lo), hi)

	budget := g.timeout
	if background {
		budget = backgroundTake(g.timeout) // refillAsync: no request waits
	}
	lctx, lcancel := context.WithTimeout(ctx, budget)
	got, err = g.ledger.Take(lctx, p.item, want, p.limit, p.end)
	lcancel()
	g.takes.Add(1)
	if err != nil {
		g.ledgerErrors.Add(1)
		return 0, true, fmt.Errorf("%w: take %d: %w", ErrLedger, want, err)
	}
	if got == 0 {
		p.spentUntil.Store(min(p.end.UnixNano(), now.Add(spentRecheck).UnixNano()))
		return 0, true, nil
	}
	g.taken.Add(uint64(got))
	p.mark.Store(max(cost, want/4))
	if err := l.putPool(ctx, p, got); err != nil {
		// The tokens left the ledger and never reached the pool: give them
		// back, or they are stranded until the window ends.
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
		defer gcancel()
		if gerr := g.ledger.Give(gctx, p.item, got); gerr != nil {
			g.stranded.Add(uint64(got))
		}
		return 0, true, fmt.Errorf("fill pool: %w", err)
	}
	mctx, mcancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer mcancel()
	l.rdb.Set(mctx, p.meta, strconv.FormatInt(now.UnixMilli(), 10)+" "+strconv.FormatInt(got, 10), time.Until(p.end)+time.Minute)
	return got, true, nil
}

// backgroundTake is the budget of a background refill's take: 10 ×
// LedgerTimeout, at least 2 s.
func backgroundTake(t time.Duration) time.Duration { return max(10*t, 2*time.Second) }

// putPool adds n tokens to p's pool.
func (l *Limiter) putPool(ctx context.Context, p *pool, n int64) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	exp := p.end.Add(time.Minute).UnixMilli()
	return poolFillScript.Run(ctx, l.rdb, []string{p.key}, n, exp).Err()
}

// lowWater is the level under which a decision starts a refill of p:
// its mark, else the least block.
func (l *Limiter) lowWater(p *pool, cost int64) int64 {
	if m := p.mark.Load(); m > 0 {
		return m
	}
	lo, _ := l.global.blockBounds(p, cost)
	return lo
}

// credit admits from the Region's fail-open allowance for p's window: it
// puts up to a block of it into the pool (at least cost) and returns how
// many; 0 when the allowance is spent.
func (l *Limiter) credit(ctx context.Context, p *pool, cost int64) (int64, error) {
	g := l.global
	lo, _ := g.blockBounds(p, cost)
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	exp := p.end.Add(time.Minute).UnixMilli()
	n, err := creditScript.Run(ctx, l.rdb, []string{p.credit, p.key}, lo, p.open, exp).Int64()
	if err != nil {
		return 0, fmt.Errorf("credit pool: %w", err)
	}
	if n < cost {
		return 0, nil
	}
	g.credits.Add(uint64(n))
	return n, nil
}

// creditScript moves up to ARGV[1] tokens of the allowance ARGV[2] into
// the pool (KEYS[2]), counting them in KEYS[1]; ARGV[3] is the keys'
// expiry (Unix ms). Reply: tokens moved.
var creditScript = redis.NewScript(`
local used = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local n = math.min(tonumber(ARGV[1]), tonumber(ARGV[2]) - used)
if n <= 0 then
	return 0
end
redis.call('INCRBY', KEYS[1], n)
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
redis.call('INCRBY', KEYS[2], n)
redis.call('PEXPIREAT', KEYS[2], ARGV[3])
return n
`)

func parseMeta(s string) (time.Time, int64, bool) {
	a, b, ok := strings.Cut(s, " ")
	if !ok {
		return time.Time{}, 0, false
	}
	ms, err1 := strconv.ParseInt(a, 10, 64)
	n, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || n <= 0 {
		return time.Time{}, 0, false
	}
	return time.UnixMilli(ms), n, true
}

// drain takes every token out of p's pool and gives it back to the
// ledger; what the ledger does not take back is counted stranded.
func (l *Limiter) drain(ctx context.Context, p *pool) error {
	g := l.global
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	n, err := poolFillScript.Run(rctx, l.rdb, []string{p.key}, "drain").Int64()
	cancel()
	if err != nil {
		return fmt.Errorf("drain pool: %w", err)
	}
	if n == 0 {
		return nil
	}
	lctx, lcancel := context.WithTimeout(ctx, g.timeout)
	defer lcancel()
	g.gives.Add(1)
	if err := g.ledger.Give(lctx, p.item, n); err != nil {
		g.stranded.Add(uint64(n))
		return fmt.Errorf("%w: give %d: %w", ErrLedger, n, err)
	}
	g.given.Add(uint64(n))
	return nil
}

// run is the background loop: every half GlobalIdle it gives back the
// pools this process used that nobody spent from since, and forgets pools
// whose window ended.
func (g *globals) run(l *Limiter) {
	defer close(g.done)
	t := time.NewTicker(g.idle / 2)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case now := <-t.C:
			g.sweep(l, now)
			g.sweepLedger(l, now)
		}
	}
}

func (g *globals) sweep(l *Limiter, now time.Time) {
	g.mu.Lock()
	var owned []*pool // every pool this process used: any may give one back
	for k, p := range g.pools {
		if !now.Before(p.end) {
			delete(g.pools, k)
			continue
		}
		owned = append(owned, p)
	}
	g.mu.Unlock()
	for _, p := range owned {
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		level, err := l.rdb.Get(ctx, p.key).Int64()
		cancel()
		if err != nil {
			continue
		}
		p.mu.Lock()
		idle := level == p.seen && now.Sub(p.seenAt) >= g.idle
		if level != p.seen {
			p.seen, p.seenAt = level, now
		}
		p.mu.Unlock()
		if idle && level > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), l.timeout+g.timeout)
			_ = l.drain(ctx, p)
			cancel()
		}
	}
}

// ledgerSweeper is a ledger that deletes the items of ended windows
// (internal/ledger: MRSC tables have no TTL).
type ledgerSweeper interface {
	Sweep(ctx context.Context, now time.Time) (int, error)
}

// ledgerSweepEvery is how often a Region sweeps the ledger: one process a
// Region an hour, behind a lock in its Redis.
const ledgerSweepEvery = time.Hour

// sweepLedger deletes ended windows' items from the ledger, when this
// process wins the Region's hourly lock.
func (g *globals) sweepLedger(l *Limiter, now time.Time) {
	sw, ok := g.ledger.(ledgerSweeper)
	if !ok || now.Sub(g.lastSweep) < ledgerSweepEvery {
		return
	}
	g.lastSweep = now
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	won, err := l.rdb.SetNX(ctx, l.prefix+"ledger-sweep", "1", ledgerSweepEvery).Result()
	cancel()
	if err != nil || !won {
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sw.Sweep(ctx, now); err != nil {
		g.ledgerErrors.Add(1)
	}
}

// closeGlobal stops the loop and gives back every pool this process
// used.
func (l *Limiter) closeGlobal(ctx context.Context) error {
	g := l.global
	if g == nil {
		return nil
	}
	g.mu.Lock()
	g.loop.Do(func() {}) // no loop starts after this
	ran := g.started
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	var owned []*pool // every pool this process used: any may give one back
	for _, p := range g.pools {
		owned = append(owned, p)
	}
	g.mu.Unlock()
	if ran {
		<-g.done
	}
	// In parallel (at most 16 at a time): a Lambda has a few hundred
	// milliseconds after SIGTERM, and each give is a cross-Region write.
	errs := make([]error, len(owned))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, p := range owned {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = l.drain(ctx, p)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// GlobalStats are the counters of global buckets; all 0 without a ledger.
type GlobalStats struct {
	Takes        uint64 // ledger takes (blocks asked for)
	Taken        uint64 // tokens the ledger gave
	Gives        uint64 // ledger gives (pools returned)
	Given        uint64 // tokens given back
	Stranded     uint64 // tokens taken that neither reached a pool nor went back
	LedgerErrors uint64 // ledger calls that failed
	Waits        uint64 // requests that found their pool empty and waited
	Credits      uint64 // tokens admitted from the fail-open allowance
}

// GlobalStats returns the global counters.
func (l *Limiter) GlobalStats() GlobalStats {
	g := l.global
	if g == nil {
		return GlobalStats{}
	}
	return GlobalStats{
		Takes: g.takes.Load(), Taken: g.taken.Load(), Gives: g.gives.Load(), Given: g.given.Load(),
		Stranded: g.stranded.Load(), LedgerErrors: g.ledgerErrors.Load(), Waits: g.waits.Load(), Credits: g.credits.Load(),
	}
}

// GlobalState is one global bucket of a subject as the subject view shows
// it.
type GlobalState struct {
	// Used is what every Region took from the window's budget, spent or
	// not (the ledger's count).
	Used int64
	// Pool is what this Region holds leased and unspent.
	Pool int64
	// WindowEnd is when the window's budget starts again.
	WindowEnd time.Time
}

// Global returns global bucket b of subject now: the ledger's count and
// this Region's pool. Without a ledger it returns ErrNoLedger.
func (l *Limiter) Global(ctx context.Context, subject string, b Bucket) (GlobalState, error) {
	if l.global == nil {
		return GlobalState{}, ErrNoLedger
	}
	p := l.poolFor(l.hash.digest(subject), b, time.Now())
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	level, err := l.rdb.Get(rctx, p.key).Int64()
	cancel()
	if err != nil && !errors.Is(err, redis.Nil) {
		return GlobalState{}, fmt.Errorf("limiter: global state: %w", err)
	}
	lctx, lcancel := context.WithTimeout(ctx, l.global.timeout)
	used, err := l.global.ledger.Used(lctx, p.item)
	lcancel()
	if err != nil {
		return GlobalState{}, fmt.Errorf("%w: used: %w", ErrLedger, err)
	}
	return GlobalState{Used: used, Pool: level, WindowEnd: p.end}, nil
}

// ErrNoLedger is returned by Global when the Limiter has no ledger.
var ErrNoLedger = errors.New("limiter: no ledger: global buckets are decided as regional ones")
