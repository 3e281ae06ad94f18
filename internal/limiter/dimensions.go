package limiter

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// A request limited on several dimensions (an API key and the caller's IP,
// a user and its tenant) carries buckets of several subjects: Bucket.Subject
// names a bucket's own. Each subject's keys carry its own hash tag.
//
// On a single node (or Sentinel) every bucket is still checked and charged
// in one script call, all or nothing: the keys of different hash tags live
// on the one node. On Redis Cluster they may live in different slots, which
// one script cannot reach; there the subjects are charged one after the
// other, in the order their first bucket appears in the request, each
// subject's buckets all or nothing, and a subject is asked only when every
// earlier one allowed. When a later subject denies, the earlier subjects'
// charges stand (they are not refunded): put the cheapest, broadest
// dimension (a per-IP floor) first, so a flood it stops writes nothing
// further.

// subjects are the digests that name a request's keys: its subject's, or,
// when a bucket names a subject of its own, every bucket's.
type subjects struct {
	// id is what the deny cache and the leases know the request by: the
	// subject's digest, or with several subjects the digest of every
	// bucket's digest, in order.
	id subjectDigest
	// many is set when a bucket names a subject of its own; each then
	// holds every bucket's digest.
	many bool
	each [MaxBuckets]subjectDigest
	// member is the request's slot id in its concurrency buckets
	// (concurrency.go); empty when it has none, or takes none (a peek).
	member string
}

// of returns the digest of bucket i's subject.
func (s *subjects) of(i int) subjectDigest {
	if s.many {
		return s.each[i]
	}
	return s.id
}

// sameSubject reports whether the first n buckets all count one subject.
func (s *subjects) sameSubject(n int) bool {
	for i := 1; i < n; i++ {
		if s.of(i) != s.of(0) {
			return false
		}
	}
	return true
}

// digests fills s with the digests of req's subjects.
func (l *Limiter) digests(req *Request, s *subjects) {
	s.id = l.hash.digest(req.Subject)
	s.many = slices.ContainsFunc(req.Buckets, func(b Bucket) bool { return b.Subject != "" })
	if !s.many {
		return
	}
	var all [MaxBuckets * len(subjectDigest{})]byte
	for i, b := range req.Buckets {
		s.each[i] = s.id
		if b.Subject != "" {
			s.each[i] = l.hash.digest(b.Subject)
		}
		copy(all[i*len(s.id):], s.each[i][:])
	}
	s.id = hmacDigest(l.hash, all[:len(req.Buckets)*len(s.id)])
}

// runSplit charges the subjects one by one (Redis Cluster; see the top of
// this file) and returns the reply for the whole request (splitBySubject).
func (l *Limiter) runSplit(ctx context.Context, sub *subjects, cost int64, bs []Bucket) (reply, error) {
	return splitBySubject(sub, bs, func(one *subjects, first int, _ []int, group []Bucket) (reply, bool, error) {
		l.st.redisCalls.Add(1)
		res, err := l.eval(ctx, scriptFor(cost, group), one, cost, group)
		if err != nil {
			return reply{}, false, fmt.Errorf("subject %d of the request: %w", first, err)
		}
		rd := replyReader{s: res}
		r, err := parseReply(&rd, len(group))
		return r, false, err
	})
}

// splitBySubject calls call once per subject of bs, in the order each
// subject's first bucket appears, with that subject's buckets (group)
// and their indexes in bs (idx), and merges the replies, whose indexes
// are the group's: the first deny, with every earlier subject's shadow
// bits, or, when all allow, the enforcing bucket with the fewest tokens
// left. A call that says stop ends the walk with its reply, whose index
// is already bs's. A subject is asked only when every earlier one
// allowed.
func splitBySubject(sub *subjects, bs []Bucket, call func(one *subjects, first int, idx []int, group []Bucket) (r reply, stop bool, err error)) (reply, error) {
	var (
		out   reply
		mask  uint32
		found bool
		done  [MaxBuckets]bool
		idx   [MaxBuckets]int
		group [MaxBuckets]Bucket
	)
	for first := range bs {
		if done[first] {
			continue
		}
		one := subjects{id: sub.of(first), member: sub.member}
		n := 0
		for i := first; i < len(bs); i++ {
			if !done[i] && sub.of(i) == one.id {
				done[i] = true
				idx[n], group[n] = i, bs[i]
				n++
			}
		}
		r, stop, err := call(&one, first, idx[:n], group[:n])
		if err != nil || stop {
			return r, err
		}
		for j := range n {
			if r.mask&(1<<j) != 0 {
				mask |= 1 << idx[j]
			}
		}
		r.index = idx[r.index]
		if !r.allowed {
			r.mask = mask
			return r, nil
		}
		if !found || preferLimiting(bs, r, out) {
			out, found = r, true
		}
	}
	out.mask = mask
	return out, nil
}

