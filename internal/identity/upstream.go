package identity

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// Bounds and defaults of the upstream answer cache.
const (
	// DefaultUpstreamTTL is how long an upstream answer is reused for one
	// identity, API Gateway's default authorizer cache TTL.
	DefaultUpstreamTTL = 300 * time.Second
	// MaxUpstreamTTL bounds UPSTREAM_CACHE_TTL, as API Gateway bounds its
	// own cache: a revoked token stops passing within it.
	MaxUpstreamTTL = time.Hour
	// DefaultUpstreamCacheSize is the most answers kept per instance.
	DefaultUpstreamCacheSize = 10000
	// maxUpstreamAnswer bounds an answer in bytes (API Gateway's own limit
	// on an authorizer response is 8 KB of policy and context).
	maxUpstreamAnswer = 64 << 10
)

// ErrUpstreamUnauthorized is returned when the upstream authorizer failed
// with "Unauthorized": the request gets 401, as it would without Sluice.
var ErrUpstreamUnauthorized = errors.New("upstream authorizer: Unauthorized")

// Invoker calls the upstream authorizer with an event and returns its
// answer. It returns ErrUpstreamUnauthorized when the function failed with
// the message "Unauthorized", and another error for any other failure.
// internal/config has the AWS SDK one.
type Invoker interface {
	Invoke(ctx context.Context, event []byte) ([]byte, error)
}

// UpstreamOptions configure an Upstream.
type UpstreamOptions struct {
	// TTL is how long an answer is reused for one identity; default
	// DefaultUpstreamTTL; at most MaxUpstreamTTL; negative disables the
	// cache.
	TTL time.Duration
	// Size bounds the cache in answers; default DefaultUpstreamCacheSize.
	Size int
}

// Upstream calls an existing authorizer first (a REST API method has one
// authorizer: Sluice composes with the team's instead of replacing it) and
// caches its answers per identity, as API Gateway's authorizer cache would.
// It is safe for concurrent use.
type Upstream struct {
	inv   Invoker
	cache *expirable.LRU[[sha256.Size]byte, upstreamEntry] // nil: no cache
}

type upstreamEntry struct {
	answer []byte
	err    error // nil or ErrUpstreamUnauthorized
}

// NewUpstream returns an Upstream calling inv.
func NewUpstream(inv Invoker, o UpstreamOptions) *Upstream {
	u := &Upstream{inv: inv}
	if o.TTL == 0 {
		o.TTL = DefaultUpstreamTTL
	}
	o.TTL = min(o.TTL, MaxUpstreamTTL)
	if o.Size <= 0 {
		o.Size = DefaultUpstreamCacheSize
	}
	if o.TTL > 0 {
		u.cache = expirable.NewLRU[[sha256.Size]byte, upstreamEntry](o.Size, nil, o.TTL)
	}
	return u
}

// Authorize returns the upstream's answer to event: from the cache when
// identity (the values the upstream authenticates, such as the
// Authorization header) was answered within the TTL, else by invoking it.
// An empty identity is never cached. Answers and Unauthorized are cached;
// other failures are not.
func (u *Upstream) Authorize(ctx context.Context, identity string, event []byte) ([]byte, error) {
	var key [sha256.Size]byte
	cached := u.cache != nil && identity != ""
	if cached {
		key = sha256.Sum256([]byte(identity))
		if e, ok := u.cache.Get(key); ok {
			return e.answer, e.err
		}
	}
	answer, err := u.inv.Invoke(ctx, event)
	switch {
	case errors.Is(err, ErrUpstreamUnauthorized):
		err = ErrUpstreamUnauthorized
	case err != nil:
		return nil, fmt.Errorf("upstream authorizer: %w", err)
	case len(answer) > maxUpstreamAnswer:
		return nil, fmt.Errorf("upstream authorizer: answer of %d bytes, at most %d", len(answer), maxUpstreamAnswer)
	}
	if cached {
		u.cache.Add(key, upstreamEntry{answer: answer, err: err})
	}
	return answer, err
}

// Len returns the number of cached answers.
func (u *Upstream) Len() int {
	if u.cache == nil {
		return 0
	}
	return u.cache.Len()
}

// UpstreamIdentity is what an upstream authorizer that allowed the request
// says of the caller: its principalId and its context, flattened to
// strings. It is the one place an upstream answer becomes a subject and a
// context, whatever carried the answer (a Lambda invoke, an in-process
// authorizer).
type UpstreamIdentity struct {
	Principal string
	Context   map[string]string
}

// NewUpstreamIdentity returns the identity of an upstream answer's
// principalId and context. Context values become strings as API Gateway
// substitutes them (numbers in their JSON form, booleans as true/false);
// values of other types (objects, arrays, null, which API Gateway refuses
// in a context) are dropped.
func NewUpstreamIdentity(principal string, context map[string]any) UpstreamIdentity {
	id := UpstreamIdentity{Principal: principal}
	for k, v := range context {
		s, ok := ContextString(v)
		if !ok {
			continue
		}
		if id.Context == nil {
			id.Context = make(map[string]string, len(context))
		}
		id.Context[k] = s
	}
	return id
}

// ContextString writes an authorizer context value as API Gateway
// substitutes it: a string as it is, a number in decimal, a boolean as
// true/false. The types are those of a context in Go (an in-process
// authorizer: every Go integer and float type, as the Lambda runtime's
// JSON encoding writes them) or as JSON decodes it (an invoked Lambda's
// answer); any other (an object, an array, nil, which API Gateway
// refuses) is not ok.
func ContextString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case int, int8, int16, int32, int64:
		return strconv.FormatInt(reflect.ValueOf(v).Int(), 10), true
	case uint, uint8, uint16, uint32, uint64, uintptr:
		return strconv.FormatUint(reflect.ValueOf(v).Uint(), 10), true
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case json.Number:
		return v.String(), true
	}
	return "", false
}

// Apply makes the identity what the principal and context:<key> sources of
// r read.
func (id UpstreamIdentity) Apply(r *Request) {
	r.Principal, r.Context = id.Principal, id.Context
}

// MergeContext returns the context the backend sees: the upstream's
// values, then ours (verified claims) over them, so both reach the
// backend and Sluice's own keys keep their meaning. Either may be nil;
// nil when both are empty.
func MergeContext(upstream, ours map[string]string) map[string]string {
	if len(upstream) == 0 {
		return ours
	}
	if len(ours) == 0 {
		return upstream
	}
	out := make(map[string]string, len(upstream)+len(ours))
	for k, v := range upstream {
		out[k] = v
	}
	for k, v := range ours {
		out[k] = v
	}
	return out
}

// DefaultUpstreamIdentity is where the upstream's identity is read by
// default, for its cache key: the Authorization header.
var DefaultUpstreamIdentity = []Source{HeaderSource("authorization")}

// IdentityKey returns the values sources find in r, joined, as the cache
// key of an upstream answer (API Gateway's identity sources); "" when one
// of them is missing, and the answer is then not cached.
func IdentityKey(sources []Source, r *Request) string {
	var b []byte
	for i := range sources {
		v := sources[i].value(r)
		if v == "" {
			return ""
		}
		b = strconv.AppendInt(b, int64(len(v)), 10) // length-prefixed: no two lists join alike
		b = append(b, ':')
		b = append(b, v...)
	}
	return string(b)
}
