package limiter

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
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
// of OpenShare of the limit per window, counted in Redis apart from the
// pool, after which it denies. So over-admission is at most the allowance
// of each Region cut off, and nothing while every Region reaches the
// ledger.
//
// Conservation (docs/global.md), per ledger item: the ledger's used count
// = the tokens in every Region's pool + the tokens spent from pools +
// the tokens stranded. Every move keeps it by construction:
//   - a decision and a usage report charge the pool in the same script
//     call as the buckets; a refund puts back at most what this Region's
//     usage charged in the window (usage_pool.lua);
//   - a fill or a drain is fenced (pool_fill.lua): when its answer is
//     lost, a resolve tells applied from not, and cancels a copy still on
//     the way. A fill proven not applied goes back to the ledger; one
//     whose fate stays unknown, and a ledger write whose answer is lost,
//     are counted stranded (GlobalStats.Stranded), never given back;
//   - allowance tokens never enter a pool, so none is given to the
//     ledger;
//   - a read (Global) writes nothing, in Redis or in this process.

// Ledger holds global budgets: per window item, the tokens every Region
// has taken. internal/ledger implements it on DynamoDB.
type Ledger interface {
	// Take adds up to want tokens to key's count, never past limit, and
	// returns how many it took: 0 when the window's budget is spent.
	// expires is the window's end. region and held record what the Region
	// holds once the take lands: held plus what it took (Reset keeps it).
	// On an error the tokens are in doubt: taken or not.
	Take(ctx context.Context, key string, want, limit int64, expires time.Time, region string, held int64) (int64, error)
	// Give returns n unspent tokens to key; the Region holds held after
	// it. On an error the tokens are in doubt.
	Give(ctx context.Context, key string, n int64, region string, held int64) error
	// Used returns key's count: what every Region took, spent or not.
	Used(ctx context.Context, key string) (int64, error)
	// Reset starts key's window again: its count becomes what the Regions
	// held at their last writes, and it returns that count.
	Reset(ctx context.Context, key string) (int64, error)
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
	//go:embed pool_after.lua
	poolAfterLua string
	//go:embed pool_fill.lua
	poolFillLua string
	//go:embed usage_pool.lua
	usagePoolLua string
	//go:embed usage_pool_after.lua
	usagePoolAfterLua string

	// globalScript is chargeScript with the pools around it.
	globalScript   = redis.NewScript("local charging, every_end = true, false\n" + poolLua + bucketSrc + chargeLua + poolAfterLua)
	poolFillScript = redis.NewScript(poolFillLua)
	// usageGlobalScript is usageScript with the pools around it.
	usageGlobalScript = redis.NewScript("local charging, every_end = false, true\n" + usagePoolLua + bucketSrc + usageLua + usagePoolAfterLua)
)

// ErrLedger wraps a ledger failure a decision met (its failure mode
// decided it).
var ErrLedger = errors.New("limiter: ledger")

// globals is a Limiter's global state: the pools it knows.
type globals struct {
	ledger    Ledger
	regions   int64
	region    string // this Region's name in the ledger's held counts
	timeout   time.Duration
	horizon   time.Duration
	idle      time.Duration
	openShare float64

	// clock places decisions in ledger windows: time.Now, but for tests
	// that move between windows without waiting.
	clock func() time.Time

	mu        sync.Mutex
	pools     map[poolKey]*pool
	lastSweep time.Time // of the ledger, by this process's loop
	started   bool      // the loop runs (under mu)
	loop      sync.Once
	stop      chan struct{}
	done      chan struct{}

	// bg counts background refills running (tests wait for them).
	bg sync.WaitGroup
	// breaker stops asking a ledger that failed ledgerBreakerThreshold
	// times in a row, for ledgerBreakerCooldown: a cut ledger then costs
	// a decision nothing, where each would wait LedgerTimeout.
	breaker breaker

	takes, taken, gives, given, stranded, ledgerErrors, waits, credits atomic.Uint64
}

