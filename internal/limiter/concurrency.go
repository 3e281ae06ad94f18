package limiter

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A concurrency bucket (Bucket.Concurrency) limits requests in flight: the
// script checks it with the request's other buckets, all or nothing, and an
// allowed request takes one of its Limit slots (bucket.lua, "In flight").
// The slot is named by an id this Limiter draws per request, so a call
// go-redis sends again after a lost reply finds its own slot rather than
// taking a second. Release frees the slots; a slot never released frees
// itself when its TTL (the bucket's Period) ends, so a crash costs
// under-admission for at most the TTL, never over-admission.

// Slots are the in-flight slots one allowed request holds: one per
// concurrency bucket that had room (a shadow bucket without room gives
// none). The zero value holds none. (A pointer inside keeps Decision
// comparable.)
type Slots struct{ h *slotSet }

type slotSet struct {
	member string
	keys   []string
}

// Held reports whether s holds a slot.
func (s Slots) Held() bool { return s.h != nil && len(s.h.keys) > 0 }

// Equal reports whether s and o are the same slots (go-cmp uses it).
func (s Slots) Equal(o Slots) bool { return s.h == o.h }

// Count is the number of slots s holds.
func (s Slots) Count() int {
	if s.h == nil {
		return 0
	}
	return len(s.h.keys)
}

// Token is s as text, for a caller that releases in another process or
// call (the check API's release): "s1.<slot id>.<keys, base64url>"; ""
// for no slots. It names Redis keys and the slot id; only the id, 128
// random bits, lets anyone free the slots.
func (s Slots) Token() string {
	if !s.Held() {
		return ""
	}
	return "s1." + s.h.member + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Join(s.h.keys, "\n")))
}

// ErrBadToken wraps a slot token ParseToken cannot read.
var ErrBadToken = errors.New("not a slot token of this deployment")

// ParseToken reads a Slots.Token of this Limiter's: its keys must be
// concurrency keys under its prefix, at most MaxBuckets of them.
func (l *Limiter) ParseToken(token string) (Slots, error) {
	rest, ok := strings.CutPrefix(token, "s1.")
	member, enc, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || len(member) != 32 || strings.Trim(member, "0123456789abcdef") != "" {
		return Slots{}, ErrBadToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return Slots{}, ErrBadToken
	}
	keys := strings.Split(string(raw), "\n")
	if len(keys) > MaxBuckets {
		return Slots{}, ErrBadToken
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, l.prefix+"{") || !strings.HasSuffix(k, ":c") || len(k) > 512 {
			return Slots{}, ErrBadToken
		}
	}
	return Slots{&slotSet{member: member, keys: keys}}, nil
}

// slotID draws a request's slot id: 128 random bits, as 32 hex digits.
// math/rand/v2's global source is a per-goroutine ChaCha8 stream seeded from
// the OS: unpredictable enough that no caller can guess another's slot, and
// free of locks and system calls.
func slotID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// hasConcurrency reports whether bs holds a concurrency bucket.
func hasConcurrency(bs []Bucket) bool {
	return slices.ContainsFunc(bs, func(b Bucket) bool { return b.Concurrency })
}

// holding fills d.Slots with the keys of the concurrency buckets an
// allowed request took a slot in. A denied request holds none; on Redis
// Cluster, where a request spanning subjects is charged subject by subject
// (dimensions.go), an earlier subject's slots are freed at once.
func (l *Limiter) holding(ctx context.Context, d *Decision, sub *subjects, bs []Bucket) {
	c := buildCalls.Get().(*call)
	defer buildCalls.Put(c)
	c.build(l.prefix, sub, 0, bs)
	var keys []string
	for i := range bs {
		if !bs[i].Concurrency || d.Allowed && d.ShadowDenied&(1<<i) != 0 {
			continue
		}
		keys = append(keys, c.keys[i])
	}
	if len(keys) == 0 {
		return
	}
	s := Slots{&slotSet{member: sub.member, keys: keys}}
	if d.Allowed {
		d.Slots = s
		l.st.slots.Add(uint64(len(keys)))
		return
	}
	if l.cluster && sub.many {
		_ = l.release(ctx, s)
	}
}

// Release frees the in-flight slots of an allowed request: call it when
// the request's work ends (the middleware does, panics included). It is
// idempotent, and a slot its TTL already freed is left alone. On an error
// the slots free themselves at their TTL.
func (l *Limiter) Release(ctx context.Context, s Slots) error {
	if !s.Held() {
		return nil
	}
	l.st.released.Add(uint64(len(s.h.keys)))
	if err := l.release(ctx, s); err != nil {
		l.st.releaseErrors.Add(1)
		return err
	}
	return nil
}

// release sends one ZREM per slot, pipelined (the keys may live in
// different cluster slots), within the Limiter's timeout: one Redis call
// in Stats.RedisCalls.
func (l *Limiter) release(ctx context.Context, s Slots) error {
	l.st.redisCalls.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	if len(s.h.keys) == 1 {
		// The common case: one rule, one command, no pipeline.
		if err := l.rdb.ZRem(ctx, s.h.keys[0], s.h.member).Err(); err != nil {
			return fmt.Errorf("limiter: release a slot: %w", err)
		}
		return nil
	}
	p := l.rdb.Pipeline()
	for _, k := range s.h.keys {
		p.ZRem(ctx, k, s.h.member)
	}
	_, err := p.Exec(ctx)
	if err != nil {
		return fmt.Errorf("limiter: release %d slots: %w", len(s.h.keys), err)
	}
	return nil
}

// errNoSlots is what InFlight reports for a bucket that is no concurrency
// bucket.
var errNoSlots = errors.New("not a concurrency bucket")

//go:embed inflight.lua
var inflightLua string

// inflightScript counts a concurrency bucket's live slots by Redis TIME.
var inflightScript = redis.NewScript(inflightLua)

// InFlight returns the slots of concurrency bucket b that subject holds now
// (expired ones not counted): what the subject view and the checker read.
// It may exceed b.Limit after the limit was lowered.
func (l *Limiter) InFlight(ctx context.Context, subject string, b Bucket) (int64, error) {
	if !b.Concurrency {
		return 0, fmt.Errorf("%w: bucket %q: %w", ErrInvalidRequest, b.ID, errNoSlots)
	}
	c := buildCalls.Get().(*call)
	defer buildCalls.Put(c)
	c.build(l.prefix, &subjects{id: l.hash.digest(subject)}, 0, []Bucket{b})
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	n, err := inflightScript.Run(ctx, l.rdb, c.keys[:1]).Int64()
	if err != nil {
		return 0, fmt.Errorf("limiter: in flight of subject %s: %w", l.SubjectHash(subject), err)
	}
	return n, nil
}
