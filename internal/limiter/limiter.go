// Package limiter is Sluice's token bucket and calendar quota over Redis.
//
// One call checks and charges all of a subject's buckets at once, inside one
// Lua script that takes its clock from Redis TIME: either every bucket has
// the tokens and all are charged, or none is charged. A quota bucket
// (Bucket.Window) counts against a calendar window the script computes
// from that clock. Charge reports usage known after a response (into debt,
// or a refund), idempotently. A bucket whose limit, burst or period changed
// keeps the tokens its subject used (clamped to the new burst): the script
// re-expresses them under the new numbers on its first call after the
// change, allowed or denied. The keys are <prefix>{<subject hash>}:<bucket
// id> (a quota's followed by ":q<window letter><anchor, ms since 2024>",
// its window's shape, so that a change of it counts in a fresh key); the
// hash tag keeps a subject's buckets in one cluster slot, so the script
// also runs on Redis Cluster. A quota's key holds the window's count and
// expires when the window ends, so a charge costs it one INCRBY. Redis 6.2
// or later (7.0 reads a window's end exactly; 6.2 to the millisecond).
//
// Each operation is its own script (script.go): bucket.lua, the token
// bucket and calendar code they share, followed by charge.lua (Allow),
// peek.lua (Peek), usage.lua (Charge) or lease.lua (a lease's charge).
//
// Around the script the Limiter keeps the request path fast and up: a local
// cache denies a repeat offender until its retry-after without asking Redis,
// a per-call timeout bounds every Redis call, and a circuit breaker stops
// calling Redis after consecutive failures. When Redis cannot answer, each
// bucket's failure mode decides (allow and flag it, or deny). With
// Options.LeaseMax set, a subject this Limiter sees often is served from
// token leases (lease.go): tokens charged in Redis ahead, in one call, and
// admitted locally.
package limiter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/rules"
)

// MaxBuckets is the most buckets one Request may charge: the rate, quota
// and concurrency rules of a request's two scopes (6) for each of up to 4
// dimensions (the default and identity's MaxDimensions named ones).
const MaxBuckets = 24

// MaxHorizon bounds a bucket's refill horizon, Burst·Period/Limit: the time
// its empty bucket takes to fill up again. Ten years (of 365 days) keeps
// every time the scripts compute, in microseconds, far below 2^53 (about
// 285 years), where its float arithmetic stops being exact, and every key
// TTL well inside what SET PX accepts. rules.MaxHorizon is the same bound,
// enforced on every rule and plan.
const MaxHorizon = 10 * 365 * 24 * time.Hour

// maxMillis bounds every millisecond count of a reply (bucket.lua's MAX_MS,
// 100 years): a Duration holds it, and so does a monotonic time plus it.
const maxMillis = 100 * 365 * 24 * 3600 * 1000

// Bucket is one token bucket of a subject: it holds up to Burst tokens and
// refills Limit tokens every Period, continuously.
type Bucket struct {
	// ID names the bucket (the rule id); the Redis key is
	// <prefix>{<subject hash>}:<ID>. It must not be empty.
	ID string
	// Limit is the number of tokens refilled per Period. 0 blocks the
	// subject: the bucket denies without a Redis call.
	Limit int64
	// Until is when a blocked bucket's block ends (its rule's expiry): a
	// request it denies gets RetryAfter the time until then. Zero (no
	// end) gives Period. Ignored when Limit is not 0.
	Until time.Time
	// Period is the refill period; it must be > 0. Microsecond resolution.
	Period time.Duration
	// Burst is the capacity; <= 0 means Limit. The refill horizon,
	// Burst·Period/Limit, must be at most MaxHorizon.
	Burst int64
	// FailClosed makes a Redis failure deny the request; by default
	// (false) a Redis failure allows it and flags Decision.FailOpen.
	FailClosed bool
	// Shadow buckets never deny: they are charged when they have the
	// tokens, and a would-be deny is reported in Decision.ShadowDenied.
	Shadow bool
	// Window, when not NoWindow, makes the bucket a calendar quota: it
	// holds Limit tokens per window (Burst is ignored), is full again when
	// the window ends, and a denied request's RetryAfter is the time until
	// then. The window is computed in Redis, from Redis TIME. Period must
	// still be > 0: it is the RetryAfter when no wait helps.
	Window Window
	// Anchor is where a quota's windows repeat from (see Window's values),
	// to the millisecond (finer is truncated); zero means UTC calendar
	// alignment. It must lie between 1970 and 2100.
	Anchor time.Time
	// MinRemaining is the admission floor: Allow passes only when the
	// bucket holds at least Cost + MinRemaining tokens. >= 0; the caller
	// keeps Cost + MinRemaining at most the capacity (Burst, or Limit for
	// a quota), or no request passes.
	MinRemaining int64
	// Durable buckets (quotas that bill) are acknowledged only once a
	// replica has the charge (WAIT 1 after the script; durable.go): an
	// admission no replica acknowledged within the timeout is a Redis
	// failure, decided by FailClosed. Requests with one are never leased.
	Durable bool
	// Global, when not empty, makes the bucket's budget global: shared by
	// every Region through Options.Ledger, under this identity (the rule's
	// rules.GlobalKey, the same in every Region), its window's item named
	// by it, the subject's hash and the window (global.go). The bucket
	// itself still counts the Region's own use. Without a ledger it is a
	// regional bucket: one Region's budget is then the whole budget.
	Global string
	// Subject, when not empty, is the subject this bucket counts instead of
	// Request.Subject: another dimension of the request, such as the
	// caller's IP beside its API key (see dimensions.go for what is atomic
	// on Redis Cluster). Peek and Reset ignore it.
	Subject string
	// Concurrency makes the bucket a limit on requests in flight: at most
	// Limit hold a slot at once (concurrency.go). An allowed request takes
	// one slot, whatever its Cost, and holds it until Release or Period,
	// the slot's TTL, passes. Burst, Window and MinRemaining do not apply.
	Concurrency bool
}

