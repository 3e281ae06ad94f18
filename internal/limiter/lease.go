package limiter

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Token leases.
//
// A subject that one Limiter sees often is served from a lease: one charge
// (charge.lua; lease.lua for a request with a quota) takes k·Cost tokens
// from every bucket of the request at once, all or nothing, and the
// Limiter then admits the next k−1 requests of the same subject, bucket set
// and cost locally, without a Redis call. Redis has charged every token a
// lease admits before it is admitted, so leases never let more through
// than the buckets hold: they only move a charge earlier than the request
// it pays for, by at most the lease TTL.
//
// k adapts:
//   - to the subject's local demand: the requests of the same key this
//     Limiter saw in the last LeaseTTL (the larger of the current and the
//     previous window), so a lease is about what one TTL uses. Below
//     leaseMin requests per TTL there is no lease (k = 1): the request takes
//     exactly the path it takes with leasing off.
//   - to what is left: k·Cost is at most a quarter (1/leaseShare) of the
//     tokens the limiting bucket had left after this key's last script
//     call, so one Limiter never takes what the others need; a bucket
//     close to empty gives k = 1.
//   - to Options.LeaseMax, the ceiling.
//
// A lease is refilled ahead: the request that leaves it half used takes
// the next one (one round trip, as it would without leasing) while the
// others keep using what is left; requests that find it empty while a
// lease is being taken wait for that call instead of all calling Redis.
//
// Unused tokens go back to Redis (lease_return.lua, never above full) when
// the lease has not been refilled for LeaseTTL, from a sweeper goroutine
// that runs while leases are held, and on Close. A request whose buckets
// include a shadow bucket is never leased: a lease would charge the shadow
// bucket in lumps of k and report would-be denies a per-request charge
// never sees, and shadow rules exist to measure exactly that.
//
// A request counts in a compact demand table under the key of its subject,
// bucket ids and cost (a hash computed without allocating): a request of a
// cold key pays one atomic word and touches no slot, so traffic spread over
// many subjects, which never leases, costs what it costs with leasing off;
// from the request before one that may lease, the key takes its slot.
//
// A lease is used only by requests with the same lease
// key, a seeded hash of the script's keys and arguments built by the same
// code as every script call (call.build): the subject's digest, every
// bucket's key, limit, period, burst and shadow flag, and the cost. A rule
// change that moves any of them (a new rules snapshot) gives a new key, so
// a new lease; the old one is never used again and its tokens go back at
// once, unless the bucket was converted to the new numbers, in which case
// the return script gives nothing back rather than guess. Reset drops this
// Limiter's leases of the subject at once; another process's leases of the
// subject stay usable until they run out or expire, at most LeaseTTL later,
// so after a reset a subject gets at most what those leases held on top of
// its fresh bucket (each such token is admitted or given back, not both).

const (
	// DefaultLeaseTTL is Options.LeaseTTL's default.
	DefaultLeaseTTL = 250 * time.Millisecond
	// leaseSlots is the number of lease entries (direct-mapped by key): a
	// Limiter leases for at most this many (subject, buckets, cost) keys
	// at once; a key whose slot is held by another's lease is not leased.
	// A slot is 216 bytes: 885 KB a Limiter with leasing on.
	leaseSlots = 4096
	// leaseMin is the smallest lease: below it a lease call and the return
	// of its leftovers would cost about what they save.
	leaseMin = 4
	// leaseShare: a lease takes at most 1/leaseShare of the tokens left.
	leaseShare = 4
)

// leases is a Limiter's lease table. Its slots are direct-mapped by key
// and locked one by one, so two hot subjects never contend.
type leases struct {
	max   int64 // LeaseMax
	ttl   int64 // ns
	seed  maphash.Seed
	slots []leaseSlot
	// demand counts every key's requests (leases.count), apart from the
	// slots: a compact table (8 bytes a key, 64 KB) that a request of a
	// cold key touches alone, one atomic word, so that uniform traffic,
	// which never leases, does not pay for the slots (their lock, their
	// 216 bytes, the cache misses of 885 KB) on every decision.
	demand []atomic.Uint64
	unit   int64 // ns: the demand table's clock, ttl/demandUnits

	mu      sync.Mutex // guards the sweeper's start and stop
	closed  atomic.Bool
	started atomic.Bool   // the sweeper was started
	stop    chan struct{} // nil until the sweeper runs
	stopped chan struct{}
	returns sync.WaitGroup // returns in flight

	taken, leased, tokens, returned, lost, outstanding atomic.Int64
}

