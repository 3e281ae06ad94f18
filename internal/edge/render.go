package edge

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/headers"
)

// Context is the authorizer context of res, one rendering of the result
// (Fields is the other): strings, numbers and booleans only, every key
// always present so gateway mappings never miss one, the keys of the
// dialects d beyond them (headers.KeyResetAt, from now), and the verified claims
// (res.Context) under their own keys, never over these.
func Context(res *authorizer.Result, d headers.Dialects, now time.Time) map[string]any {
	var buf [96]byte
	v := make(map[string]any, 8+len(res.Context))
	v[headers.KeyLimit] = res.Limit
	v[headers.KeyRemaining] = res.Remaining
	v[headers.KeyReset] = authorizer.Seconds(res.Reset)
	v[headers.KeyRetryAfter] = authorizer.Seconds(res.RetryAfter)
	v[headers.KeyRateLimitPolicy] = res.Policy()
	v[headers.KeyRateLimit] = string(res.AppendRateLimit(buf[:0]))
	v[headers.KeyRule] = res.Rule
	v[headers.KeyFailOpen] = res.FailOpen
	for k, x := range res.Context {
		if _, taken := v[k]; !taken {
			v[k] = x
		}
	}
	if d&headers.Legacy != 0 {
		v[headers.KeyResetAt] = resetAt(now, res)
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
			case headers.KeyRateLimitPolicy:
				v = res.Policy()
			case headers.KeyRateLimit:
				v = string(res.AppendRateLimit(buf[:0]))
			case headers.KeyLimit:
				v = strconv.FormatInt(res.Limit, 10)
			case headers.KeyRemaining:
				v = strconv.FormatInt(res.Remaining, 10)
			case headers.KeyReset:
				v = strconv.FormatInt(authorizer.Seconds(res.Reset), 10)
			case headers.KeyResetAt:
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
