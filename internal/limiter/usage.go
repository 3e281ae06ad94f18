package limiter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// IdempotencyTTL is how long Charge remembers an idempotency key: a retry
// of a usage report within it counts once.
const IdempotencyTTL = 24 * time.Hour

// MaxIdempotencyKeyLen bounds an idempotency key, in bytes.
const MaxIdempotencyKeyLen = 255

// ErrBadIdempotencyKey is wrapped by Charge's error for a key that is too
// long or holds anything but printable ASCII without spaces.
var ErrBadIdempotencyKey = errors.New("limiter: idempotency key must be 1-255 printable ASCII characters without spaces")

// ValidIdempotencyKey reports whether k may be used as an idempotency key:
// 1 to MaxIdempotencyKeyLen bytes of printable ASCII (0x21-0x7e).
func ValidIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > MaxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// Usage is the outcome of Charge.
type Usage struct {
	// Duplicate is set when the idempotency key had been seen within
	// IdempotencyTTL: nothing was charged, and Buckets are the states now.
	Duplicate bool
	// Buckets are the buckets' states after the report, in the order
	// given. Remaining is negative when the bucket is in debt; Reset is
	// the time until it is full again (a quota: until its window ends).
	Buckets []UsageState
}

// UsageState is one bucket after a usage report.
type UsageState struct {
	// Remaining is the whole tokens in the bucket, negative in debt (at
	// most one burst, or a quota's limit, below zero).
	Remaining int64
	// Reset is the time until the bucket is full again.
	Reset time.Duration
}

// Charge reports usage known only after a response: it charges cost
// tokens to every bucket of subject (shadow buckets too; blocked ones,
// Limit 0, are left alone) with no admission decision, in one atomic
// script call. A bucket may go into debt, at most one burst (a quota: its
// used at most twice its limit; a larger charge is clamped there): later
// requests are denied, with the RetryAfter the debt takes to refill,
// until it has. A negative cost refunds, never above full. cost 0 charges
// nothing and reports the states.
//
// idempotencyKey, when not empty, names the report: the first Charge with
// it is charged and the key kept for IdempotencyTTL (in the same call, in
// the subject's cluster slot), and every later one within that time
// charges nothing and reports Duplicate. It must pass
// ValidIdempotencyKey, else the error wraps ErrBadIdempotencyKey. Keys
// are per subject, api and route: scope names the api and route (any
// string; it is hashed with the key).
//
// Charge skips the deny cache and the breaker; a refund drops this
// process's cached denials of subject (other processes keep theirs until
// they expire, at most their DenyCacheMaxAge: 1s by default).
func (l *Limiter) Charge(ctx context.Context, subject string, buckets []Bucket, cost int64, scope, idempotencyKey string) (Usage, error) {
	if err := validate(buckets, 0, true); err != nil {
		return Usage{}, err
	}
	if idempotencyKey != "" && !ValidIdempotencyKey(idempotencyKey) {
		return Usage{}, ErrBadIdempotencyKey
	}
	sd := l.hash.digest(subject)
	c := buildCalls.Get().(*call)
	defer buildCalls.Put(c)
	c.build(l.prefix, &subjects{id: sd}, cost, buckets)
	keys := c.keys
	if idempotencyKey != "" {
		// Hashed: the caller's key never reaches Redis as it is, and a
		// bucket id (a rule's UUID, "default") never looks like this.
		// Appended to a copy: c.keys belongs to the pool.
		head := l.prefix + "{" + string(appendSubjectHash(nil, sd)) + "}:"
		keys = append(keys[:len(keys):len(keys)], head+"idem:"+idemDigest(scope, idempotencyKey))
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	res, err := usageScript.Run(ctx, l.rdb, keys, c.args...).Text()
	if err != nil {
		return Usage{}, fmt.Errorf("limiter: usage of subject %s: %w", l.SubjectHash(subject), err)
	}
	if cost < 0 && l.cache != nil {
		l.cache.dropSubject(sd)
	}
	rd := replyReader{s: res}
	if len(rd.s) < 2 || rd.s[:2] != "u " {
		return Usage{}, fmt.Errorf("limiter: usage of subject %s: %w: %q", l.SubjectHash(subject), errBadReply, res)
	}
	rd.s = rd.s[2:]
	u := Usage{Duplicate: rd.next() == 1, Buckets: make([]UsageState, len(buckets))}
	for i := range u.Buckets {
		u.Buckets[i] = UsageState{Remaining: rd.next(), Reset: ms(rd.next())}
	}
	if rd.err != nil {
		return Usage{}, fmt.Errorf("limiter: usage of subject %s: %w", l.SubjectHash(subject), rd.err)
	}
	if !u.Duplicate && cost != 0 && l.global != nil && hasGlobal(buckets) {
		if err := l.chargePools(ctx, sd, buckets, cost); err != nil {
			return u, fmt.Errorf("limiter: usage of subject %s: %w", l.SubjectHash(subject), err)
		}
	}
	return u, nil
}

// chargePools applies a usage report to the Region's pools of the global
// buckets: a charge spends from the pool, into debt (a negative pool,
// which the next block fills first), a refund puts tokens back. It follows
// the usage script, not inside it: a process that dies between the two
// leaves the pool short of one report's cost.
func (l *Limiter) chargePools(ctx context.Context, sd subjectDigest, buckets []Bucket, cost int64) error {
	now := time.Now()
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	pipe := l.rdb.Pipeline()
	for _, b := range buckets {
		if b.Global == "" {
			continue
		}
		p := l.poolFor(sd, b, now)
		pipe.IncrBy(ctx, p.key, -cost)
		pipe.PExpireAt(ctx, p.key, p.end.Add(time.Minute))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("charge pools: %w", err)
	}
	return nil
}

// idemDigest names an idempotency key in Redis: the first 16 bytes of
// SHA-256(scope NUL key), in hex.
func idemDigest(scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + key))
	return hex.EncodeToString(sum[:16])
}