// leaseSlot is one key's demand and lease. The demand and what is left
// are atomics, read and counted without the lock: a request that will not
// be leased (a cold key, a bucket near empty) never waits on the slot; the
// lease itself is under mu.
type leaseSlot struct {
	key atomic.Uint64 // 0: free; written under mu
	// remaining is the limiting bucket's tokens after this key's last
	// script call; -1 when unknown (no lease before one is known).
	remaining atomic.Int64
	// busy is left > 0 || fetching, for the lock-free path; written under mu.
	busy atomic.Bool

	mu      sync.Mutex
	sd      subjectDigest
	full    uint64 // the lease key (leases.key) of the lease held or being taken
	left    int64  // requests the lease still admits
	k       int64  // size of the last lease, in requests
	cost    int64
	expires int64 // Limiter.now when left goes back
	at      int64 // when the last lease was granted
	d       Decision
	bs      []Bucket // the request's buckets, for the return
	// ends are the window ends (Unix ms) of the lease's quotas, per
	// bucket (0 for a token bucket), nil without a quota: the return gives
	// a quota's tokens back only to that window.
	ends     []int64
	fetching bool
	wait     chan struct{} // closed when the lease call in flight ends
}

// leaseHandle lets Allow tell a slot what a script call saw; the zero
// value does nothing.
type leaseHandle struct {
	s   *leaseSlot
	key uint64
}

func newLeases(o Options) *leases {
	if o.LeaseMax < leaseMin {
		return nil
	}
	ttl := cmp.Or(max(o.LeaseTTL, 0), DefaultLeaseTTL) // a negative TTL defaults too
	return &leases{max: int64(o.LeaseMax), ttl: int64(ttl), seed: maphash.MakeSeed(), slots: make([]leaseSlot, leaseSlots),
		demand: make([]atomic.Uint64, 2*leaseSlots), unit: max(int64(ttl)/demandUnits, 1)}
}

// observe records the tokens the limiting bucket has left after a script
// call of the handle's key.
func (h leaseHandle) observe(remaining int64) {
	if h.s == nil {
		return
	}
	if h.s.key.Load() == h.key {
		h.s.remaining.Store(remaining)
	}
}

// slotKey returns the key of req's slot: a seeded hash of the subject's
// digest, the cost and the bucket ids, without allocating. It names the
// demand a request counts in; leases.key, which the lease held must match,
// adds everything else the script gets. Never 0.
func (t *leases) slotKey(sd subjectDigest, req Request) uint64 {
	return max(requestHash(t.seed, sd, req.Buckets, req.Cost, false), 1)
}

// key returns the lease key of req: a seeded hash of the script's KEYS and
// ARGV for it, as every script call builds them (call.build), so it moves
// with anything a call depends on. Never 0.
func (t *leases) key(prefix string, sd subjectDigest, req Request) uint64 {
	c := buildCalls.Get().(*call)
	c.build(prefix, &subjects{id: sd}, req.Cost, req.Buckets)
	k := maphash.Bytes(t.seed, c.buf)
	buildCalls.Put(c)
	return max(k, 1)
}

// reset gives the slot s, which holds no lease, to key. Called under mu.
func (s *leaseSlot) reset(key uint64, sd subjectDigest) {
	s.remaining.Store(-1)
	s.sd, s.full, s.left, s.k, s.bs, s.ends = sd, 0, 0, 0, nil, nil
	s.key.Store(key)
}

// The demand table's entries: a key's tag (its top demandTagBits bits),
// the start of its current window (the table's clock, 16 bits, wrapping),
// and its requests in the current and the previous window (14 bits each,
// saturating; LEASE_MAX is at most 10,000).
const (
	demandUnits   = 16 // a window (the lease TTL) in ticks of the table's clock
	demandTagBits = 20
	demandMax     = 1<<14 - 1
)

