package limiter

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one per operation. bucket.lua is what they share (the
// clock, reading and deciding every bucket: the token bucket, a quota's
// window); each script is bucket.lua followed by its operation's file, so
// an allow's script holds the charge and nothing of a peek, a usage report
// or a lease. Its first line sets the two locals bucket.lua reads the
// buckets by (charging, every_end: see bucket.lua). Each is a
// redis.Script (its own SHA): Run sends EVALSHA and falls back to EVAL,
// which also loads it, on NOSCRIPT.
var (
	//go:embed bucket.lua
	bucketLua string
	//go:embed charge.lua
	chargeLua string
	//go:embed charge_one.lua
	chargeOneLua string
	//go:embed stored.lua
	storedLua string
	//go:embed peek.lua
	peekLua string
	//go:embed usage.lua
	usageLua string
	//go:embed lease.lua
	leaseLua string
	//go:embed lease_return.lua
	leaseReturnLua string

	// bucketSrc is bucket.lua with stored.lua in it (withStored).
	bucketSrc = withStored(bucketLua)
	// chargeScript checks and charges a request's buckets (Allow).
	chargeSrc    = "local charging, every_end = true, false\n" + bucketSrc + chargeLua + "return out\n"
	chargeScript = redis.NewScript(chargeSrc)
	// chargeOneScript is chargeScript for the commonest request, one
	// enforcing token bucket without a floor, straight through (chargeFor).
	chargeOneSrc    = withStored(chargeOneLua)
	chargeOneScript = redis.NewScript(chargeOneSrc)
	// peekScript reports them as a cost-1 request would see them,
	// writing nothing (Peek, and Allow with cost 0).
	peekScript = redis.NewScript("local charging, every_end = false, true\n" + bucketSrc + peekLua)
	// usageScript charges or refunds usage known after a response
	// (Charge).
	usageScript = redis.NewScript("local charging, every_end = false, true\n" + bucketSrc + usageLua + "return out\n")
	// leaseScript is the charge of a token lease of a request with a
	// quota (lease.go): the charge, reading every quota's window end,
	// whose reply goes on to name them (lease.lua).
	leaseScript = redis.NewScript("local charging, every_end = true, true\n" + bucketSrc + chargeLua + leaseLua)
	// leaseReturnScript gives a lease's unused tokens back.
	leaseReturnScript = redis.NewScript(leaseReturnLua)
)

// withStored returns src with stored.lua where it says so: the reading of
// a token bucket's stored value, one text for bucket.lua's loop and
// charge_one.lua's straight line (a function would cost every call a
// closure; see bucket.lua). A source without the line is a mistake of
// this package's, caught at its first test.
func withStored(src string) string {
	const mark = "-- #include stored.lua\n"
	if strings.Count(src, mark) != 1 {
		panic("limiter: a script source without its one \"" + strings.TrimSpace(mark) + "\" line")
	}
	return strings.Replace(src, mark, storedLua, 1)
}

// run is the script step of Allow: it charges cost to every bucket of bs
// (peeks when cost is 0) and parses the reply. That is one call over every
// bucket, unless the buckets span subjects on a Redis Cluster (runSplit,
// dimensions.go). It counts the script calls.
func (l *Limiter) run(ctx context.Context, sub *subjects, cost int64, bs []Bucket) (reply, error) {
	if l.cluster && sub.many && !sub.sameSubject(len(bs)) {
		return l.runSplit(ctx, sub, cost, bs)
	}
	l.st.redisCalls.Add(1)
	res, err := l.eval(ctx, scriptFor(cost, bs), sub, cost, bs)
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return reply{}, err
	}
	rd := replyReader{s: res}
	r, perr := parseReply(&rd, len(bs))
	if perr != nil {
		return reply{}, perr
	}
	return r, err // the reply, and ErrNotReplicated when a durable charge was not acknowledged
}

// scriptFor is the script of an Allow of cost over bs: the peek for cost
// 0, else chargeFor's.
func scriptFor(cost int64, bs []Bucket) *redis.Script {
	if cost == 0 {
		return peekScript
	}
	return chargeFor(bs)
}

