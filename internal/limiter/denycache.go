package limiter

import (
	"encoding/binary"
	"hash/maphash"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// denyCache remembers recent denials so a repeat offender is denied locally
// until its retry-after, without a Redis call. Bounded in entries and in
// bytes: an entry holds fixed-size digests and the decision, never the
// subject or the buckets, so a 10 KB subject costs what a 10-byte one does
// (denyEntryBytes). Lookups only peek (a read lock, as most of them miss),
// so the oldest entries are evicted first; an entry lives at most its
// retry-after anyway, and at most the Limiter's DenyCacheMaxAge.
type denyCache struct {
	seed maphash.Seed
	lru  *lru.Cache[denyKey, denyEntry]
}

// denyKey names what a denial depends on, in 24 bytes whatever the
// subject's length. subject is the first 16 bytes of SHA-256(subject), the
// digest the Redis keys are named by (SubjectHash): two subjects that share
// it share their buckets in Redis too, so a subject can never be denied by
// another's entry. request is a seeded 64-bit hash of the subject digest,
// the cost and every bucket's identity and parameters: for one subject, two
// different requests share a key with probability 2^-64 (the seed is
// random per process and the buckets come from the rules, not the caller),
// where a full digest would cost a second SHA-256 per call.
type denyKey struct {
	subject subjectDigest
	request uint64
}

// denyEntry is one cached denial; immutable once added.
type denyEntry struct {
	d     Decision
	sent  int64 // Limiter.now() when the denied call was sent
	until int64 // Limiter.now() when the entry stops denying
}

// denyEntryBytes bounds the heap one entry holds, measured by
// TestDenyCacheBytesPerEntry: the LRU's list element (links, key, value,
// expiry: 160 B) and the key's share of the LRU's map (32 B per slot, up to
// half of them empty after the map grows).
const denyEntryBytes = 300

func newDenyCache(size int) *denyCache {
	c, err := lru.New[denyKey, denyEntry](size)
	if err != nil { // only for size <= 0, which New never passes
		panic(err)
	}
	return &denyCache{seed: maphash.MakeSeed(), lru: c}
}

// key returns the cache key of (the subject of digest sd, bs, cost). It
// does not allocate.
func (c *denyCache) key(sd subjectDigest, bs []Bucket, cost int64) denyKey {
	return denyKey{subject: sd, request: requestHash(c.seed, sd, bs, cost, true)}
}

// requestHash is a seeded hash of the subject digest sd, the cost and the
// id of each bucket of bs, with params every bucket's parameters too. It
// does not allocate.
func requestHash(seed maphash.Seed, sd subjectDigest, bs []Bucket, cost int64, params bool) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.Write(sd[:])
	var n [8 * 4]byte
	binary.LittleEndian.PutUint64(n[:], uint64(cost))
	h.Write(n[:8])
	for _, b := range bs {
		// The id's length first, so no two bucket lists encode alike.
		binary.LittleEndian.PutUint64(n[:], uint64(len(b.ID)))
		h.Write(n[:8])
		h.WriteString(b.ID)
		if !params {
			continue
		}
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
		if b.Window != NoWindow || b.MinRemaining != 0 {
			// A quota's window and anchor, and the floor, decide too.
			flags |= uint64(b.Window)<<8 | 4
			binary.LittleEndian.PutUint64(n[0:], uint64(b.MinRemaining))
			binary.LittleEndian.PutUint64(n[8:], uint64(b.Anchor.UnixMicro()))
			h.Write(n[:16])
			binary.LittleEndian.PutUint64(n[0:], uint64(b.Limit))
			binary.LittleEndian.PutUint64(n[8:], uint64(b.Period))
		}
		binary.LittleEndian.PutUint64(n[24:], flags)
		h.Write(n[:])
	}
	return h.Sum64()
}

// get returns the cached denial under k at now, if any.
func (c *denyCache) get(k denyKey, now int64) (Decision, bool) {
	// Peek takes the read lock only: most lookups miss, from many goroutines.
	e, ok := c.lru.Peek(k)
	if !ok {
		return Decision{}, false
	}
	if now >= e.until {
		c.lru.Remove(k)
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

// add caches a denial under k, sent at sent, valid until until.
func (c *denyCache) add(k denyKey, d Decision, sent, until int64) {
	if until <= sent {
		return
	}
	c.lru.Add(k, denyEntry{d: d, sent: sent, until: until})
}

// dropSubject removes every entry of subject (after a Reset). It walks the
// cache: a Reset is an admin call, rare beside Allow.
func (c *denyCache) dropSubject(sd subjectDigest) {
	for _, k := range c.lru.Keys() {
		if k.subject == sd {
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