// count adds a request of key at now to its demand and returns the demand:
// its requests in the current window or the previous one, whichever is
// more (a window is one lease TTL from the key's first request after the
// last). Another key in the same entry takes it over (its tag differs):
// both then count from 0, so a collision can only delay a lease. Demand
// is an estimate: concurrent requests retry their CAS, none is lost.
func (t *leases) count(key uint64, now int64) int64 {
	e := &t.demand[key&uint64(len(t.demand)-1)]
	tag := key >> (64 - demandTagBits)
	tick := uint64(now/t.unit) & 0xffff
	for {
		old := e.Load()
		start, cur, prev := tick, uint64(0), uint64(0)
		if old>>(64-demandTagBits) == tag && old != 0 {
			start, cur, prev = old>>28&0xffff, old>>14&demandMax, old&demandMax
			switch age := (tick - start) & 0xffff; {
			case age >= 2*demandUnits:
				start, cur, prev = tick, 0, 0
			case age >= demandUnits:
				start, cur, prev = tick, 0, cur
			}
		}
		if cur < demandMax {
			cur++
		}
		if e.CompareAndSwap(old, tag<<(64-demandTagBits)|start<<28|cur<<14|prev) {
			return int64(max(cur, prev))
		}
	}
}

// size is the next lease's size in requests of cost; below leaseMin, no
// lease. fl is the largest admission floor of the request's buckets: the
// script charges a lease only when every bucket keeps its floor (it needs
// k·cost + floor), and the limiting bucket's remaining less the largest
// floor is at most what any bucket holds above its own, so a lease sized
// from it is never denied for a floor (a denied lease costs a round trip).
func (s *leaseSlot) size(demand, most, cost, fl int64) int64 {
	r := s.remaining.Load() - fl
	if r < 0 || s.remaining.Load() < 0 {
		return 1
	}
	k := min(demand, most, r/(leaseShare*cost))
	if k < leaseMin {
		return 1
	}
	return k
}

// setBusy updates busy after left or fetching changed, under mu.
func (s *leaseSlot) setBusy() { s.busy.Store(s.left > 0 || s.fetching) }

// admitted is the decision of a request admitted from the slot's lease at
// now: the numbers of the lease's reply, with the tokens still leased
// counted as remaining (they are the subject's) and the reset aged.
func (s *leaseSlot) admitted(now int64) Decision {
	d := s.d
	d.Leased = true
	d.Remaining += s.left * s.cost
	d.Reset = ceilMs(d.Reset - time.Duration(now-s.at))
	return d
}