// chargeFor is the charge script for bs: charge_one.lua for one enforcing
// token bucket with no floor, what most requests are, which it charges
// for a fraction of charge.lua's Redis time; charge.lua for any other. A
// durable charge (durable.go) is always charge.lua's. A blocked bucket
// (limit 0) never reaches a script (Allow denies it first).
func chargeFor(bs []Bucket) *redis.Script {
	if len(bs) == 1 {
		b := bs[0]
		if b.Window == NoWindow && !b.Shadow && b.MinRemaining == 0 && b.Limit > 0 && !b.Durable && !b.Concurrency {
			return chargeOneScript
		}
	}
	return chargeScript
}

// eval runs script once over bs, with ARGV[1] = amount, within the
// Limiter's timeout, and returns its reply. A charge (amount > 0) of a
// durable bucket waits for a replica (durable.go).
func (l *Limiter) eval(ctx context.Context, script *redis.Script, sub *subjects, amount int64, bs []Bucket) (string, error) {
	c := getCall()
	defer putCall(c)
	c.build(l.prefix, sub, amount, bs)
	c.ctx.arm(ctx, l.timeout)
	if script == chargeScript && amount > 0 && durable(bs) {
		return l.chargeDurable(c)
	}
	return script.Run(&c.ctx, l.rdb, c.keys, c.args...).Text()
}

// reply is the head of a reply of charge.lua or peek.lua: the limiting
// bucket.
type reply struct {
	allowed   bool
	index     int   // 0-based
	remaining int64 // tokens
	reset     int64 // ms
	retry     int64 // ms; -1 = never
	mask      uint32
}

// errBadReply wraps a script reply the Limiter cannot parse.
var errBadReply = errors.New("unexpected script reply")

// replyReader walks a script's space-separated integer reply without
// allocating.
type replyReader struct {
	s   string
	err error
}

func (r *replyReader) next() int64 {
	if r.err != nil {
		return 0
	}
	i := 0
	for i < len(r.s) && r.s[i] != ' ' {
		i++
	}
	v, err := strconv.ParseInt(r.s[:i], 10, 64)
	if err != nil {
		r.err = fmt.Errorf("%w: %q", errBadReply, r.s)
		return 0
	}
	if i < len(r.s) {
		i++
	}
	r.s = r.s[i:]
	return v
}

// parseReply reads the head of a reply for a request of n buckets. The
// rest (per-bucket states of a peek, the windows of a lease) stays in rd.
func parseReply(rd *replyReader, n int) (reply, error) {
	var r reply
	r.allowed = rd.next() == 1
	r.index = int(rd.next()) - 1
	r.remaining = rd.next()
	r.reset = rd.next()
	r.retry = rd.next()
	r.mask = uint32(rd.next())
	if rd.err != nil {
		return reply{}, rd.err
	}
	if r.index < 0 || r.index >= n {
		return reply{}, fmt.Errorf("%w: bucket index %d of %d", errBadReply, r.index+1, n)
	}
	return r, nil
}

// The pool below, with the callCtx it carries (below), is there for
// allocations: BenchmarkAllow in bench_test.go reports allocs/op. When this
// was written a 1-bucket decision made 11 allocations (480 B) with the pool
// and 18 (3.4 KB) without it; run that benchmark before changing it.

// call is the per-call scratch space, pooled: the keys and the script
// arguments are built in one buffer. The keys become substrings of one
// string (one allocation for all of them); the arguments are handed to
// go-redis as pointers to encoding.BinaryMarshalers over the buffer, boxed
// once when the call is made (no allocation per call).
type call struct {
	buf    []byte
	keys   []string
	ends   []int
	argv   [1 + 4*MaxBuckets]argBytes
	boxed  [1 + 4*MaxBuckets]any // &argv[i]
	args   []any                 // boxed[:1+4n]
	ctx    callCtx
	keyEnd [MaxBuckets]int
}

// argBytes is one script argument, written by go-redis without a copy.
type argBytes []byte

// MarshalBinary returns the bytes themselves.
func (a *argBytes) MarshalBinary() ([]byte, error) { return *a, nil }

