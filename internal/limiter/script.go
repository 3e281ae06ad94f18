package limiter

import (
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed bucket.lua
var bucketLua string

// bucketScript is the one script; redis.Script runs it with EVALSHA and
// falls back to EVAL (which also loads it) on NOSCRIPT.
var bucketScript = redis.NewScript(bucketLua)

// reply is the script's answer for the limiting bucket (see bucket.lua).
type reply struct {
	allowed   bool
	index     int   // 0-based
	remaining int64 // tokens
	reset     int64 // ms
	retry     int64 // ms; -1 = never
	mask      uint16
}

// errBadReply wraps a script reply the Limiter cannot parse.
var errBadReply = errors.New("unexpected script reply")

// replyReader walks the script's space-separated integer reply without
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

// parseReply reads the head of a script reply for a request of n buckets.
// The rest (per-bucket states of a peek) stays in rd.
func parseReply(rd *replyReader, n int) (reply, error) {
	var r reply
	r.allowed = rd.next() == 1
	r.index = int(rd.next()) - 1
	r.remaining = rd.next()
	r.reset = rd.next()
	r.retry = rd.next()
	r.mask = uint16(rd.next())
	if rd.err != nil {
		return reply{}, rd.err
	}
	if r.index < 0 || r.index >= n {
		return reply{}, fmt.Errorf("%w: bucket index %d of %d", errBadReply, r.index+1, n)
	}
	return r, nil
}

// appendArgs appends the script's ARGV (see bucket.lua) to dst, each
// followed by its end offset in ends.
func appendArgs(dst []byte, ends []int, cost int64, bs []Bucket) ([]byte, []int) {
	dst = strconv.AppendInt(dst, cost, 10)
	ends = append(ends, len(dst))
	for _, b := range bs {
		dst = strconv.AppendInt(dst, b.Limit, 10)
		ends = append(ends, len(dst))
		if b.Window != NoWindow {
			// A quota's period is its window's letter, its burst its
			// anchor.
			dst = append(dst, windowUnits[b.Window])
			ends = append(ends, len(dst))
			dst = strconv.AppendInt(dst, anchorMicros(b), 10)
		} else {
			dst = strconv.AppendInt(dst, periodMicros(b.Period), 10)
			ends = append(ends, len(dst))
			dst = strconv.AppendInt(dst, b.capacity(), 10)
		}
		ends = append(ends, len(dst))
		dst = appendFlags(dst, b)
		ends = append(ends, len(dst))
	}
	return dst, ends
}

// appendKeyID appends what follows the hash tag in bucket b's key: its
// ID, and for a quota ":q", its window's letter and its anchor, so that a
// rule whose window changes counts in a fresh key (bucket.lua, "Quotas").
func appendKeyID(dst []byte, b Bucket) []byte {
	dst = append(dst, b.ID...)
	if b.Window == NoWindow {
		return dst
	}
	dst = append(dst, ':', 'q', windowUnits[b.Window])
	return strconv.AppendInt(dst, anchorMicros(b)/1000, 10)
}

// epoch2024 is the script's time origin, 2024-01-01T00:00:00Z, in
// microseconds since 1970.
const epoch2024 = 1704067200 * 1000000

// windowUnits are the script's window letters, by Window.
var windowUnits = [...]byte{NoWindow: 'r', Daily: 'd', Weekly: 'w', Monthly: 'm', Yearly: 'y'}

// anchorMicros is a quota's anchor as the script takes it: microseconds
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
// " <floor>" after it when the bucket has one (see bucket.lua).
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
