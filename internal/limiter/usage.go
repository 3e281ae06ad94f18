package limiter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
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
	// A byte of 0x80 and up is in a rune above 0x7e, or decodes as
	// utf8.RuneError (0xfffd): rejected either way.
	return len(k) > 0 && len(k) <= MaxIdempotencyKeyLen &&
		!strings.ContainsFunc(k, func(r rune) bool { return r < 0x21 || r > 0x7e })
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
	keys, args := c.keys, c.args
	script := usageScript
	var pools []*pool
	if l.global != nil && hasGlobal(buckets) {
		now := l.global.clock()
		for _, b := range buckets {
			if b.Global != "" {
				pools = append(pools, l.poolFor(sd, b, now))
			}
		}
	}
	if idempotencyKey != "" {
		// Hashed: the caller's key never reaches Redis as it is, and a
		// bucket id (a rule's UUID, "default") never looks like this.
		// Appended to a copy: c.keys belongs to the pool.
		head := l.prefix + "{" + string(appendSubjectHash(nil, sd)) + "}:"
		keys = append(keys[:len(keys):len(keys)], head+"idem:"+idemDigest(scope, idempotencyKey))
	}
	if len(pools) > 0 {
		// The pools are charged in the same call (usage_pool.lua).
		keys = keys[:len(keys):len(keys)]
		args = args[:len(args):len(args)]
		for _, p := range pools {
			keys = append(keys, p.key, p.charged)
			args = append(args, p.end.Add(time.Minute).UnixMilli())
		}
		// A copy of this call go-redis sends again after a broken
		// connection must not charge the pools twice (a refund would make
		// tokens): the call's fence, in the subject's slot.
		keys = append(keys, pools[0].key+":uf:"+strconv.FormatUint(rand.Uint64(), 36))
		args = append(args, len(pools))
		script = usageGlobalScript
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	res, err := script.Run(ctx, l.rdb, keys, args...).Text()
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
	return u, nil
}

// idemDigest names an idempotency key in Redis: the first 16 bytes of
// SHA-256(scope NUL key), in hex.
func idemDigest(scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + key))
	return hex.EncodeToString(sum[:16])
}
