package limiter

import (
	"context"
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