// lease serves req from a lease when it can. It returns leased = true with
// the decision when a lease admitted req, or a lease call answered it;
// otherwise Allow continues on its own path, telling h what its call saw.
// A request charging several subjects (dimensions.go) is never leased: a
// lease's calls and its return name the buckets of one subject, and on
// Redis Cluster its subjects are not one script's.
func (l *Limiter) lease(ctx context.Context, sub *subjects, req Request) (h leaseHandle, d Decision, err error, leased bool) {
	t := l.leases
	if t == nil || req.Cost <= 0 || sub.many || t.closed.Load() {
		return h, d, nil, false
	}
	sd := sub.id
	var fl int64
	for _, b := range req.Buckets {
		if b.Shadow || b.Durable || b.Concurrency || b.Global != "" && l.global != nil {
			return h, d, nil, false
		}
		fl = max(fl, b.MinRemaining)
	}
	key := t.slotKey(sd, req)
	now := l.now()
	demand := t.count(key, now)
	if demand < leaseMin-1 {
		// A cold key: no lease, and none worth taking (size); the slot is
		// not touched. From the request before the one that may lease on,
		// the slot hears what its call leaves (the handle), so a lease is
		// sized at leaseMin as before. (A lease of a key whose demand fell,
		// or whose demand a colliding key reset, is left to expire and go
		// back.)
		return h, d, nil, false
	}
	s := &t.slots[key%uint64(len(t.slots))]
	if s.key.Load() != key {
		s.mu.Lock()
		if s.key.Load() != key {
			if s.busy.Load() {
				// Another key's lease holds the slot: no lease for this one.
				s.mu.Unlock()
				return h, d, nil, false
			}
			s.reset(key, sd)
		}
		s.mu.Unlock()
	}
	h = leaseHandle{s: s, key: key}
	if !s.busy.Load() && s.size(demand, t.max, req.Cost, fl) <= 1 {
		// No lease, and none worth taking: Allow's own path, no lock.
		return h, d, nil, false
	}
	// A request waits for lease calls in flight (others may take the tokens
	// of the first) at most the Limiter's timeout, what its own call could
	// take, then calls Redis itself.
	giveUp := now + int64(l.timeout)
	full := t.key(l.prefix, sd, req)
	for {
		now = l.now()
		s.mu.Lock()
		if s.key.Load() != key || s.sd != sd {
			s.mu.Unlock()
			return leaseHandle{}, d, nil, false
		}
		if s.full != full {
			// Other numbers (a rule changed): the slot's lease is never
			// used again. Its tokens go back now (the return script gives
			// nothing to a bucket converted since).
			if s.fetching {
				s.mu.Unlock()
				return h, d, nil, false
			}
			if s.left > 0 {
				l.giveBack(s)
			}
			if s.full != 0 {
				// What was left was counted in the old numbers: no lease
				// before a call under the new ones says.
				s.remaining.Store(-1)
			}
			s.full = full
		}
		if s.left > 0 && now >= s.expires {
			// Not refilled for a TTL: its tokens go back, and it is not
			// used any more (a reset elsewhere is seen within the TTL).
			l.giveBack(s)
		}
		if s.left > 0 {
			s.left--
			t.outstanding.Add(-s.cost)
			d = s.admitted(now)
			var k int64
			if !s.fetching && 2*s.left < s.k {
				if k = s.size(demand, t.max, req.Cost, fl); k > 1 {
					s.fetching, s.wait = true, make(chan struct{})
				}
			}
			s.setBusy()
			s.mu.Unlock()
			t.leased.Add(1)
			l.st.allowed.Add(1)
			if k > 1 {
				// Refill ahead: this request is admitted already; the whole
				// new lease goes to the slot.
				l.takeLease(ctx, s, key, sd, req, k, false)
			}
			return leaseHandle{}, d, nil, true
		}
		if s.fetching {
			w := s.wait
			s.mu.Unlock()
			if now > giveUp {
				return h, d, nil, false
			}
			select {
			case <-w:
			case <-ctx.Done():
				return h, d, nil, false
			}
			continue
		}
		k := s.size(demand, t.max, req.Cost, fl)
		if k <= 1 {
			s.mu.Unlock()
			return h, d, nil, false
		}
		s.fetching, s.wait = true, make(chan struct{})
		s.setBusy()
		s.mu.Unlock()
		return l.takeLease(ctx, s, key, sd, req, k, true)
	}
}

