// Package headers names the rate-limit response fields Sluice can send, in
// the dialects HTTP clients read, and where each takes its value: a key of
// the authorizer context (the API Gateway gateway response maps
// context.authorizer.<key> into the 429; sluice local and the check API copy
// the same values). RATELIMIT_HEADERS, and the construct's
// AuthorizerProps.Headers, choose the dialects with [Parse].
//
// Retry-After is not a dialect: it is sent on every 429, whatever is chosen.
package headers

import (
	"errors"
	"fmt"
	"strings"
)

// Dialects is a set of header dialects: an OR of the constants below.
type Dialects uint8

// The dialects. Any may be combined with any other: no two write the same
// field.
const (
	// Draft11 is RateLimit-Policy and RateLimit as Structured Field lists
	// of named policies, the syntax of draft-ietf-httpapi-ratelimit-headers
	// since -08 and in -09, -10 and -11 (the current draft):
	//
	//	RateLimit-Policy: "<rule>";q=<burst>;w=<period in seconds>
	//	RateLimit: "<rule>";r=<remaining>;t=<seconds until full>
	Draft11 Dialects = 1 << iota
	// Draft6 is the three fields of draft-ietf-httpapi-ratelimit-headers
	// -00 to -06, which many gateways (Kong, Traefik) and client libraries
	// still send and read, each a bare integer:
	//
	//	RateLimit-Limit: <limit per period>
	//	RateLimit-Remaining: <remaining>
	//	RateLimit-Reset: <seconds until full>
	//
	// Draft -06 also had a RateLimit-Policy, of another syntax than Draft11's
	// field of that name; it is left out so the two dialects combine.
	Draft6
	// Legacy is the X- fields that predate the drafts (GitHub's, and most
	// rate-limit middleware's):
	//
	//	X-RateLimit-Limit: <limit per period>
	//	X-RateLimit-Remaining: <remaining>
	//	X-RateLimit-Reset: <Unix time in seconds when the bucket is full>
	//
	// The reset is a point in time, as GitHub, Laravel and express-rate-limit
	// send it, read from the authorizer's clock.
	Legacy
)

// Default is what an unset RATELIMIT_HEADERS selects: the Draft11 fields,
// which is all Sluice sent before the setting existed.
const Default = Draft11

// dialects lists each dialect's name, in the order String writes them.
var dialects = []struct {
	name string
	d    Dialects
}{{"draft11", Draft11}, {"draft6", Draft6}, {"legacy", Legacy}}

// Names is the dialect names Parse accepts, for usage and error messages.
const Names = "draft11, draft6, legacy"

// Parse reads a comma-separated list of dialect names (case-insensitive,
// spaces around a name ignored), such as "draft11,legacy". An empty or
// all-blank list is Default. An unknown name is an error naming it.
func Parse(s string) (Dialects, error) {
	var d Dialects
	var errs []error
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		found := false
		for _, x := range dialects {
			if strings.EqualFold(name, x.name) {
				d, found = d|x.d, true
				break
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("unknown dialect %q: want a comma-separated list of %s", name, Names))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if d == 0 {
		return Default, nil
	}
	return d, nil
}

// String is the comma-separated names of d, as Parse reads them.
func (d Dialects) String() string {
	var names []string
	for _, x := range dialects {
		if d&x.d != 0 {
			names = append(names, x.name)
		}
	}
	return strings.Join(names, ",")
}

// Keys of the authorizer context, declared here alone: every answer
// carries them (edge.Context writes them, always all, KeyResetAt only with
// Legacy), the gateway reads them as $context.authorizer.<key> (REST) or
// $request.context.authorizer.<key> (HTTP) into the 429's fields, and the
// fields below take their values from them.
const (
	KeyLimit           = "limit"           // number: tokens per period of the limiting rule
	KeyRemaining       = "remaining"       // number: tokens left
	KeyReset           = "reset"           // number: seconds until the bucket is full, rounded up
	KeyResetAt         = "resetAt"         // number: Unix time in seconds when the bucket is full; only with Legacy
	KeyRetryAfter      = "retryAfter"      // number: seconds until a retry can pass, rounded up; 0 when allowed
	KeyRateLimitPolicy = "rateLimitPolicy" // string: Draft11 RateLimit-Policy value
	KeyRateLimit       = "rateLimit"       // string: Draft11 RateLimit value
	KeyRule            = "rule"            // string: id of the limiting rule, "" when none applied
	KeyFailOpen        = "failOpen"        // boolean: Redis failed and the request was let through
)

// Field is one response field and the authorizer context key holding its
// value.
type Field struct {
	// Name is the field name as it is written, such as "RateLimit-Policy".
	Name string
	// Key is the authorizer context key of its value, such as
	// "rateLimitPolicy".
	Key string
}

// RetryAfter is the field every 429 carries.
var RetryAfter = Field{"Retry-After", KeyRetryAfter}

// Fields returns the fields of the dialects in d, in the order of the
// constants, without RetryAfter.
func (d Dialects) Fields() []Field {
	var fs []Field
	if d&Draft11 != 0 {
		fs = append(fs, Field{"RateLimit-Policy", KeyRateLimitPolicy}, Field{"RateLimit", KeyRateLimit})
	}
	if d&Draft6 != 0 {
		fs = append(fs, Field{"RateLimit-Limit", KeyLimit}, Field{"RateLimit-Remaining", KeyRemaining},
			Field{"RateLimit-Reset", KeyReset})
	}
	if d&Legacy != 0 {
		fs = append(fs, Field{"X-RateLimit-Limit", KeyLimit}, Field{"X-RateLimit-Remaining", KeyRemaining},
			Field{"X-RateLimit-Reset", KeyResetAt})
	}
	return fs
}