// pool is what this process knows of one Region pool: one global bucket
// of one subject in one window.
type pool struct {
	key, lock, meta, credit, charged string // Redis keys
	spentKey                         string // set while the ledger has nothing left
	fence                            string // the fences' key prefix
	item                             string // the ledger's key
	limit                            int64
	start, end                       time.Time
	open                             int64 // the fail-open allowance

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
	// max(d, 0) makes a negative duration 0, which cmp.Or defaults.
	g := &globals{
		ledger:    o.Ledger,
		regions:   int64(max(o.Regions, 1)),
		region:    cmp.Or(o.Region, "-"),
		timeout:   cmp.Or(max(o.LedgerTimeout, 0), DefaultLedgerTimeout),
		horizon:   cmp.Or(max(o.GlobalHorizon, 0), DefaultGlobalHorizon),
		idle:      cmp.Or(max(o.GlobalIdle, 0), DefaultGlobalIdle),
		openShare: o.OpenShare,
		pools:     map[poolKey]*pool{},
		clock:     time.Now,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	g.breaker.init(ledgerBreakerThreshold, ledgerBreakerCooldown, nil)
	if g.openShare <= 0 || g.openShare > 1 {
		g.openShare = 1 / float64(g.regions)
	}
	return g
}

// hasGlobal reports whether a bucket of bs is global.
func hasGlobal(bs []Bucket) bool {
	return slices.ContainsFunc(bs, func(b Bucket) bool { return b.Global != "" })
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
	end   int64 // and its end
	limit int64
}

// poolFor returns the pool of global bucket b of the subject sd at now,
// registered in this process: its sweep gives it back when idle, and
// Close when the process ends.
func (l *Limiter) poolFor(sd subjectDigest, b Bucket, now time.Time) *pool {
	g := l.global
	start, end := GlobalWindow(b, now)
	k := poolKey{id: b.ID, sd: sd, start: start.UnixNano(), end: end.UnixNano(), limit: b.Limit}
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.pools[k]; p != nil {
		return p
	}
	p := l.newPool(sd, b, start, end)
	g.pools[k] = p
	g.loop.Do(func() {
		g.started = true
		go g.run(l)
	})
	return p
}

// newPool describes the pool of global bucket b of the subject sd in the
// window [start, end), registering nothing.
//
// The ledger's item is named by the rule's global key, the subject's hash
// and the window's start and end: two Regions share a budget only when
// their copies of the rule agree on the window (period and anchor), and a
// window's item is never another's.
func (l *Limiter) newPool(sd subjectDigest, b Bucket, start, end time.Time) *pool {
	hash := string(appendSubjectHash(nil, sd))
	window := strconv.FormatInt(start.UnixMilli(), 10) + "-" + strconv.FormatInt(end.UnixMilli(), 10)
	// The pool is named by the window as the item is: tokens of one
	// window's item are never spent or given back as another's.
	key := l.prefix + "{" + hash + "}:" + b.ID + ":g" + window
	return &pool{
		key: key, lock: key + ":l", meta: key + ":m", credit: key + ":o", charged: key + ":u", spentKey: key + ":s",
		fence: key + ":f:",
		item:  b.Global + "#" + hash + "#" + window,
		limit: b.Limit, start: start, end: end,
		open: int64(math.Ceil(float64(b.Limit) * l.global.openShare)),
	}
}

// The ledger's breaker: open after this many failed takes in a row, for
// this long, then one take probes.
const (
	ledgerBreakerThreshold = 3
	ledgerBreakerCooldown  = time.Second
)

// ErrLedgerOpen is wrapped (with ErrLedger) by a decision's error while
// the ledger's breaker is open: the ledger was not asked.
var ErrLedgerOpen = errors.New("limiter: ledger breaker open")

// spentRecheck is how long a process takes a window's budget as spent
// before it asks the ledger again (tokens a drained Region gave back).
const spentRecheck = 5 * time.Second

// spent reports whether p's budget is taken as spent at now.
func (p *pool) spent(now time.Time) bool { return now.UnixNano() < p.spentUntil.Load() }

// windowShare is the share of a window a block covers at least: a block
// holds the Region's rate over max(GlobalHorizon, window/windowShare),
// and a pool stays that long unspent before it goes back.
//
// It is what serves the long tail: a subject with one request a minute
// under a monthly quota takes a block of about 216 (3.6 h of its rate),
// one ledger write per 216 decisions, where a 5 s horizon and a 10 s
// idle drain made every one of its decisions wait on a take. A Region
// holds at most window/windowShare of its rate, so what a window's end
// strands is at most 1/windowShare (0.5 %) of what each Region spent in
// it, and never more than limit/(2·Regions) (blockBounds).
const windowShare = 200

// horizonOf is how much of the Region's rate a block of p covers.
func (g *globals) horizonOf(p *pool) time.Duration {
	return max(g.horizon, p.end.Sub(p.start)/windowShare)
}

// blockBounds returns the least and the most a block of p may hold.
func (g *globals) blockBounds(p *pool, cost int64) (lo, hi int64) {
	lo = max(cost, (p.limit+999)/1000)
	hi = max(lo, p.limit/(2*g.regions))
	return lo, hi
}

// allowGlobal is Allow for a request with global buckets: the regional
// buckets and the Region's pools in one script call (pool.lua); a pool
// found empty is filled from the ledger while the request waits, and the
// call made again. A fail-open bucket whose ledger failed is decided again
// from the Region's allowance, which never enters the pool.
func (l *Limiter) allowGlobal(ctx context.Context, sub *subjects, req Request, ck denyKey, useCache bool) (Decision, error) {
	g := l.global
	now := g.clock()
	var ps []*pool
	var at []int // the bucket index of each pool
	for i, b := range req.Buckets {
		if b.Global == "" {
			continue
		}
		ps, at = append(ps, l.poolFor(sub.of(i), b, now)), append(at, i)
	}
	var allowAt [MaxBuckets]int64
	allow := allowAt[:len(ps)] // each pool's allowance, once its ledger failed
	var ledgerErr error        // a ledger failure the allowance answers
	// A request waits for the ledger at most this long, then denies
	// briefly: a pool another process fills, or refills others spend.
	deadline := time.Now().Add(g.timeout + 2*l.timeout)
	for {
		start := l.now()
		ok, probe := l.breaker.enter(start)
		if !ok {
			l.st.skipped.Add(1)
			return l.failure(req, ErrBreakerOpen)
		}
		r, short, levels, credited, err := l.runGlobal(ctx, sub, req, ps, at, allow)
		if err != nil {
			l.st.errors.Add(1)
			l.breaker.done(l.now(), false, probe)
			if inDoubt(err) {
				// The call may have charged the pools before its answer
				// was lost: those tokens are spent for nothing.
				g.stranded.Add(uint64(req.Cost) * uint64(len(ps)))
			}
			return l.failure(req, err)
		}
		l.breaker.done(0, true, probe)
		if short < 0 {
			for j, p := range ps {
				if !r.allowed {
					break // nothing was charged: the pools are as they were
				}
				if credited&(1<<j) != 0 {
					g.credits.Add(uint64(req.Cost))
				} else if levels[j] < l.lowWater(p, req.Cost) {
					l.refillAsync(p, req.Cost)
				}
			}
			d := l.decided(r, req, start, ck, useCache)
			if sub.member != "" {
				l.holding(ctx, &d, sub, req.Buckets)
			}
			d.FailOpen = credited != 0 && d.Allowed
			if d.FailOpen {
				l.st.failOpen.Add(1)
				return d, ledgerErr
			}
			return d, nil
		}
		p, i := ps[short], at[short]
		b := req.Buckets[i]
		if allow[short] > 0 {
			// Decided from the allowance, and it is spent: deny until the
			// ledger answers again.
			l.st.denied.Add(1)
			return Decision{Limit: b.Limit, Bucket: i, RetryAfter: time.Second}, ledgerErr
		}
		if p.spent(g.clock()) {
			// The ledger had nothing left when last asked, and the pool
			// holds too little: the Region's share is spent.
			return l.globalDeny(req, i, p, g.clock(), ck, useCache), nil
		}
		if time.Now().After(deadline) {
			l.st.denied.Add(1)
			return Decision{Limit: p.limit, Bucket: i, RetryAfter: 100 * time.Millisecond}, ledgerErr
		}
		g.waits.Add(1)
		_, locked, err := l.fill(ctx, p, req.Cost, req.Cost, false)
		switch {
		case err != nil && !errors.Is(err, ErrLedger):
			// Redis failed around the fill: its failure mode decides.
			l.st.errors.Add(1)
			return l.failure(req, err)
		case err != nil:
			err = fmt.Errorf("limiter: subject %s: %w", l.SubjectHash(req.Subject), err)
			if b.FailClosed {
				l.st.failClosed.Add(1)
				l.st.denied.Add(1)
				return Decision{Limit: b.Limit, Bucket: i, RetryAfter: time.Second}, err
			}
			// Decide again from the Region's allowance for the window.
			allow[short], ledgerErr = p.open, err
		case !locked:
			// Another process of the Region is filling the pool.
			select {
			case <-ctx.Done():
				l.st.denied.Add(1)
				return Decision{Limit: p.limit, Bucket: i, RetryAfter: 100 * time.Millisecond}, ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		}
		// Filled (or found spent, or on the allowance): decide again.
	}
}

// inDoubt reports whether a failed Redis or ledger call may have run:
// anything but a connection that was never made.
func inDoubt(err error) bool {
	var op *net.OpError
	return !(errors.As(err, &op) && op.Op == "dial")
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
// pool's level after the charge, credited the mask of the pools charged
// to their allowance instead (allow: each pool's, 0 for none).
//
// On Redis Cluster a request whose buckets count several subjects is one
// call per subject (dimensions.go), each carrying its buckets' pools
// (runGlobalSplit).
func (l *Limiter) runGlobal(ctx context.Context, sub *subjects, req Request, ps []*pool, at []int, allow []int64) (r reply, short int, levels []int64, credited uint64, err error) {
	if l.cluster && sub.many && !sub.sameSubject(len(req.Buckets)) {
		return l.runGlobalSplit(ctx, sub, req, ps, at, allow)
	}
	return l.globalCall(ctx, sub, req.Cost, req.Buckets, ps, allow)
}

// globalCall runs globalScript once over bs, all of one hash tag but for
// a single-node Redis, with the pools ps.
func (l *Limiter) globalCall(ctx context.Context, sub *subjects, cost int64, bs []Bucket, ps []*pool, allow []int64) (r reply, short int, levels []int64, credited uint64, err error) {
	c := getCall()
	defer putCall(c)
	c.build(l.prefix, sub, cost, bs)
	keys := c.keys
	args := c.args[:len(c.args):len(c.args)]
	for j, p := range ps {
		keys = append(keys, p.key, p.credit)
		args = append(args, allow[j], p.end.Add(time.Minute).UnixMilli())
	}
	args = append(args, len(ps))
	c.ctx.arm(ctx, l.timeout)
	l.st.redisCalls.Add(1)
	res, err := globalScript.Run(&c.ctx, l.rdb, keys, args...).Text()
	if err != nil {
		return reply{}, -1, nil, 0, err
	}
	if rest, ok := strings.CutPrefix(res, "p "); ok {
		j, _, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(j)
		if err != nil || n < 1 || n > len(ps) {
			return reply{}, -1, nil, 0, fmt.Errorf("limiter: bad pool reply %q", res)
		}
		return reply{}, n - 1, nil, 0, nil
	}
	rd := replyReader{s: res}
	r, err = parseReply(&rd, len(bs))
	if err != nil {
		return reply{}, -1, nil, 0, err
	}
	if r.allowed {
		levels = make([]int64, len(ps))
		for j := range levels {
			levels[j] = rd.next()
		}
		credited = uint64(rd.next())
		if rd.err != nil {
			return reply{}, -1, nil, 0, rd.err
		}
	}
	return r, -1, levels, credited, nil
}

// runGlobalSplit is runGlobal on Redis Cluster for buckets of several
// subjects. One pipelined read of every pool first reports an empty one
// (without an allowance) before anything is charged (the caller fills it
// and calls again); then each subject's buckets are one call with their
// pools, in order, as runSplit's. A pool another process emptied between
// the read and its call denies briefly; the calls before it stay charged,
// as on any Cluster request whose later subject denies.
func (l *Limiter) runGlobalSplit(ctx context.Context, sub *subjects, req Request, ps []*pool, at []int, allow []int64) (reply, int, []int64, uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	pipe := l.rdb.Pipeline()
	gets := make([]*redis.StringCmd, len(ps))
	for j, p := range ps {
		gets[j] = pipe.Get(rctx, p.key)
	}
	_, err := pipe.Exec(rctx)
	cancel()
	if err != nil && !errors.Is(err, redis.Nil) {
		return reply{}, -1, nil, 0, err
	}
	for j := range ps {
		if n, _ := gets[j].Int64(); n < req.Cost && allow[j] == 0 {
			return reply{}, j, nil, 0, nil
		}
	}
	var credited uint64
	levels := make([]int64, len(ps))
	r, err := splitBySubject(sub, req.Buckets, func(one *subjects, first int, idx []int, group []Bucket) (reply, bool, error) {
		var gps []*pool
		var gj []int // index in ps of each of gps
		var gallow []int64
		for _, i := range idx {
			if j := slices.Index(at, i); j >= 0 {
				gps, gj, gallow = append(gps, ps[j]), append(gj, j), append(gallow, allow[j])
			}
		}
		r, short, lv, cr, err := l.globalCall(ctx, one, req.Cost, group, gps, gallow)
		if err != nil {
			return reply{}, true, fmt.Errorf("subject %d of the request: %w", first, err)
		}
		if short >= 0 {
			return reply{index: at[gj[short]], retry: 100}, true, nil
		}
		for k, j := range gj {
			levels[j] = lv[k]
			if cr&(1<<k) != 0 {
				credited |= 1 << j
			}
		}
		return r, false, nil
	})
	if err != nil {
		return reply{}, -1, nil, 0, err
	}
	return r, -1, levels, credited, nil
}

// refillAsync starts one background refill of p, unless one runs.
func (l *Limiter) refillAsync(p *pool, cost int64) {
	g := l.global
	if p.spent(g.clock()) || !p.filling.CompareAndSwap(false, true) {
		return
	}
	g.bg.Add(1)
	go func() {
		defer g.bg.Done()
		defer p.filling.Store(false)
		// No request waits on this one: it may wait for a slow ledger
		// longer than LedgerTimeout, where a take that times out after
		// DynamoDB applied it would strand its block.
		ctx, cancel := context.WithTimeout(context.Background(), backgroundTake(g.timeout)+3*l.timeout)
		defer cancel()
		if _, _, err := l.fill(ctx, p, cost, l.lowWater(p, cost), true); err != nil {
			g.ledgerErrors.Add(1)
		}
	}()
}

// lockPool takes the Region's lock for p (one process moves its tokens at
// a time) and reads its meta, level and charged counter. locked is false
// when another process holds the lock; unlock releases it.
func (l *Limiter) lockPool(ctx context.Context, p *pool) (locked bool, meta string, level, charged int64, unlock func(), err error) {
	g := l.global
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	pipe := l.rdb.Pipeline()
	spent := pipe.PTTL(rctx, p.spentKey)
	lock := pipe.SetNX(rctx, p.lock, "1", backgroundTake(g.timeout)+time.Second)
	m := pipe.Get(rctx, p.meta)
	lv := pipe.Get(rctx, p.key)
	ch := pipe.Get(rctx, p.charged)
	_, err = pipe.Exec(rctx)
	cancel()
	if err != nil && !errors.Is(err, redis.Nil) {
		// The lock may be set: it expires by itself.
		return false, "", 0, 0, nil, err
	}
	if ttl := spent.Val(); ttl > 0 {
		// Another process of the Region found the ledger spent: so is
		// this one, without asking it again.
		p.spentUntil.Store(g.clock().Add(ttl).UnixNano())
	}
	if !lock.Val() {
		return false, "", 0, 0, nil, nil
	}
	level, _ = lv.Int64()
	charged, _ = ch.Int64()
	return true, m.Val(), level, charged, func() {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		l.rdb.Del(uctx, p.lock)
		ucancel()
	}, nil
}

// held is what a Region holds of a budget, for the ledger's record: its
// pool and what its usage charged and may refund, never below 0.
func held(level, charged int64) int64 { return max(level+charged, 0) }

// fill takes a block from the ledger into p and returns its size: 0 when
// the window's budget is spent. It first takes the Region's lock for p:
// locked is false, and nothing is done, when another process holds it
// (that one is filling the pool). It takes nothing when the pool holds
// need tokens once the lock is held. A background fill waits for the
// ledger up to backgroundTake, a request's up to LedgerTimeout.
func (l *Limiter) fill(ctx context.Context, p *pool, cost, need int64, background bool) (got int64, locked bool, err error) {
	g := l.global
	locked, meta, level, charged, unlock, err := l.lockPool(ctx, p)
	if err != nil {
		return 0, false, fmt.Errorf("fill pool: %w", err)
	}
	if !locked {
		return 0, false, nil
	}
	defer unlock()
	now := g.clock()
	if level >= need || p.spent(now) {
		return 0, true, nil // another process filled it since, or found it spent
	}
	lo, hi := g.blockBounds(p, cost)
	want := lo
	if last, amount, ok := parseMeta(meta); ok {
		if dt := now.Sub(last); dt > 0 {
			want = int64(math.Ceil(float64(amount) * float64(g.horizonOf(p)) / float64(dt)))
		} else {
			want = hi
		}
	}
	want = min(max(want, lo), hi)

	budget := g.timeout
	if background {
		budget = backgroundTake(g.timeout) // refillAsync: no request waits
	}
	base := held(level, charged)
	ok, probe := g.breaker.enter(l.now())
	if !ok {
		return 0, true, fmt.Errorf("%w: %w", ErrLedger, ErrLedgerOpen)
	}
	lctx, lcancel := context.WithTimeout(ctx, budget)
	got, err = g.ledger.Take(lctx, p.item, want, p.limit, p.end, g.region, base)
	lcancel()
	g.takes.Add(1)
	g.breaker.done(l.now(), err == nil, probe)
	if err != nil {
		if inDoubt(err) {
			// Taken or not, nobody can tell: if taken, they are in no pool.
			g.stranded.Add(uint64(want))
		}
		g.ledgerErrors.Add(1)
		return 0, true, fmt.Errorf("%w: take %d: %w", ErrLedger, want, err)
	}
	if got == 0 {
		until := now.Add(spentRecheck)
		if p.end.Before(until) {
			until = p.end
		}
		p.spentUntil.Store(until.UnixNano())
		// The Region's other processes learn it from Redis, not from the
		// ledger: one take a Region per spentRecheck, however many wait.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		l.rdb.Set(sctx, p.spentKey, "1", max(until.Sub(now), time.Millisecond))
		scancel()
		return 0, true, nil
	}
	g.taken.Add(uint64(got))
	p.mark.Store(max(cost, want/4))
	moved, err := l.movePool(ctx, p, "fill", got)
	switch {
	case err != nil:
		// Put in the pool or not, nobody can tell: stranded, never given
		// back (given back while in the pool, they would be twice).
		g.stranded.Add(uint64(got))
		return 0, true, fmt.Errorf("fill pool: %w", err)
	case moved == 0:
		// Proven not put (the move was cancelled): they go back.
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
		defer gcancel()
		if gerr := g.ledger.Give(gctx, p.item, got, g.region, base); gerr != nil {
			g.stranded.Add(uint64(got))
		}
		return 0, true, errors.New("fill pool: its write was lost, and cancelled")
	}
	mctx, mcancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer mcancel()
	l.rdb.Set(mctx, p.meta, strconv.FormatInt(now.UnixMilli(), 10)+" "+strconv.FormatInt(got, 10), p.end.Sub(now)+time.Minute)
	return got, true, nil
}

// backgroundTake is the budget of a background refill's take: 10 ×
// LedgerTimeout, at least 2 s.
func backgroundTake(t time.Duration) time.Duration { return max(10*t, 2*time.Second) }

// fenceTTL is how long a move's fence is kept: far longer than any copy
// of the move can take to reach Redis.
const fenceTTL = 10 * time.Minute

// movePool runs a fenced fill of n tokens, or a drain, of p
// (pool_fill.lua) and returns the tokens it moved. When the answer is
// lost it resolves the move: moved is then what the move did, 0 when it
// was cancelled (it did nothing, and a copy of it on its way will do
// nothing). err is set only when the resolve failed too: the move's fate
// is unknown.
func (l *Limiter) movePool(ctx context.Context, p *pool, op string, n int64) (moved int64, err error) {
	id := strconv.FormatUint(rand.Uint64(), 36)
	keys := []string{p.key, p.fence + id}
	args := []any{op}
	if op == "fill" {
		args = append(args, n, p.end.Add(time.Minute).UnixMilli())
	}
	args = append(args, fenceTTL.Milliseconds())
	run := func(args []any) (string, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		defer cancel()
		return poolFillScript.Run(rctx, l.rdb, keys, args...).Text()
	}
	res, err := run(args)
	for try := 0; err != nil && try < 3; try++ {
		res, err = run([]any{"resolve", fenceTTL.Milliseconds()})
	}
	if err != nil {
		return 0, err
	}
	state, num, _ := strings.Cut(res, " ")
	if state == "x" {
		return 0, nil
	}
	moved, perr := strconv.ParseInt(num, 10, 64)
	if state != "done" || perr != nil {
		return 0, fmt.Errorf("limiter: bad pool move reply %q", res)
	}
	return moved, nil
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
// ledger, under the Region's lock for p (skipped when another process
// holds it: that one is filling the pool, which is not idle). A pool in
// debt keeps its debt. Tokens the ledger may not have taken back are
// counted stranded.
func (l *Limiter) drain(ctx context.Context, p *pool) error {
	g := l.global
	locked, _, level, charged, unlock, err := l.lockPool(ctx, p)
	if err != nil {
		return fmt.Errorf("drain pool: %w", err)
	}
	if !locked {
		return nil
	}
	defer unlock()
	n, err := l.movePool(ctx, p, "drain", 0)
	if err != nil {
		// Drained or not, nobody can tell: what the pool held is counted
		// stranded (at most; decisions may have spent some since).
		g.stranded.Add(uint64(max(level, 0)))
		return fmt.Errorf("drain pool: %w", err)
	}
	if n == 0 {
		return nil
	}
	lctx, lcancel := context.WithTimeout(ctx, g.timeout)
	defer lcancel()
	g.gives.Add(1)
	if err := g.ledger.Give(lctx, p.item, n, g.region, held(0, charged)); err != nil {
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
		case <-t.C:
			now := g.clock()
			g.sweep(l, now)
			g.sweepLedger(l, now)
		}
	}
}

func (g *globals) sweep(l *Limiter, now time.Time) {
	g.mu.Lock()
	maps.DeleteFunc(g.pools, func(_ poolKey, p *pool) bool { return !now.Before(p.end) })
	owned := slices.Collect(maps.Values(g.pools)) // every pool this process used: any may give one back
	g.mu.Unlock()
	for _, p := range owned {
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		level, err := l.rdb.Get(ctx, p.key).Int64()
		cancel()
		if err != nil {
			continue
		}
		p.mu.Lock()
		idle := level == p.seen && now.Sub(p.seenAt) >= max(g.idle, g.horizonOf(p))
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
	owned := slices.Collect(maps.Values(g.pools)) // every pool this process used: any may give one back
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
	// Remaining is what this Region can still admit in the window: the
	// ledger's unleased remainder and its own pool, limit - Used + Pool
	// (never below 0). Every Region answers 429 when each one's is below
	// the cost.
	Remaining int64
	// WindowEnd is when the window's budget starts again.
	WindowEnd time.Time
}

// Global returns global bucket b of subject now: the ledger's count and
// this Region's pool. It writes nothing: no pool is registered in this
// process, none is touched in Redis. Without a ledger it returns
// ErrNoLedger.
func (l *Limiter) Global(ctx context.Context, subject string, b Bucket) (GlobalState, error) {
	if l.global == nil {
		return GlobalState{}, ErrNoLedger
	}
	start, end := GlobalWindow(b, l.global.clock())
	p := l.newPool(l.hash.digest(subject), b, start, end)
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
	return GlobalState{Used: used, Pool: level, Remaining: max(b.Limit-used+max(level, 0), 0), WindowEnd: p.end}, nil
}

// ResetGlobal starts global bucket b of subject again in every Region:
// the ledger's count for the window becomes what the Regions hold leased
// (their pools stay theirs to spend), so every Region's next block comes
// from a full budget. A Region that took the budget as spent asks the
// ledger again within spentRecheck (5 s). It returns the count kept.
// Without a ledger it returns ErrNoLedger.
func (l *Limiter) ResetGlobal(ctx context.Context, subject string, b Bucket) (int64, error) {
	if l.global == nil {
		return 0, ErrNoLedger
	}
	start, end := GlobalWindow(b, l.global.clock())
	p := l.newPool(l.hash.digest(subject), b, start, end)
	lctx, lcancel := context.WithTimeout(ctx, l.global.timeout)
	defer lcancel()
	kept, err := l.global.ledger.Reset(lctx, p.item)
	if err != nil {
		return 0, fmt.Errorf("%w: reset: %w", ErrLedger, err)
	}
	dctx, dcancel := context.WithTimeout(ctx, l.timeout)
	l.rdb.Del(dctx, p.spentKey)
	dcancel()
	l.global.mu.Lock()
	if q := l.global.pools[poolKey{id: b.ID, sd: l.hash.digest(subject), start: start.UnixNano(), end: end.UnixNano(), limit: b.Limit}]; q != nil {
		q.spentUntil.Store(0)
	}
	l.global.mu.Unlock()
	return kept, nil
}

// ErrNoLedger is returned by Global when the Limiter has no ledger.
var ErrNoLedger = errors.New("limiter: no ledger: global buckets are decided as regional ones")