// takeLease charges k·req.Cost from every bucket of req in one script call
// and puts the tokens in s (all k of them, or k−1 when own: req itself is
// then admitted by this call). s.fetching is set by the caller and cleared
// here. With own, it returns as lease does: leased when the call answered
// req (allowed, or Redis failed); a lease denied, or the breaker open,
// sends req on Allow's own path (one request of cost may pass where k do
// not).
func (l *Limiter) takeLease(ctx context.Context, s *leaseSlot, key uint64, sd subjectDigest, req Request, k int64, own bool) (leaseHandle, Decision, error, bool) {
	t := l.leases
	h := leaseHandle{s: s, key: key}
	done := func() {
		s.fetching = false
		close(s.wait)
		s.wait = nil
		s.setBusy()
	}
	ok, probe := l.breaker.enter(l.now())
	if !ok {
		s.mu.Lock()
		done()
		s.mu.Unlock()
		return h, Decision{}, nil, false
	}
	l.st.redisCalls.Add(1)
	start := l.now()
	res, err := l.evalLease(ctx, sd, k*req.Cost, req.Buckets)
	var r reply
	var ends []int64
	until := int64(-1) // ms from start to the first quota window's end
	if err == nil {
		rd := replyReader{s: res}
		r, err = parseReply(&rd, len(req.Buckets))
		if err == nil && hasQuota(req.Buckets) {
			ends = make([]int64, len(req.Buckets))
			for i := range ends {
				ends[i] = rd.next()
				if u := rd.next(); ends[i] != 0 && (until < 0 || u < until) {
					until = u
				}
			}
			err = rd.err
		}
	}
	if err != nil {
		l.st.errors.Add(1)
		l.breaker.done(l.now(), false, probe)
		s.mu.Lock()
		done()
		s.mu.Unlock()
		if !own {
			return h, Decision{}, nil, false
		}
		d, err := l.failure(req, err)
		return leaseHandle{}, d, err, true
	}
	l.breaker.done(0, true, probe)

	now := l.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	defer done()
	s.remaining.Store(r.remaining)
	if !r.allowed {
		return h, Decision{}, nil, false
	}
	got := k
	if own {
		got--
	}
	if s.left > 0 && !slices.Equal(s.ends, ends) {
		// A refill ahead in another quota window: what is left of the
		// previous lease was charged to the window that ended, and goes
		// back there (nothing, once it has ended), not with this lease.
		l.giveBack(s)
	}
	b := req.Buckets[r.index]
	s.left += got
	s.k, s.cost, s.at, s.expires, s.ends = k, req.Cost, now, now+t.ttl, ends
	if until >= 0 {
		// Never admit from a quota window after its end: the lease
		// expires then (measured from before the call, so never late by
		// the reply's trip), and what is left goes back, to nothing.
		s.expires = min(s.expires, start+until*int64(time.Millisecond))
	}
	s.d = Decision{Allowed: true, Limit: b.Limit, Remaining: r.remaining, Reset: ms(r.reset), Bucket: r.index}
	if len(s.bs) != len(req.Buckets) {
		s.bs = make([]Bucket, len(req.Buckets))
	}
	copy(s.bs, req.Buckets)
	t.taken.Add(1)
	t.tokens.Add(k * req.Cost)
	t.outstanding.Add(got * req.Cost)
	if t.closed.Load() {
		// Close ran during the call: nothing will use these.
		l.giveBack(s)
	}
	t.startSweeper(l)
	if !own {
		return h, Decision{}, nil, false
	}
	l.st.allowed.Add(1)
	d := s.admitted(now)
	d.Leased = false // this call went to Redis
	return leaseHandle{}, d, nil, true
}

// giveBack returns what s's lease has left, s.left requests' worth
// (s.left·s.cost tokens), to each of its buckets (a quota's only to the
// window of its end in s.ends), in the background: callers hold s's lock,
// and no request waits for it. s is left empty. Close waits for every
// return in flight.
func (l *Limiter) giveBack(s *leaseSlot) {
	t := l.leases
	sd, bs, ends, n, cost := s.sd, slices.Clone(s.bs), slices.Clone(s.ends), s.left, s.cost
	s.left = 0
	s.setBusy()
	t.outstanding.Add(-n * cost)
	t.returns.Add(1)
	go func() {
		defer t.returns.Done()
		ctx, cancel := context.WithTimeout(context.Background(), max(l.timeout, 100*time.Millisecond))
		defer cancel()
		l.st.redisCalls.Add(1)
		if _, err := l.returnTokens(ctx, sd, bs, ends, n*cost); err != nil {
			// Lost tokens under-admit once, by n·cost, and refill at
			// the rule's rate: nothing to retry.
			t.lost.Add(n * cost)
			return
		}
		t.returned.Add(n * cost)
	}()
}

// returnTokens runs lease_return.lua: n tokens back to each of bs, never
// above full, a quota's only to the window of its end in ends (the lease
// reply's, nil when bs has no quota). It returns the whole tokens each
// bucket took back.
func (l *Limiter) returnTokens(ctx context.Context, sd subjectDigest, bs []Bucket, ends []int64, n int64) ([]int64, error) {
	c := buildCalls.Get().(*call)
	defer buildCalls.Put(c)
	c.build(l.prefix, &subjects{id: sd}, n, bs)
	args := c.args[:len(c.args):len(c.args)] // appended to a copy: c.args belongs to the pool
	for _, e := range ends {
		args = append(args, strconv.FormatInt(e, 10))
	}
	res, err := leaseReturnScript.Run(ctx, l.rdb, c.keys, args...).Text()
	if err != nil {
		return nil, fmt.Errorf("limiter: return %d leased tokens of subject %s: %w", n, appendSubjectHash(nil, sd), err)
	}
	f := strings.Fields(res)
	if len(f) != len(bs) {
		return nil, fmt.Errorf("limiter: return leased tokens: %w: %q", errBadReply, res)
	}
	out := make([]int64, len(f))
	for i, v := range f {
		if out[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, fmt.Errorf("limiter: return leased tokens: %w: %q", errBadReply, res)
		}
	}
	return out, nil
}

