package identity

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Bounds and defaults of the upstream answer cache.
const (
	// DefaultUpstreamTTL is how long an upstream answer is reused when
	// the operator names the identity sources and no TTL, API Gateway's
	// default authorizer cache TTL.
	DefaultUpstreamTTL = 300 * time.Second
	// MaxUpstreamTTL bounds UPSTREAM_CACHE_TTL, as API Gateway bounds its
	// own cache: a revoked token stops passing within it.
	MaxUpstreamTTL = time.Hour
	// DefaultUpstreamCacheSize is the most answers kept per instance.
	DefaultUpstreamCacheSize = 10000
	// DefaultUpstreamCacheBytes is the most bytes of answers kept per
	// instance: 16 MiB, a sixteenth of the authorizer's default 256 MB,
	// whatever the answers' sizes (10,000 answers of 8 KB would be 80 MB).
	DefaultUpstreamCacheBytes = 16 << 20
	// maxUpstreamAnswer bounds an answer in bytes (API Gateway's own limit
	// on an authorizer response is 8 KB of policy and context).
	maxUpstreamAnswer = 64 << 10
	// entryOverhead is what an entry costs beside its answer: the key,
	// the list element and the map slot, roughly.
	entryOverhead = 128
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

// UpstreamSource is one value of a request that the upstream authorizer
// reads to answer (UPSTREAM_IDENTITY_SOURCES): a header, a query value,
// the API key, the source IP, the route or a stage variable. Its answers
// are cached under the values of every source the operator names, as API
// Gateway caches an authorizer's answers under its identity sources: a
// value the upstream reads and the list leaves out would let one caller's
// answer reach another.
type UpstreamSource struct {
	// Source is a header, query, apikey or ip source; zero when Route or
	// StageVariable is set.
	Source Source
	// Route is the request's methodArn (REST) or routeArn (HTTP API):
	// its API, stage, method and path.
	Route bool
	// StageVariable is the name of a stage variable.
	StageVariable string
}

// String returns the source in the form ParseUpstreamSources reads.
func (s UpstreamSource) String() string {
	switch {
	case s.Route:
		return "route"
	case s.StageVariable != "":
		return "stagevar:" + s.StageVariable
	}
	return s.Source.String()
}

// ParseUpstreamSources reads UPSTREAM_IDENTITY_SOURCES, a comma list of
// header:<name>, query:<name>, apikey, ip, route and stagevar:<name>; ""
// is none (no cache). Every problem is reported.
func ParseUpstreamSources(s string) ([]UpstreamSource, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	return parseList(s, ",", 16, "identity sources: %d given, at most %d", func(item string) (UpstreamSource, error) {
		kind, name, _ := strings.Cut(item, ":")
		switch strings.ToLower(strings.TrimSpace(kind)) {
		case "header", "query", "apikey", "ip":
			src, err := ParseSources(item)
			if err != nil {
				return UpstreamSource{}, fmt.Errorf("identity source %q: a bad or missing name (header:<name>, query:<name>), or one where none goes (apikey, ip)", item)
			}
			return UpstreamSource{Source: src[0]}, nil
		case "route":
			if item != kind {
				return UpstreamSource{}, fmt.Errorf("identity source %q: route takes no name", item)
			}
			return UpstreamSource{Route: true}, nil
		case "stagevar":
			if name = strings.TrimSpace(name); !validStageVariable(name) {
				return UpstreamSource{}, fmt.Errorf("identity source %q: a stage variable name is 1 to 64 letters, digits and underscores", item)
			}
			return UpstreamSource{StageVariable: name}, nil
		}
		return UpstreamSource{}, fmt.Errorf("identity source %q: want header:<name>, query:<name>, apikey, ip, route or stagevar:<name>: what the upstream authorizer reads of the request", item)
	})
}

func validStageVariable(name string) bool {
	return name != "" && len(name) <= 64 && strings.Trim(name, alnum+"_") == ""
}

// FormatUpstreamSources returns sources in the form ParseUpstreamSources
// reads, such as "header:authorization,route".
func FormatUpstreamSources(sources []UpstreamSource) string { return join(sources, ",") }

// UpstreamRequest is what the cache key of an upstream answer reads of a
// request.
type UpstreamRequest struct {
	// Request holds the headers (both views), the query values, the API
	// key and the source IP.
	Request
	// Route is the methodArn (REST) or routeArn (HTTP API).
	Route string
	// StageVariables are the stage's variables; nil when it has none.
	StageVariables map[string]string
}

// appendValues appends what s reads in r to b, each value length-prefixed
// so that no two lists of values encode alike, every value of a header or
// query parameter sent more than once (REST's multi-value maps: an
// upstream may read any of them); ok is false when s has no value in r.
func (s *UpstreamSource) appendValues(b []byte, r *UpstreamRequest) (_ []byte, ok bool) {
	var vs []string
	switch {
	case s.Route:
		vs = []string{r.Route}
	case s.StageVariable != "":
		vs = []string{r.StageVariables[s.StageVariable]}
	default:
		src := &s.Source
		switch src.Kind {
		case SourceHeader:
			vs, _ = lookup(r.MultiHeaders, src)
		case SourceQuery:
			vs = r.MultiQuery[src.Name]
		}
		if len(vs) <= 1 {
			vs = []string{src.value(&r.Request)}
		}
	}
	if len(vs) == 1 && vs[0] == "" {
		return b, false
	}
	b = strconv.AppendInt(b, int64(len(vs)), 10)
	b = append(b, '#')
	for _, v := range vs {
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	return b, true
}

// UpstreamOptions configure an Upstream.
type UpstreamOptions struct {
	// Sources are every value of a request the upstream reads
	// (UPSTREAM_IDENTITY_SOURCES). Empty: no cache, the upstream is
	// invoked for every request.
	Sources []UpstreamSource
	// TTL is how long an answer is reused; at most MaxUpstreamTTL; 0 or
	// less: no cache.
	TTL time.Duration
	// Size bounds the cache in answers; default DefaultUpstreamCacheSize.
	Size int
	// Bytes bounds the cache in bytes of answers; default
	// DefaultUpstreamCacheBytes.
	Bytes int
	// Now is the clock the TTL is counted on; default time.Now.
	Now func() time.Time
}

// Upstream calls an existing authorizer first (a REST API method has one
// authorizer: Sluice composes with the team's instead of replacing it) and
// caches its answers, as API Gateway's authorizer cache would, where they
// apply and nowhere else:
//
//   - a policy answer (policyDocument) under the values of the Sources:
//     the caller evaluates its policy against each request's methodArn,
//     as API Gateway evaluates a cached policy;
//   - any other answer (an HTTP API simple response, whose isAuthorized
//     is for the one route it was asked about, and Unauthorized) under
//     those values and the request's route: it is reused for that route
//     only.
//
// It is safe for concurrent use.
type Upstream struct {
	inv     Invoker
	sources []UpstreamSource
	cache   *lru.Cache[[sha256.Size]byte, upstreamEntry] // nil: no cache
	ttl     time.Duration
	now     func() time.Time
	mu      sync.Mutex   // serialises adds, so bytes is exact
	bytes   atomic.Int64 // cost of the cached entries
	budget  int64
}

type upstreamEntry struct {
	answer  []byte
	err     error     // nil or ErrUpstreamUnauthorized
	expires time.Time // when it stops being reused
}

func (e upstreamEntry) cost() int64 { return int64(len(e.answer)) + entryOverhead }

// NewUpstream returns an Upstream calling inv.
func NewUpstream(inv Invoker, o UpstreamOptions) *Upstream {
	u := &Upstream{inv: inv, sources: o.Sources, budget: int64(o.Bytes), ttl: min(o.TTL, MaxUpstreamTTL), now: o.Now}
	if u.now == nil {
		u.now = time.Now
	}
	if o.Size <= 0 {
		o.Size = DefaultUpstreamCacheSize
	}
	if u.budget <= 0 {
		u.budget = DefaultUpstreamCacheBytes
	}
	if o.TTL > 0 && len(o.Sources) > 0 {
		// An expired answer is dropped when next looked up, or leaves
		// as the least recently used: both bounds hold without a sweeper.
		u.cache, _ = lru.NewWithEvict(o.Size, func(_ [sha256.Size]byte, e upstreamEntry) {
			u.bytes.Add(-e.cost())
		}) // err only for a size <= 0
	}
	return u
}

// Authorize returns the upstream's answer to event, the event of request
// r: from the cache when it holds one that applies to r (see Upstream),
// else by invoking the upstream. A request missing a value of one of the
// sources is not cached. Answers and Unauthorized are cached; other
// failures are not.
func (u *Upstream) Authorize(ctx context.Context, r *UpstreamRequest, event []byte) ([]byte, error) {
	// idKey holds the identity's policy answers, routeKey its other
	// answers on r's route: the values, then a byte that tells the two.
	var idKey, routeKey [sha256.Size]byte
	cached := u.cache != nil
	if cached {
		var b []byte
		b, cached = u.identity(r)
		if cached {
			idKey = sha256.Sum256(append(b, 0))
			if e, ok := u.get(idKey); ok {
				return e.answer, e.err
			}
			routeKey = sha256.Sum256(append(append(b, 1), r.Route...))
			if r.Route != "" {
				if e, ok := u.get(routeKey); ok {
					return e.answer, e.err
				}
			}
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
	switch {
	case !cached:
	case err == nil && isPolicyAnswer(answer):
		u.add(idKey, upstreamEntry{answer: answer, expires: u.now().Add(u.ttl)})
	case r.Route != "":
		u.add(routeKey, upstreamEntry{answer: answer, err: err, expires: u.now().Add(u.ttl)})
	}
	return answer, err
}

// identity is the values of u's sources in r, length-prefixed; ok is
// false when one is missing.
func (u *Upstream) identity(r *UpstreamRequest) (b []byte, ok bool) {
	b = make([]byte, 0, 256)
	for i := range u.sources {
		if b, ok = u.sources[i].appendValues(b, r); !ok {
			return nil, false
		}
	}
	return b, true
}

// isPolicyAnswer reports whether answer is a policy answer (REST, HTTP
// API IAM policy), which holds for every route its policy allows: a
// policyDocument and no isAuthorized, the way the caller reads answers.
func isPolicyAnswer(answer []byte) bool {
	var a struct {
		PolicyDocument json.RawMessage `json:"policyDocument"`
		IsAuthorized   json.RawMessage `json:"isAuthorized"`
	}
	if json.Unmarshal(answer, &a) != nil {
		return false
	}
	isNull := func(m json.RawMessage) bool { return len(m) == 0 || string(m) == "null" }
	return !isNull(a.PolicyDocument) && isNull(a.IsAuthorized)
}

// get returns the answer cached under key unless it expired, which it
// drops.
func (u *Upstream) get(key [sha256.Size]byte) (upstreamEntry, bool) {
	e, ok := u.cache.Get(key)
	if ok && !u.now().Before(e.expires) {
		u.cache.Remove(key) // its cost leaves through the eviction callback
		return upstreamEntry{}, false
	}
	return e, ok
}

// add caches e under key, then evicts the least recently used answers
// until the cache is within its byte budget.
func (u *Upstream) add(key [sha256.Size]byte, e upstreamEntry) {
	if e.cost() > u.budget {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cache.Remove(key) // its cost leaves through the eviction callback
	u.cache.Add(key, e)
	u.bytes.Add(e.cost())
	for u.bytes.Load() > u.budget {
		if _, _, ok := u.cache.RemoveOldest(); !ok {
			return
		}
	}
}

// Len returns the number of cached answers.
func (u *Upstream) Len() int {
	if u.cache == nil {
		return 0
	}
	return u.cache.Len()
}

// Bytes returns the bytes the cached answers cost, overhead included.
func (u *Upstream) Bytes() int64 { return u.bytes.Load() }

// UpstreamIdentity is what an upstream authorizer that allowed the request
// says of the caller, as the principal and context:<key> sources read it:
// its principalId and its context, flattened to strings. apigw makes it of
// every upstream answer, whatever carried the answer (a Lambda invoke, an
// in-process authorizer).
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
