package authorizer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/identity"
)

// ErrUpstreamDenied is returned by DecideFor when the upstream authorizer
// did not allow the request; no limiter call is made. The API Gateway
// adapter (apigw) answers it with Unauthorized (401), never with the Deny a
// rate limit answers with (429), so a client tells the two apart.
var ErrUpstreamDenied = errors.New("upstream authorizer did not allow the request")

// Upstream is the answer of the authorizer Sluice runs behind: a team's
// own authorizer, called in process (the public ratelimit package) or
// invoked as a Lambda (UPSTREAM_AUTHORIZER). It has authenticated the
// caller; Sluice limits whom it names.
type Upstream struct {
	// Allowed says whether the upstream let the request through: its IAM
	// policy allows the method (apigw.Evaluate), or its simple response
	// is isAuthorized.
	Allowed bool
	// PrincipalID is the upstream's principalId; "" when it has none (an
	// HTTP API simple response).
	PrincipalID string
	// Context is the upstream's context values (strings, numbers and
	// booleans, as API Gateway takes them); nil when there are none.
	Context map[string]any
}

// DecideFor decides on r for the caller up vouched for, the way Decide
// does for a caller its sources find: the subject is up.PrincipalID when
// key is "", else the value of up.Context[key] (a string, or a number or
// boolean written in decimal/true/false), surrounding white space trimmed.
// r's subject sources are not read; its headers and IP are, by the named
// dimensions (DIMENSIONS: a per-IP floor holds behind an upstream too).
//
// It returns ErrUpstreamDenied, without a limiter call, when up is not
// Allowed. It returns an error wrapping ErrNoSubject, without a limiter
// call, when the subject is missing or empty, longer than
// identity.MaxSubjectLen bytes, not valid UTF-8, or a context value of
// another type: the same hygiene the sources apply, so an upstream cannot
// make Sluice hash a megabyte or fall back to a shared bucket. Otherwise it
// returns what Decide returns. r is not modified.
func (a *Authorizer) DecideFor(ctx context.Context, up *Upstream, key string, r *Request) (Result, error) {
	if !up.Allowed {
		return Result{}, ErrUpstreamDenied
	}
	// The one path an upstream answer takes, in process or invoked
	// (UPSTREAM_AUTHORIZER): its context reaches Result.Context, and the
	// named dimensions (a per-IP floor) still read r's headers and IP.
	id := identity.NewUpstreamIdentity(up.PrincipalID, up.Context)
	subj, err := upstreamSubject(&id, up, key)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrNoSubject, err)
	}
	req := *r
	req.Subject, req.Upstream = subj, &id
	return a.Decide(ctx, &req)
}

// upstreamSubject picks and checks the subject of up from its identity id
// (whose context holds the values that have a string form).
func upstreamSubject(id *identity.UpstreamIdentity, up *Upstream, key string) (string, error) {
	what, v := "principalId", id.Principal
	if key != "" {
		what = "context key " + strconv.Quote(key)
		raw, ok := up.Context[key]
		if !ok {
			return "", fmt.Errorf("upstream authorizer gave no %s", what)
		}
		if v, ok = id.Context[key]; !ok {
			return "", fmt.Errorf("upstream authorizer's %s is a %T, not a string, number or boolean", what, raw)
		}
	}
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return "", fmt.Errorf("upstream authorizer's %s is empty", what)
	case len(v) > identity.MaxSubjectLen:
		return "", fmt.Errorf("upstream authorizer's %s is %d bytes, more than %d", what, len(v), identity.MaxSubjectLen)
	case !utf8.ValidString(v):
		return "", fmt.Errorf("upstream authorizer's %s is not valid UTF-8", what)
	}
	return v, nil
}

// MergeContext returns the authorizer context API Gateway gets when Sluice
// runs behind an upstream authorizer: every upstream value, and Sluice's
// own values (own) over them. Sluice's keys win: an upstream value under a
// key own holds (limit, remaining, retryAfter, rateLimit, …) is dropped, so
// no upstream can change what a 429 says or what the backend reads as its
// limits; every other upstream key reaches the backend unchanged. Neither
// map is modified; a nil map counts as empty.
func MergeContext(own, upstream map[string]any) map[string]any {
	out := make(map[string]any, len(own)+len(upstream))
	maps.Copy(out, upstream)
	maps.Copy(out, own)
	return out
}