// BucketFor returns the bucket that enforces an applied rule: its id,
// numbers, failure mode and mode, and for a quota its window and anchor.
// A bucket's ID names its Redis key, so everything that charges, reads or
// resets a subject's buckets (the authorizer, the admin API) builds them
// here and the keys cannot drift apart.
func BucketFor(e *rules.Effective) Bucket {
	b := Bucket{
		ID:           e.ID,
		Limit:        e.Limit,
		Period:       e.Period,
		Burst:        e.Burst,
		FailClosed:   e.FailureMode == rules.FailClosed,
		Shadow:       e.Mode == rules.Shadow,
		MinRemaining: e.MinRemaining,
		Durable:      e.Durable,
		Global:       e.GlobalKey,
	}
	if e.Blocked() {
		b.Until = e.Expires
	}
	switch e.Kind {
	case rules.Quota:
		b.Window = windowOf(rules.Period(e.Period))
		b.Anchor = e.Anchor
	case rules.Concurrency:
		b.Concurrency = true
	}
	return b
}

// windowOf returns the window of a quota's period: Daily, Weekly, Monthly
// or Yearly; NoWindow for anything else.
func windowOf(p rules.Period) Window {
	switch p {
	case rules.Period(rules.Day):
		return Daily
	case rules.Period(rules.Week):
		return Weekly
	case rules.Month:
		return Monthly
	case rules.Period(rules.Year):
		return Yearly
	}
	return NoWindow
}

// Window is a quota's calendar window. Every window is in UTC and repeats
// from Bucket.Anchor (zero: 2024-01-01T00:00:00Z, a Monday, so that days
// start at midnight, weeks on Monday, months on the 1st and years on
// January 1st).
type Window uint8

// The windows.
const (
	// NoWindow: a token bucket, not a quota.
	NoWindow Window = iota
	// Daily windows are 24 h long, from the anchor's time of day.
	Daily
	// Weekly windows are 7 days long, from the anchor's weekday and time.
	Weekly
	// Monthly windows add calendar months to the anchor: an anchor on the
	// 31st gives windows starting on each month's last day when it is
	// shorter (Jan 31, Feb 28 or 29, Mar 31, ...).
	Monthly
	// Yearly windows add calendar years: Feb 29 becomes Feb 28.
	Yearly
)

// capacity returns the bucket's effective burst (a quota's is its Limit).
func (b Bucket) capacity() int64 {
	if b.Burst <= 0 || b.Window != NoWindow {
		return b.Limit
	}
	return b.Burst
}

// Request asks for Cost tokens from every one of Buckets, all of the same
// Subject.
type Request struct {
	// Subject is who is limited (an API key, an IP). It is hashed before it
	// reaches Redis.
	Subject string
	// Buckets are charged all or nothing; 1..MaxBuckets of them.
	Buckets []Bucket
	// Cost is the number of tokens to take from each bucket; >= 1. Cost 0
	// peeks: it reports what a cost-1 request would get and charges
	// nothing.
	Cost int64
}

