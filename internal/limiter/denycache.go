package limiter

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// denyCache remembers recent denials so a repeat offender is denied locally
// until its retry-after, without a Redis call. Entries are keyed by a hash
// of (subject, buckets, cost) and checked against the full request, so a
// hash collision can never deny another request. Bounded: lookups only
// peek (a read lock, as most of them miss), so the oldest entries are
// evicted first; an entry lives at most its retry-after anyway.
type denyCache struct {
	seed maphash.Seed
	lru  *lru.Cache[uint64, *denyEntry]
}

// denyEntry is one cached denial; immutable once added.
type denyEntry struct {
	subject string
	buckets []Bucket
	cost    int64
	d       Decision
	sent    int64 // Limiter.now() when the denied call was sent
	until   int64 // Limiter.now() when the entry stops denying
}

func newDenyCache(size int) *denyCache {
	c, err := lru.New[uint64, *denyEntry](size)
	if err != nil { // only for size <= 0, which New never passes
		panic(err)
	}
	return &denyCache{seed: maphash.MakeSeed(), lru: c}
}

// key hashes what a denial depends on: the subject, every bucket's
// identity and parameters, and the cost.
func (c *denyCache) key(subject string, bs []Bucket, cost int64) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(subject)
	var n [8 * 5]byte
	binary.LittleEndian.PutUint64(n[:], uint64(cost))
	h.Write(n[:8])
	for _, b := range bs {
		h.WriteString(b.ID)
		h.WriteByte(0)
		binary.LittleEndian.PutUint64(n[0:], uint64(b.Limit))
		binary.LittleEndian.PutUint64(n[8:], uint64(b.Period))
		binary.LittleEndian.PutUint64(n[16:], uint64(b.Burst))
		flags := uint64(0)
		if b.Shadow {
			flags |= 1
		}
		if b.FailClosed {
			flags |= 2
		}
		binary.LittleEndian.PutUint64(n[24:], flags)
		h.Write(n[:32])
	}
	return h.Sum64()
}

// get returns the cached denial for r at now, if any.
func (c *denyCache) get(k uint64, subject string, bs []Bucket, cost int64, now int64) (Decision, bool) {
	// Peek takes the read lock only: most lookups miss, from many goroutines.
	e, ok := c.lru.Peek(k)
	if !ok {
		return Decision{}, false
	}
	if now >= e.until {
		c.lru.Remove(k)
		return Decision{}, false
	}
	if e.cost != cost || e.subject != subject || !slices.Equal(e.buckets, bs) {
		return Decision{}, false
	}
	d := e.d
	d.Cached = true
	// What is left of Redis's retry-after and reset, in whole ms rounded up.
	gone := time.Duration(now - e.sent)
	d.RetryAfter = ceilMs(d.RetryAfter - gone)
	d.Reset = ceilMs(d.Reset - gone)
	return d, true
}

// add caches a denial sent at sent, valid until until.
func (c *denyCache) add(k uint64, subject string, bs []Bucket, cost int64, d Decision, sent, until int64) {
	if until <= sent {
		return
	}
	c.lru.Add(k, &denyEntry{
		subject: subject,
		buckets: slices.Clone(bs),
		cost:    cost,
		d:       d,
		sent:    sent,
		until:   until,
	})
}

// dropSubject removes every entry of subject (after a Reset).
func (c *denyCache) dropSubject(subject string) {
	for _, k := range c.lru.Keys() {
		if e, ok := c.lru.Peek(k); ok && e.subject == subject {
			c.lru.Remove(k)
		}
	}
}

// ceilMs rounds d up to whole milliseconds, at least 0.
func ceilMs(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
