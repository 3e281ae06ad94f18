package edge

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/headers"
)

// Context keys of an authorizer answer, readable in the gateway as
// $context.authorizer.<key> (REST) or $request.context.authorizer.<key>
// (HTTP): the gateway responses map them into the 429's fields.
const (
	KeyLimit           = headers.KeyLimit           // number: tokens per period of the limiting rule
	KeyRemaining       = headers.KeyRemaining       // number: tokens left
	KeyReset           = headers.KeyReset           // number: seconds until the bucket is full, rounded up
	KeyRetryAfter      = headers.KeyRetryAfter      // number: seconds until a retry can pass, rounded up; 0 when allowed
	KeyRateLimitPolicy = headers.KeyRateLimitPolicy // string: RateLimit-Policy field value
	KeyRateLimit       = headers.KeyRateLimit       // string: RateLimit field value
	KeyRule            = "rule"                     // string: id of the limiting rule, "" when none applied
	KeyFailOpen        = "failOpen"                 // boolean: Redis failed and the request was let through
	// KeyResetAt is only present with the legacy header dialect
	// (RATELIMIT_HEADERS): X-RateLimit-Reset's Unix time.
	KeyResetAt = headers.KeyResetAt // number: Unix time in seconds when the bucket is full
)

// Context is the authorizer context of res, one rendering of the result
// (Fields is the other): strings, numbers and booleans only, every key
// always present so gateway mappings never miss one, the keys of the
// dialects d beyond them (KeyResetAt, from now), and the verified claims
// (res.Context) under their own keys, never over these.
func Context(res *authorizer.Result, d headers.Dialects, now time.Time) map[string]any {
	var buf [96]byte
	v := make(map[string]any, 8+len(res.Context))
	v[KeyLimit] = res.Limit
	v[KeyRemaining] = res.Remaining
	v[KeyReset] = authorizer.Seconds(res.Reset)
	v[KeyRetryAfter] = authorizer.Seconds(res.RetryAfter)
	v[KeyRateLimitPolicy] = res.Policy()
	v[KeyRateLimit] = string(res.AppendRateLimit(buf[:0]))
	v[KeyRule] = res.Rule
	v[KeyFailOpen] = res.FailOpen
	for k, x := range res.Context {
		if _, taken := v[k]; !taken {
			v[k] = x
		}
	}
	if d&headers.Legacy != 0 {
		v[KeyResetAt] = resetAt(now, res)
	}
	return v
}

// resetAt is the Unix time in seconds, rounded up, when res's bucket is
// full; now when no rule applied.
func resetAt(now time.Time, res *authorizer.Result) int64 {
	return now.Add(res.Reset).Add(time.Second - 1).Unix()
}

// SetFields sets in hdr the rate-limit fields of the dialects d for res
// (nothing when no rule applied), and Retry-After (whole seconds, rounded
// up) when res denies: what the gateway responses send from Context, the
// same values formatted from the result itself.
func SetFields(hdr http.Header, res *authorizer.Result, d headers.Dialects, now time.Time) {
	if res.Effective != nil {
		var buf [96]byte
		for _, f := range d.Fields() {
			var v string
			switch f.Key {
			case KeyRateLimitPolicy:
				v = res.Policy()
			case KeyRateLimit:
				v = string(res.AppendRateLimit(buf[:0]))
			case KeyLimit:
				v = strconv.FormatInt(res.Limit, 10)
			case KeyRemaining:
				v = strconv.FormatInt(res.Remaining, 10)
			case KeyReset:
				v = strconv.FormatInt(authorizer.Seconds(res.Reset), 10)
			case KeyResetAt:
				v = strconv.FormatInt(resetAt(now, res), 10)
			default:
				continue
			}
			// Assigned, not Set: Set would canonicalise RateLimit to
			// Ratelimit.
			hdr[f.Name] = []string{v}
		}
	}
	if !res.Allowed {
		hdr.Set("Retry-After", strconv.FormatInt(authorizer.Seconds(res.RetryAfter), 10))
	}
}