// Decision is the outcome of Allow. Its numbers describe the limiting
// bucket: when denied, the enforcing bucket that needs the longest wait;
// when allowed, the enforcing bucket with the fewest tokens left (shadow
// buckets only when every bucket is a shadow).
type Decision struct {
	// Allowed says whether the request may pass.
	Allowed bool
	// Limit is the limiting bucket's Limit (tokens per Period).
	Limit int64
	// Remaining is the number of whole tokens left in the limiting bucket
	// after this call.
	Remaining int64
	// Reset is the time until the limiting bucket is full again
	// (millisecond resolution, rounded up); never negative, and at most the
	// bucket's refill horizon (Burst·Period/Limit, at most MaxHorizon;
	// twice that in usage debt) plus a millisecond. For a quota it is the
	// time until its window ends, even when nothing is used.
	Reset time.Duration
	// RetryAfter is 0 when allowed; otherwise the time until Cost tokens
	// (plus each bucket's MinRemaining) are available in every bucket
	// (millisecond resolution, rounded up): at least 1ms, at most the
	// limiting bucket's Reset; for an exhausted quota, the time until its
	// window ends. When Cost exceeds a bucket's Burst, or a bucket is
	// blocked (Limit 0) with no Until, no wait helps: RetryAfter is then
	// that bucket's Period; a block with an Until, the time until then.
	// A fail-closed deny (Redis failed) carries the breaker cooldown, a
	// hint of when Redis is asked again.
	RetryAfter time.Duration
	// Bucket is the index in Request.Buckets of the limiting bucket.
	Bucket int
	// ShadowDenied has bit i set when shadow bucket Request.Buckets[i]
	// would have denied.
	ShadowDenied uint32
	// FailOpen is set when Redis failed (or the breaker was open) and the
	// buckets' failure mode allowed the request.
	FailOpen bool
	// Cached is set when the local deny cache denied without a Redis call.
	Cached bool
	// Leased is set when a token lease admitted the request (lease.go): its
	// tokens were charged in Redis by an earlier call.
	Leased bool
	// Slots are the in-flight slots an allowed request holds, one per
	// concurrency bucket that had room; hand them to Release when the work
	// ends. Zero when the request has none.
	Slots Slots
}

// BucketState is one bucket as Peek sees it.
type BucketState struct {
	// Remaining is the number of whole tokens in the bucket now.
	Remaining int64
	// Reset is the time until the bucket is full (0 when full).
	Reset time.Duration
}

// Errors returned by the Limiter; Redis errors are wrapped, so test them
// with errors.Is.
var (
	// ErrInvalidRequest reports a Request the Limiter cannot evaluate
	// (no buckets, too many, a bad period, a refill horizon above
	// MaxHorizon, a negative cost). The decision returned with it denies;
	// it is not a Redis failure, so it never moves the breaker.
	ErrInvalidRequest = errors.New("limiter: invalid request")
	// ErrBreakerOpen is returned, with the failure-mode decision, while the
	// circuit breaker keeps calls away from Redis.
	ErrBreakerOpen = errors.New("limiter: circuit breaker open")
)

// BreakerState is the circuit breaker's state.
type BreakerState int32

// The breaker's states.
const (
	// BreakerClosed: calls go to Redis.
	BreakerClosed BreakerState = iota
	// BreakerOpen: calls skip Redis and follow the failure mode.
	BreakerOpen
	// BreakerHalfOpen: the cooldown is over; one probe call goes to Redis,
	// the others still skip it.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "unknown"
}