// preferLimiting reports whether allowed reply r names a more limiting
// bucket than cur: an enforcing one over a shadow one, then fewer tokens.
func preferLimiting(bs []Bucket, r, cur reply) bool {
	rs, cs := bs[r.index].Shadow, bs[cur.index].Shadow
	if rs != cs {
		return !rs
	}
	return r.remaining < cur.remaining
}

// isCluster reports whether c spreads keys over slots (Redis Cluster).
func isCluster(c redis.UniversalClient) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}

// Hasher computes subject digests: HMAC-SHA256 under a per-deployment
// key, truncated to 16 bytes. With the key secret, a hash in a log line, a
// principalId or a Redis key name cannot be turned back into the subject
// by guessing (an IP address, a short user id). It is immutable and safe
// for concurrent use.
type Hasher struct {
	// inner and outer are SHA-256's state after the key padded to a block
	// and XORed with HMAC's ipad and opad (RFC 2104): restoring them saves
	// hashing those two blocks on every digest.
	inner, outer []byte
}

// NewHasher returns the Hasher of key; a key longer than SHA-256's 64-byte
// block is hashed first, as HMAC does. A nil or empty key is valid (the
// unkeyed default).
func NewHasher(key []byte) *Hasher {
	if len(key) > sha256.BlockSize {
		sum := sha256.Sum256(key)
		key = sum[:]
	}
	var ipad, opad [sha256.BlockSize]byte
	copy(ipad[:], key)
	copy(opad[:], key)
	for i := range ipad {
		ipad[i] ^= 0x36
		opad[i] ^= 0x5c
	}
	state := func(pad []byte) []byte {
		d := sha256.New()
		d.Write(pad)
		b, err := d.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil { // crypto/sha256 always can
			panic(err)
		}
		return b
	}
	return &Hasher{inner: state(ipad[:]), outer: state(opad[:])}
}

// SubjectHash returns the hex form of subject's digest, 32 lowercase hex
// characters: what names its Redis keys.
func (h *Hasher) SubjectHash(subject string) string {
	var b [32]byte
	appendSubjectHash(b[:0], h.digest(subject))
	return string(b[:])
}

// digest returns HMAC-SHA256(key, subject)[:16] without allocating,
// whatever the subject's length: []byte(subject) would copy a long subject
// to the heap first, and crypto/hmac allocates its two hashes per call.
func (h *Hasher) digest(subject string) subjectDigest { return hmacDigest(h, subject) }

// hmacDigest is digest of a string or of bytes (several subjects' digests,
// Limiter.digests), neither converted to the other: a conversion copies.
func hmacDigest[T ~string | ~[]byte](h *Hasher, subject T) subjectDigest {
	var (
		sd  subjectDigest
		sum [sha256.Size]byte
		buf [256]byte
	)
	d := sha256.New()
	u := d.(encoding.BinaryUnmarshaler)
	_ = u.UnmarshalBinary(h.inner) // a state MarshalBinary made
	for s := subject; len(s) > 0; {
		n := copy(buf[:], s)
		d.Write(buf[:n])
		s = s[n:]
	}
	inner := d.Sum(sum[:0])
	_ = u.UnmarshalBinary(h.outer)
	d.Write(inner)
	copy(sd[:], d.Sum(sum[:0]))
	return sd
}

// appendSubjectHash appends the hex form of sd (SubjectHash) to dst.
func appendSubjectHash(dst []byte, sd subjectDigest) []byte {
	return hex.AppendEncode(dst, sd[:])
}
