package limiter

import (
	"context"
	"errors"
	"fmt"

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

// dimCall is the per-bucket digests of a request whose buckets name their
// own subjects.
type dimCall struct {
	sds [MaxBuckets]subjectDigest
	// all stands for the whole request in the deny cache: the digest of
	// every bucket's subject digest, in order.
	all subjectDigest
}

// ownSubjects reports whether a bucket of bs names a subject of its own.
func ownSubjects(bs []Bucket) bool {
	for i := range bs {
		if bs[i].Subject != "" {
			return true
		}
	}
	return false
}

// dims returns the digests of req's buckets; nil when none names its own
// subject.
func (l *Limiter) dims(req *Request) *dimCall {
	if !ownSubjects(req.Buckets) {
		return nil
	}
	d := &dimCall{}
	main := l.hash.digest(req.Subject)
	buf := make([]byte, 0, len(req.Buckets)*len(main))
	for i, b := range req.Buckets {
		d.sds[i] = main
		if b.Subject != "" {
			d.sds[i] = l.hash.digest(b.Subject)
		}
		buf = append(buf, d.sds[i][:]...)
	}
	d.all = l.hash.digest(string(buf))
	return d
}

// run evaluates the script for bs and parses its reply: once, over every
// bucket, unless the buckets span subjects on a Redis Cluster (runSplit).
func (l *Limiter) run(ctx context.Context, sd subjectDigest, d *dimCall, cost int64, bs []Bucket) (reply, error) {
	var (
		res string
		err error
	)
	switch {
	case d == nil:
		res, err = l.eval(ctx, sd, cost, bs)
	case l.cluster && !sameSubject(d, len(bs)):
		return l.runSplit(ctx, d, cost, bs)
	default:
		res, err = l.evalDims(ctx, d, cost, bs)
	}
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return reply{}, err
	}
	rd := replyReader{s: res}
	r, perr := parseReply(&rd, len(bs))
	if perr != nil {
		return reply{}, perr
	}
	return r, err
}

func sameSubject(d *dimCall, n int) bool {
	for i := 1; i < n; i++ {
		if d.sds[i] != d.sds[0] {
			return false
		}
	}
	return true
}

// evalDims runs the script once over buckets of several subjects: their
// keys differ only in the hash tag.
func (l *Limiter) evalDims(ctx context.Context, d *dimCall, cost int64, bs []Bucket) (string, error) {
	c := getCall()
	defer putCall(c)
	c.build(l.prefix, d.sds[0], cost, bs)
	for i := range bs {
		if d.sds[i] != d.sds[0] {
			key := appendSubjectHash(append([]byte(l.prefix), '{'), d.sds[i])
			c.keys[i] = string(appendKeyID(append(key, "}:"...), bs[i]))
		}
	}
	c.ctx.arm(ctx, l.timeout)
	return l.script(c, cost, bs)
}

// runSplit charges the subjects one by one (Redis Cluster; see the top of
// this file) and returns the reply for the whole request: the first deny,
// with every earlier subject's shadow bits, or, when all allow, the
// enforcing bucket with the fewest tokens left.
func (l *Limiter) runSplit(ctx context.Context, d *dimCall, cost int64, bs []Bucket) (reply, error) {
	var (
		out   reply
		mask  uint16
		found bool
		done  [MaxBuckets]bool
		idx   [MaxBuckets]int
		group [MaxBuckets]Bucket
	)
	for first := range bs {
		if done[first] {
			continue
		}
		n := 0
		for i := first; i < len(bs); i++ {
			if !done[i] && d.sds[i] == d.sds[first] {
				done[i] = true
				idx[n], group[n] = i, bs[i]
				n++
			}
		}
		if first > 0 {
			l.st.redisCalls.Add(1)
		}
		res, err := l.eval(ctx, d.sds[first], cost, group[:n])
		if err != nil {
			return reply{}, fmt.Errorf("subject %d of the request: %w", first, err)
		}
		rd := replyReader{s: res}
		r, err := parseReply(&rd, n)
		if err != nil {
			return reply{}, err
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