// Options configure a Limiter. The zero value is usable: each field's
// default is written on it.
type Options struct {
	// Prefix starts every key; default "sl:". Tests use their own.
	Prefix string
	// Timeout bounds each Redis call; default 25ms. It only applies when
	// the client was created with ContextTimeoutEnabled: true.
	Timeout time.Duration
	// DenyCacheSize is the number of denied (subject, buckets, cost)
	// entries kept locally; default 10000. Negative disables the cache.
	// An entry keeps digests, not the subject: it holds at most 300 bytes
	// of heap whatever the subject's length, so the cache holds at most
	// 300 B × DenyCacheSize (3 MB at the default).
	DenyCacheSize int
	// DenyCacheMargin is subtracted from a Redis retry-after before the
	// local cache uses it, so a fast local clock never denies what Redis
	// would allow; default 2ms plus 1% of the retry-after.
	DenyCacheMargin time.Duration
	// DenyCacheMaxAge bounds how long a cached denial lasts, whatever its
	// retry-after; default 1s (DefaultDenyCacheMaxAge). A denial that
	// lasts longer, an exhausted monthly quota or a usage debt, is asked of
	// Redis again at most this often: what lifts it elsewhere (an admin
	// reset, a refund, another Limiter's usage report) reaches this
	// Limiter within it, while a flood costs one Redis call per subject
	// and max age.
	DenyCacheMaxAge time.Duration
	// BreakerThreshold is the number of consecutive Redis failures that
	// open the breaker; default 5. Negative disables the breaker.
	BreakerThreshold int
	// BreakerCooldown is how long the open breaker skips Redis before it
	// lets one probe through; default 1s.
	BreakerCooldown time.Duration
	// SubjectKey is the per-deployment key of the subject hash
	// (HMAC-SHA256): without it a subject's hash, in a key name, a log
	// line or a principalId, is a plain digest anyone can recompute from
	// a guess (every IPv4 address takes seconds). Default empty (tests,
	// sluice local before it generates one). Changing it starts every
	// subject on fresh buckets.
	SubjectKey []byte
	// OnBreakerChange, when set, is called on every breaker transition,
	// synchronously, from the goroutine whose call caused it. It must be
	// quick and must not call the Limiter.
	OnBreakerChange func(from, to BreakerState)
	// LeaseMax is the most requests one token lease admits (lease.go);
	// below 4 (the default, 0) there are no leases: every request is one
	// script call. Leasing takes 885 KB for its table and, from the first
	// lease until Close, a goroutine; call Close when the process stops.
	LeaseMax int
	// LeaseTTL is how long a lease that is not refilled admits before its
	// unused tokens go back to Redis; default 250ms (DefaultLeaseTTL).
	LeaseTTL time.Duration

	// Ledger, when set, holds the budgets of global buckets, which every
	// Region shares (global.go); nil decides them as regional buckets.
	// A Limiter with a ledger runs a goroutine from its first global
	// decision until Close, which gives its pools back.
	Ledger Ledger
	// Region names this Region in the ledger's record of what each
	// Region holds (a reset keeps it counted); default "-". Every Region
	// sharing a ledger needs a name of its own.
	Region string
	// Regions is the number of Regions sharing the ledger; default 1. A
	// block holds at most a global bucket's limit/(2·Regions).
	Regions int
	// LedgerTimeout bounds each ledger call; default 200ms
	// (DefaultLedgerTimeout). Only a request that finds its Region's pool
	// empty waits for one.
	LedgerTimeout time.Duration
	// GlobalHorizon is how much of a Region's recent rate a block covers;
	// default 5s (DefaultGlobalHorizon).
	GlobalHorizon time.Duration
	// GlobalIdle is how long a pool nobody spends from stays before it
	// goes back to the ledger; default 10s (DefaultGlobalIdle).
	GlobalIdle time.Duration
	// OpenShare is the share of a fail-open global bucket's limit a Region
	// may admit per window on its own while the ledger cannot answer (its
	// allowance); default 1/Regions. A fail-closed bucket has none.
	OpenShare float64
}

// Stats are the Limiter's counters since New; every field only grows
// except Breaker.
type Stats struct {
	Calls      uint64 // Allow calls
	Allowed    uint64 // decisions that allowed (fail-open included)
	Denied     uint64 // decisions that denied (cached and fail-closed included)
	CacheHits  uint64 // denials by the local deny cache, no Redis call
	Blocked    uint64 // denials by a blocked bucket (Limit 0), no Redis call
	RedisCalls uint64 // calls sent to Redis (lease returns and slot releases included)
	Errors     uint64 // Redis calls that failed (timeouts included)
	FailOpen   uint64 // decisions allowed because Redis failed or the breaker was open
	FailClosed uint64 // decisions denied because Redis failed or the breaker was open
	Skipped    uint64 // calls that skipped Redis because the breaker was open
	// NotReplicated counts durable admissions no replica acknowledged in
	// time (decided by the failure mode; durable.go).
	NotReplicated uint64
	// In-flight slots (concurrency.go): taken by allowed requests, handed
	// to Release, and Release calls that failed (their slots free at TTL).
	Slots, Released, ReleaseErrors uint64

	Breaker       BreakerState // the breaker's state now
	BreakerOpened uint64       // transitions to open (from closed or half-open)
	BreakerClosed uint64       // transitions back to closed after a good probe

	// Token leases (lease.go); all 0 without leasing. Tokens are counted
	// per bucket: a lease of 10 requests of cost 2 holds 20.
	Leases           uint64 // leases taken: script calls that charged k > 1 requests at once
	Leased           uint64 // decisions allowed from a lease, no Redis call (counted in Allowed)
	LeaseTokens      uint64 // tokens charged by leases
	LeaseReturned    uint64 // unused tokens given back to Redis (expiry, Close)
	LeaseLost        uint64 // unused tokens a failed return could not give back
	LeaseOutstanding int64  // tokens held by leases now, charged and not yet used or given back
}