var callPool = sync.Pool{New: func() any {
	c := &call{
		buf:  make([]byte, 0, 512),
		keys: make([]string, 0, MaxBuckets),
		ends: make([]int, 0, 1+4*MaxBuckets),
	}
	for i := range c.argv {
		c.boxed[i] = &c.argv[i]
	}
	return c
}}

func getCall() *call { return callPool.Get().(*call) }

func putCall(c *call) {
	if c.ctx.timer != nil && !c.ctx.disarm() {
		return // its timer fired: let it go
	}
	callPool.Put(c)
}

// buildCalls are calls used only to build keys and arguments, never armed:
// putCall drops a call whose timer is not running (it cannot tell one that
// fired), so these have a pool of their own.
var buildCalls = sync.Pool{New: callPool.New}

// build fills c.keys with the keys of bs, each named by its subject's
// digest in sub, and c.args with the scripts' ARGV: amount, then every
// bucket's four arguments (bucket.lua).
func (c *call) build(prefix string, sub *subjects, amount int64, bs []Bucket) {
	buf := append(c.buf[:0], prefix...)
	buf = append(buf, '{')
	buf = appendSubjectHash(buf, sub.of(0))
	buf = append(buf, "}:"...)
	head := len(buf)
	for i, b := range bs {
		switch {
		case i > 0 && sub.of(i) != sub.of(0):
			buf = append(buf, prefix...)
			buf = append(buf, '{')
			buf = appendSubjectHash(buf, sub.of(i))
			buf = append(buf, "}:"...)
		case i > 0:
			buf = append(buf, buf[:head]...)
		}
		buf = appendKeyID(buf, b)
		c.keyEnd[i] = len(buf)
	}
	keysEnd := len(buf)
	buf, c.ends = appendArgs(buf, c.ends[:0], amount, bs, sub.member)
	c.buf = buf

	s := string(buf[:keysEnd])
	keys := c.keys[:0]
	from := 0
	for i := range bs {
		keys = append(keys, s[from:c.keyEnd[i]])
		from = c.keyEnd[i]
	}
	c.keys = keys
	from = keysEnd
	for i, end := range c.ends {
		c.argv[i] = buf[from:end]
		from = end
	}
	c.args = c.boxed[:len(c.ends)]
}

// appendArgs appends the scripts' ARGV (bucket.lua) to dst, each followed
// by its end offset in ends; member is the request's slot id in its
// concurrency buckets (empty: none is taken).
func appendArgs(dst []byte, ends []int, amount int64, bs []Bucket, member string) ([]byte, []int) {
	dst = strconv.AppendInt(dst, amount, 10)
	ends = append(ends, len(dst))
	for _, b := range bs {
		dst = strconv.AppendInt(dst, b.Limit, 10)
		ends = append(ends, len(dst))
		switch {
		case b.Concurrency:
			// A concurrency bucket's period is "c", its burst the TTL.
			dst = append(dst, 'c')
			ends = append(ends, len(dst))
			dst = strconv.AppendInt(dst, periodMicros(b.Period), 10)
		case b.Window != NoWindow:
			// A quota's period is its window's letter, its burst its
			// anchor.
			dst = append(dst, windowUnits[b.Window])
			ends = append(ends, len(dst))
			dst = strconv.AppendInt(dst, anchorMicros(b), 10)
		default:
			dst = strconv.AppendInt(dst, periodMicros(b.Period), 10)
			ends = append(ends, len(dst))
			dst = strconv.AppendInt(dst, b.capacity(), 10)
		}
		ends = append(ends, len(dst))
		dst = appendFlags(dst, b)
		if b.Concurrency && member != "" {
			dst = append(dst, ' ')
			dst = append(dst, member...)
		}
		ends = append(ends, len(dst))
	}
	return dst, ends
}