// evalLease runs the charge of a lease of cost tokens: for a request with
// a quota the lease script, whose reply also names every quota's window
// (lease.lua); for token buckets only the plain charge.
func (l *Limiter) evalLease(ctx context.Context, sd subjectDigest, cost int64, bs []Bucket) (string, error) {
	script := chargeFor(bs)
	if hasQuota(bs) {
		script = leaseScript
	}
	return l.eval(ctx, script, &subjects{id: sd}, cost, bs)
}

// hasQuota reports whether bs has a quota bucket.
func hasQuota(bs []Bucket) bool {
	return slices.ContainsFunc(bs, func(b Bucket) bool { return b.Window != NoWindow })
}

// startSweeper starts the goroutine that gives expired leases back, once,
// unless the leases are closed.
func (t *leases) startSweeper(l *Limiter) {
	if t.started.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started.Load() || t.closed.Load() {
		return
	}
	t.started.Store(true)
	t.stop, t.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(t.stopped)
		tick := time.NewTicker(time.Duration(t.ttl / 4))
		defer tick.Stop()
		for {
			select {
			case <-t.stop:
				return
			case <-tick.C:
				if t.outstanding.Load() > 0 {
					t.sweep(l, false)
				}
			}
		}
	}()
}

// sweep gives back every lease that expired (all of them when all).
func (t *leases) sweep(l *Limiter, all bool) {
	now := l.now()
	for i := range t.slots {
		s := &t.slots[i]
		s.mu.Lock()
		if all {
			for s.fetching {
				w := s.wait
				s.mu.Unlock()
				<-w
				s.mu.Lock()
			}
		}
		if s.left > 0 && (all || now >= s.expires) {
			l.giveBack(s)
		}
		s.mu.Unlock()
	}
}

// dropLeases forgets this Limiter's leases of the subject of digest sd
// without giving their tokens back: Reset deleted its buckets (full
// again), and tokens returned to buckets charged since would be tokens the
// subject never gave.
func (l *Limiter) dropLeases(sd subjectDigest) {
	t := l.leases
	if t == nil {
		return
	}
	for i := range t.slots {
		s := &t.slots[i]
		s.mu.Lock()
		if s.sd == sd && s.key.Load() != 0 {
			t.outstanding.Add(-s.left * s.cost)
			s.left = 0
			s.remaining.Store(-1)
			s.setBusy()
		}
		s.mu.Unlock()
	}
}

// Close gives the unused tokens of every lease back to Redis and stops
// leasing: Allow keeps working, one script call per request. Call it when
// the process stops (the authorizer's SIGTERM hook, sluice local's
// shutdown); a process that dies without it loses at most the tokens its
// leases held (Stats.LeaseOutstanding), which refill at the rules' rates.
// It waits for the returns, within ctx, and is safe to call more than once.
// Without leasing it does nothing.
func (l *Limiter) Close(ctx context.Context) error {
	return errors.Join(l.closeLeases(ctx), l.closeGlobal(ctx))
}

// closeLeases stops the lease sweeper and gives every lease back.
func (l *Limiter) closeLeases(ctx context.Context) error {
	t := l.leases
	if t == nil {
		return nil
	}
	t.mu.Lock()
	t.closed.Store(true)
	if t.stop != nil {
		close(t.stop)
		<-t.stopped
		t.stop = nil
	}
	t.mu.Unlock()
	t.sweep(l, true)
	done := make(chan struct{})
	go func() { t.returns.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("limiter: close: returning leased tokens: %w", ctx.Err())
	}
}

// leaseStats fills the lease counters of s.
func (l *Limiter) leaseStats(s *Stats) {
	t := l.leases
	if t == nil {
		return
	}
	s.Leases = uint64(t.taken.Load())
	s.Leased = uint64(t.leased.Load())
	s.LeaseTokens = uint64(t.tokens.Load())
	s.LeaseReturned = uint64(t.returned.Load())
	s.LeaseLost = uint64(t.lost.Load())
	s.LeaseOutstanding = t.outstanding.Load()
}