// SubjectHash returns the hex hash of a subject under the empty key, as a
// Limiter without Options.SubjectKey names its keys: the first 16 bytes of
// HMAC-SHA256("", subject), 32 lowercase hex characters. Deployments set a
// key; use Limiter.SubjectHash there.
func SubjectHash(subject string) string {
	return unkeyed.SubjectHash(subject)
}

// subjectDigest is the first 16 bytes of HMAC-SHA256(key, subject): what
// the keys and the deny cache know of a subject. Computed once per call.
type subjectDigest [16]byte

// unkeyed is the Hasher of the empty key (tests, and Limiters without one).
var unkeyed = NewHasher(nil)

// digestOf returns subject's digest under the empty key.
func digestOf(subject string) subjectDigest { return unkeyed.digest(subject) }

// Defaults for the zero Options.
const (
	DefaultPrefix           = "sl:"
	DefaultTimeout          = 25 * time.Millisecond
	DefaultDenyCacheSize    = 10000
	DefaultDenyCacheMaxAge  = time.Second
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = time.Second
)

// redisClient lists the Redis calls the Limiter makes: the script (through
// redis.Script) and DEL for Reset.
type redisClient interface {
	redis.Scripter
	Del(ctx context.Context, keys ...string) *redis.IntCmd
	// Global buckets' pools (global.go).
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Pipeline() redis.Pipeliner
	// In-flight slots' release (concurrency.go).
	ZRem(ctx context.Context, key string, members ...any) *redis.IntCmd
}

// Limiter decides requests against token buckets in Redis. It is safe for
// concurrent use; create one per process and reuse it.
type Limiter struct {
	rdb     redisClient
	cluster bool // keys of different hash tags may not share a script
	hash    *Hasher
	prefix  string
	timeout time.Duration
	margin  time.Duration // <0: default (2ms + 1%)
	maxAge  time.Duration // of a cached denial
	cache   *denyCache    // nil when disabled
	leases  *leases       // nil when disabled (lease.go)
	global  *globals      // nil without a ledger (global.go)
	breaker breaker
	epoch   time.Time // monotonic origin of now
	// now is the monotonic time since New, in nanoseconds: the clock of
	// the deny cache, the breaker and the leases. A field, so that tests
	// can move it ahead (export_test.go).
	now func() int64
	st  counters
}

// counters back Stats.
type counters struct {
	calls, allowed, denied, cacheHits, blocked, redisCalls, errors,
	failOpen, failClosed, skipped, notReplicated atomic.Uint64
	slots, released, releaseErrors atomic.Uint64
}

// New returns a Limiter over c, which may be a single node, Sentinel or
// Cluster client. Create c with ContextTimeoutEnabled: true, or the
// per-call Timeout cannot interrupt a stalled connection and a Redis stall
// stalls the caller. Size c's pool (PoolSize) for the number of concurrent
// callers: a call holds a connection for one round trip.
func New(c redis.UniversalClient, o Options) *Limiter {
	l := &Limiter{
		rdb:     c,
		cluster: isCluster(c),
		hash:    NewHasher(o.SubjectKey),
		prefix:  o.Prefix,
		timeout: o.Timeout,
		margin:  o.DenyCacheMargin,
		maxAge:  o.DenyCacheMaxAge,
		epoch:   time.Now(),
	}
	l.now = func() int64 { return int64(time.Since(l.epoch)) }
	l.prefix = cmp.Or(l.prefix, DefaultPrefix)
	if l.timeout <= 0 {
		l.timeout = DefaultTimeout
	}
	if o.DenyCacheMargin <= 0 {
		l.margin = -1
	}
	if l.maxAge <= 0 {
		l.maxAge = DefaultDenyCacheMaxAge
	}
	size := o.DenyCacheSize
	if size == 0 {
		size = DefaultDenyCacheSize
	}
	if size > 0 {
		l.cache = newDenyCache(size)
	}
	threshold := o.BreakerThreshold
	if threshold == 0 {
		threshold = DefaultBreakerThreshold
	}
	cooldown := o.BreakerCooldown
	if cooldown <= 0 {
		cooldown = DefaultBreakerCooldown
	}
	l.breaker.init(threshold, cooldown, o.OnBreakerChange)
	l.leases = newLeases(o)
	l.global = newGlobals(o)
	return l
}