// appendKeyID appends what follows the hash tag in bucket b's key: its
// ID, and for a quota ":q", its window's letter and its anchor, so that a
// rule whose window changes counts in a fresh key (bucket.lua, "Quotas").
func appendKeyID(dst []byte, b Bucket) []byte {
	dst = append(dst, b.ID...)
	if b.Concurrency {
		// A sorted set: its own key, so a rule whose kind changes never
		// reads another kind's value.
		return append(dst, ':', 'c')
	}
	if b.Window == NoWindow {
		return dst
	}
	dst = append(dst, ':', 'q', windowUnits[b.Window])
	return strconv.AppendInt(dst, anchorMicros(b)/1000, 10)
}

// epoch2024 is the scripts' time origin, 2024-01-01T00:00:00Z, in
// microseconds since 1970.
const epoch2024 = 1704067200 * 1000000

// windowUnits are the scripts' window letters, by Window.
var windowUnits = [...]byte{NoWindow: 'r', Daily: 'd', Weekly: 'w', Monthly: 'm', Yearly: 'y'}

// anchorMicros is a quota's anchor as the scripts take it: microseconds
// since 2024-01-01 UTC, truncated to whole milliseconds (so that its
// windows end on whole milliseconds, as a key's expiry does); 0 without an
// anchor.
func anchorMicros(b Bucket) int64 {
	if b.Anchor.IsZero() {
		return 0
	}
	return b.Anchor.UnixMilli()*1000 - epoch2024
}

// appendFlags appends bucket b's flags argument: "0" or "1" (shadow), and
// " <floor>" after it when the bucket has one (bucket.lua).
func appendFlags(dst []byte, b Bucket) []byte {
	shadow := byte('0')
	if b.Shadow {
		shadow = '1'
	}
	if b.MinRemaining == 0 {
		return append(dst, shadow)
	}
	dst = append(dst, shadow, ' ')
	return strconv.AppendInt(dst, b.MinRemaining, 10)
}

// periodMicros is the period in whole microseconds, at least 1.
func periodMicros(p time.Duration) int64 {
	us := p.Microseconds()
	if us < 1 {
		return 1
	}
	return us
}

// ms turns a script's millisecond count into a Duration, clamped to 0 ..
// maxMillis: whatever the reply says, a Decision never carries a negative
// duration nor one that overflows when added to a time.
func ms(v int64) time.Duration {
	return time.Duration(min(max(v, 0), maxMillis)) * time.Millisecond
}

// callCtx is the per-call timeout context, pooled so that a decision does not
// pay context.WithTimeout's allocations (a timer, a context, a channel) on
// every call. Its deadline is the earlier of the parent's and now+timeout;
// go-redis applies it to the socket (ContextTimeoutEnabled) and its Done
// channel, closed by a reusable timer, ends pool and dial waits.
//
// go-redis only uses a call's context during the call (its background dials
// run on their own contexts), so the Limiter may re-arm it for the next
// call once this one has returned.
//
// Unlike context.WithTimeout it does not watch the parent's Done: a parent
// cancelled before its deadline is seen by Err at once but only ends a call
// already blocked in Redis at the call's own deadline, at most the Limiter's
// Timeout later.
type callCtx struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	timer    *time.Timer
	fired    atomic.Bool
}

// arm starts a call under parent with timeout.
func (c *callCtx) arm(parent context.Context, timeout time.Duration) {
	c.parent = parent
	now := time.Now()
	c.deadline = now.Add(timeout)
	if d, ok := parent.Deadline(); ok && d.Before(c.deadline) {
		c.deadline = d
	}
	wait := c.deadline.Sub(now)
	if c.timer == nil {
		c.done = make(chan struct{})
		c.timer = time.AfterFunc(wait, c.fire)
		return
	}
	c.timer.Reset(wait)
}

// disarm ends the call and reports whether c may be reused: not when its
// timer fired (or is firing), which closed done for good.
func (c *callCtx) disarm() bool {
	c.parent = nil
	return c.timer.Stop()
}

func (c *callCtx) fire() {
	c.fired.Store(true)
	close(c.done)
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *callCtx) Done() <-chan struct{}       { return c.done }
func (c *callCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *callCtx) Err() error {
	if c.fired.Load() {
		return context.DeadlineExceeded
	}
	return c.parent.Err()
}