// blockedFor is the RetryAfter of blocked bucket b: the time until its
// block ends, to the millisecond rounded up, else its Period.
func blockedFor(b Bucket) time.Duration {
	if b.Until.IsZero() {
		return b.Period
	}
	d := time.Until(b.Until)
	if d <= 0 {
		return time.Millisecond // ended meanwhile: the next try passes it
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// SubjectHash returns the hex hash of subject under the Limiter's
// SubjectKey, as its Redis keys name it: what may be logged or returned
// in place of the subject.
func (l *Limiter) SubjectHash(subject string) string { return l.hash.SubjectHash(subject) }

// Allow checks and charges req.Cost tokens from every bucket of req,
// atomically, in one Redis round trip (none when the local deny cache or a
// blocked bucket denies, or a lease admits).
//
// On a Redis failure (timeout included) or while the breaker is open, Allow
// returns the decision of the buckets' failure mode — deny when any
// enforcing bucket is FailClosed, else allow with FailOpen set — together
// with the error, which the caller should log. An invalid request returns a
// denying zero Decision and an error wrapping ErrInvalidRequest.
func (l *Limiter) Allow(ctx context.Context, req Request) (Decision, error) {
	l.st.calls.Add(1)
	if err := validate(req.Buckets, req.Cost, true); err != nil {
		l.st.denied.Add(1)
		return Decision{}, err
	}
	for i, b := range req.Buckets {
		if b.Limit == 0 && !b.Shadow {
			l.st.blocked.Add(1)
			l.st.denied.Add(1)
			return Decision{Bucket: i, RetryAfter: blockedFor(b)}, nil
		}
	}
	var sub subjects
	l.digests(&req, &sub)
	if req.Cost > 0 && hasConcurrency(req.Buckets) {
		sub.member = slotID()
	}

	// 1. The deny cache: a request denied until its retry-after is denied
	// again without a Redis call (denycache.go). A peek (cost 0) is
	// never cached.
	var ck denyKey
	useCache := l.cache != nil && req.Cost > 0
	if useCache {
		ck = l.cache.key(sub.id, req.Buckets, req.Cost)
		if d, ok := l.cache.get(ck, l.now()); ok {
			l.st.cacheHits.Add(1)
			l.st.denied.Add(1)
			return d, nil
		}
	}

	// A request with a global bucket decides from the Region's pools
	// (global.go), and is never leased.
	if l.global != nil && req.Cost > 0 && hasGlobal(req.Buckets) {
		return l.allowGlobal(ctx, &sub, req, ck, useCache)
	}

	// 2. A token lease (lease.go): the request is admitted from one this
	// Limiter holds, or answered by the call that takes one.
	lh, d, err, leased := l.lease(ctx, &sub, req)
	if leased {
		return d, err
	}

	// 3. The script (script.go), behind the breaker: one call charges
	// every bucket (one per subject on Redis Cluster, dimensions.go).
	start := l.now()
	ok, probe := l.breaker.enter(start)
	if !ok {
		l.st.skipped.Add(1)
		return l.failure(req, ErrBreakerOpen)
	}
	r, err := l.run(ctx, &sub, req.Cost, req.Buckets)
	if err != nil {
		if errors.Is(err, ErrNotReplicated) {
			// Redis answered: no fault of the connection, so none of the
			// breaker's (durable.go).
			l.st.notReplicated.Add(1)
			l.breaker.done(0, true, probe)
		} else {
			l.st.errors.Add(1)
			l.breaker.done(l.now(), false, probe)
		}
		return l.failure(req, err)
	}
	l.breaker.done(0, true, probe)
	lh.observe(r.remaining)

	// 4. The decision, from the limiting bucket; a deny is cached until
	// its retry-after.
	d = l.decided(r, req, start, ck, useCache)
	if sub.member != "" {
		l.holding(ctx, &d, &sub, req.Buckets)
	}
	return d, nil
}

// decided turns a script reply into Allow's decision, caching a deny.
func (l *Limiter) decided(r reply, req Request, start int64, ck denyKey, useCache bool) Decision {
	b := req.Buckets[r.index]
	d := Decision{
		Allowed:      r.allowed,
		Limit:        b.Limit,
		Remaining:    r.remaining,
		Reset:        ms(r.reset),
		Bucket:       r.index,
		ShadowDenied: r.mask,
	}
	if r.allowed {
		l.st.allowed.Add(1)
		return d
	}
	l.st.denied.Add(1)
	if r.retry < 0 {
		d.RetryAfter = b.Period
		return d
	}
	d.RetryAfter = ms(r.retry)
	// A request held back by requests in flight is asked again: a slot
	// frees when any holder finishes, which no clock says.
	if useCache && !b.Concurrency {
		l.cache.add(ck, d, start, l.cacheUntil(start, d.RetryAfter))
	}
	return d
}

// cacheUntil is when a deny sent at start with retry-after r stops being
// cached: early by the margin, so a local clock running fast never denies
// what Redis would allow, and at most the max age after start, so what
// lifts the deny elsewhere reaches this Limiter. start is taken before
// the call was sent, so network latency only makes the entry expire
// earlier.
func (l *Limiter) cacheUntil(start int64, r time.Duration) int64 {
	m := l.margin
	if m < 0 {
		m = 2*time.Millisecond + r/100
	}
	return start + int64(min(r-m, l.maxAge))
}

// failure is the decision when Redis cannot answer: deny when an enforcing
// bucket is FailClosed (RetryAfter is the breaker cooldown, a hint of when
// Redis is tried again), else allow and flag FailOpen.
func (l *Limiter) failure(req Request, err error) (Decision, error) {
	if !errors.Is(err, ErrBreakerOpen) {
		err = fmt.Errorf("limiter: subject %s: %w", l.SubjectHash(req.Subject), err)
	}
	first := -1
	for i, b := range req.Buckets {
		if b.Shadow {
			continue
		}
		if first < 0 {
			first = i
		}
		if b.FailClosed {
			l.st.failClosed.Add(1)
			l.st.denied.Add(1)
			return Decision{Limit: b.Limit, Bucket: i, RetryAfter: time.Duration(l.breaker.cooldown)}, err
		}
	}
	if first < 0 {
		first = 0
	}
	l.st.failOpen.Add(1)
	l.st.allowed.Add(1)
	return Decision{Allowed: true, FailOpen: true, Limit: req.Buckets[first].Limit, Bucket: first}, err
}

// Peek returns the state of each bucket of subject without charging or
// writing anything. It always asks Redis (no deny cache, no breaker).
func (l *Limiter) Peek(ctx context.Context, subject string, buckets []Bucket) ([]BucketState, error) {
	if err := validate(buckets, 0, true); err != nil {
		return nil, err
	}
	res, err := l.eval(ctx, peekScript, &subjects{id: l.hash.digest(subject)}, 0, buckets)
	if err != nil {
		return nil, fmt.Errorf("limiter: peek subject %s: %w", l.SubjectHash(subject), err)
	}
	rd := replyReader{s: res}
	if _, err := parseReply(&rd, len(buckets)); err != nil {
		return nil, fmt.Errorf("limiter: peek subject %s: %w", l.SubjectHash(subject), err)
	}
	out := make([]BucketState, len(buckets))
	for i := range out {
		out[i] = BucketState{Remaining: rd.next(), Reset: ms(rd.next())}
	}
	if rd.err != nil {
		return nil, fmt.Errorf("limiter: peek subject %s: %w", l.SubjectHash(subject), rd.err)
	}
	return out, nil
}

// Reset deletes subject's buckets in Redis (an admin unblock: they start
// full again) and drops the subject's entries from this Limiter's local
// deny cache and its token leases. Other processes' caches keep their
// entries until they expire, at most their DenyCacheMaxAge (1s by
// default), and their leases admit what they hold for at most their
// LeaseTTL.
func (l *Limiter) Reset(ctx context.Context, subject string, buckets []Bucket) error {
	sd := l.hash.digest(subject)
	l.forget(sd)
	l.dropLeases(sd)
	if err := validate(buckets, 0, false); err != nil {
		return err
	}
	c := buildCalls.Get().(*call)
	defer buildCalls.Put(c)
	c.build(l.prefix, &subjects{id: sd}, 0, buckets)
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.rdb.Del(ctx, c.keys...).Err(); err != nil {
		return fmt.Errorf("limiter: reset subject %s: %w", l.SubjectHash(subject), err)
	}
	return nil
}

// ForgetDenials drops subject's entries from this Limiter's local deny
// cache, leaving Redis and the leases as they are. A reset or refund made
// through another Limiter of the same process (sluice local's admin API)
// calls it so that this one's next decision asks Redis instead of
// repeating a denial for up to DenyCacheMaxAge.
func (l *Limiter) ForgetDenials(subject string) { l.forget(l.hash.digest(subject)) }

func (l *Limiter) forget(sd subjectDigest) {
	if l.cache != nil {
		l.cache.dropSubject(sd)
	}
}

// Stats returns a snapshot of the counters.
func (l *Limiter) Stats() Stats {
	s := Stats{
		Calls:         l.st.calls.Load(),
		Allowed:       l.st.allowed.Load(),
		Denied:        l.st.denied.Load(),
		CacheHits:     l.st.cacheHits.Load(),
		Blocked:       l.st.blocked.Load(),
		RedisCalls:    l.st.redisCalls.Load(),
		Errors:        l.st.errors.Load(),
		FailOpen:      l.st.failOpen.Load(),
		FailClosed:    l.st.failClosed.Load(),
		Skipped:       l.st.skipped.Load(),
		NotReplicated: l.st.notReplicated.Load(),
		Slots:         l.st.slots.Load(),
		Released:      l.st.released.Load(),
		ReleaseErrors: l.st.releaseErrors.Load(),
		Breaker:       l.breaker.state(),
		BreakerOpened: l.breaker.opened.Load(),
		BreakerClosed: l.breaker.closed.Load(),
	}
	l.leaseStats(&s)
	return s
}

// validate checks what the script relies on; the refill horizon only when
// horizon is set (Reset deletes keys whatever their numbers).
func validate(bs []Bucket, cost int64, horizon bool) error {
	if len(bs) == 0 || len(bs) > MaxBuckets {
		return fmt.Errorf("%w: %d buckets, want 1..%d", ErrInvalidRequest, len(bs), MaxBuckets)
	}
	if cost < 0 {
		return fmt.Errorf("%w: cost %d < 0", ErrInvalidRequest, cost)
	}
	for i, b := range bs {
		switch {
		case b.ID == "":
			return fmt.Errorf("%w: bucket %d: empty id", ErrInvalidRequest, i)
		case b.Limit < 0:
			return fmt.Errorf("%w: bucket %q: limit %d < 0", ErrInvalidRequest, b.ID, b.Limit)
		case b.Period < time.Microsecond:
			return fmt.Errorf("%w: bucket %q: period %v < 1µs", ErrInvalidRequest, b.ID, b.Period)
		case b.MinRemaining < 0:
			return fmt.Errorf("%w: bucket %q: min remaining %d < 0", ErrInvalidRequest, b.ID, b.MinRemaining)
		case b.Window > Yearly:
			return fmt.Errorf("%w: bucket %q: unknown window %d", ErrInvalidRequest, b.ID, b.Window)
		case b.Concurrency && (b.Window != NoWindow || b.Global != ""):
			return fmt.Errorf("%w: bucket %q: a concurrency bucket has no window and is not global", ErrInvalidRequest, b.ID)
		case b.Window != NoWindow && !b.Anchor.IsZero() && (b.Anchor.Before(minAnchor) || !b.Anchor.Before(maxAnchor)):
			return fmt.Errorf("%w: bucket %q: anchor %v outside 1970..2100", ErrInvalidRequest, b.ID, b.Anchor)
		case horizon && b.Window == NoWindow && !b.Concurrency && !withinHorizon(b):
			return fmt.Errorf("%w: bucket %q: burst %d at %d per %v takes longer than MaxHorizon (%v) to refill",
				ErrInvalidRequest, b.ID, b.capacity(), b.Limit, b.Period, MaxHorizon)
		}
	}
	return nil
}

// Bounds of a quota's anchor (rules validation enforces the same).
var (
	minAnchor = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxAnchor = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// withinHorizon reports whether b's refill horizon, capacity·period/limit
// with the period in whole microseconds as the script gets it, is at most
// MaxHorizon. It compares the exact 128-bit products, so it agrees with
// rules.MaxHorizon on every rule rules validation accepts. A blocked
// bucket (Limit 0) never refills and has no horizon.
func withinHorizon(b Bucket) bool {
	c := b.capacity()
	if b.Limit <= 0 || c <= 0 {
		return true
	}
	hi, lo := bits.Mul64(uint64(c), uint64(periodMicros(b.Period)))
	maxHi, maxLo := bits.Mul64(uint64(MaxHorizon/time.Microsecond), uint64(b.Limit))
	return hi < maxHi || hi == maxHi && lo <= maxLo
}
