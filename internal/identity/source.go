// Package identity finds who a request is for: the subject sources
// (headers, query parameters, the API key API Gateway validated, the source
// IP), parsed once from SUBJECT_SOURCES, and the lookup that reads the
// first one a request carries.
//
// It knows nothing of Lambda events or Redis: the authorizer hands it a
// Request view of what API Gateway sent.
package identity

import (
	"errors"
	"fmt"
	"net/textproto"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxSubjectLen bounds a subject in bytes, as the check API bounds the
// subject it is given. No API key, user id, claim or address is longer; a
// longer value, like one that is not valid UTF-8 or one that carries two
// values, is hostile input: the request is refused (401) before any Redis
// call.
const MaxSubjectLen = 256

// SourceKind says where a subject is read from.
type SourceKind uint8

// The subject sources.
const (
	// SourceHeader reads a request header, case-insensitively.
	SourceHeader SourceKind = iota + 1
	// SourceQuery reads a query string parameter (case-sensitive, as API
	// Gateway passes them).
	SourceQuery
	// SourceAPIKey reads the API key API Gateway validated for a usage plan
	// (requestContext.identity.apiKey; REST APIs only).
	SourceAPIKey
	// SourceIP reads the caller's source IP. Listing it makes anonymous
	// callers limitable (each IP gets its own bucket) instead of rejected.
	SourceIP
	// SourceJWT reads a claim of the verified bearer token (jwt:<claim>).
	SourceJWT
	// SourceContext reads a key of the upstream authorizer's context
	// (context:<key>).
	SourceContext
	// SourcePrincipal reads the upstream authorizer's principalId.
	SourcePrincipal
)

// Verified reports whether the kind's value was checked by someone other
// than the caller: a JWT claim or an upstream authorizer's answer.
func (k SourceKind) Verified() bool {
	return k == SourceJWT || k == SourceContext || k == SourcePrincipal
}

// Source is one place a subject may come from. Sources are tried in order;
// the first non-empty value is the subject.
type Source struct {
	Kind SourceKind
	// Name is the header or query parameter name; empty for SourceAPIKey
	// and SourceIP.
	Name string

	// lower and canon are the header name lower-cased (HTTP APIs and most
	// clients) and in canonical MIME form ("X-Api-Key"), tried as direct map
	// lookups before a case-insensitive scan.
	lower, canon string
}

// DefaultSources is what an empty SUBJECT_SOURCES means: the x-api-key
// header.
var DefaultSources = []Source{HeaderSource("x-api-key")}

// HeaderSource returns a source reading header name.
func HeaderSource(name string) Source {
	return Source{Kind: SourceHeader, Name: name, lower: strings.ToLower(name), canon: textproto.CanonicalMIMEHeaderKey(name)}
}

// kindNames are the kinds as ParseSources reads them; a kind in named
// takes a name after a colon.
var (
	kindNames = map[SourceKind]string{SourceHeader: "header", SourceQuery: "query", SourceAPIKey: "apikey",
		SourceIP: "ip", SourceJWT: "jwt", SourceContext: "context", SourcePrincipal: "principal"}
	named = []SourceKind{SourceHeader, SourceQuery, SourceJWT, SourceContext}
)

// String returns the source in the form ParseSources reads.
func (s Source) String() string {
	name, ok := kindNames[s.Kind]
	switch {
	case !ok:
		return "unknown"
	case slices.Contains(named, s.Kind):
		return name + ":" + s.Name
	}
	return name
}

// FormatSources returns sources in the form ParseSources reads, such as
// "header:x-api-key,ip".
func FormatSources(sources []Source) string { return join(sources, ",") }

// join returns the String of each of items, separated by sep.
func join[T fmt.Stringer](items []T, sep string) string {
	names := make([]string, len(items))
	for i, s := range items {
		names[i] = s.String()
	}
	return strings.Join(names, sep)
}

// ParseSources reads a comma-separated source list such as
// "header:x-api-key,query:api_key,apikey,ip". Whitespace around items is
// ignored; an empty string gives DefaultSources. Every problem is reported.
func ParseSources(s string) ([]Source, error) {
	if strings.TrimSpace(s) == "" {
		return append([]Source(nil), DefaultSources...), nil
	}
	return parseList(s, ",", 16, "subject sources: %d given, at most %d", func(item string) (Source, error) {
		kind, name, hasName := strings.Cut(item, ":")
		kind = strings.ToLower(strings.TrimSpace(kind))
		name = strings.TrimSpace(name)
		switch {
		case kind == "header" && validToken(name):
			return HeaderSource(name), nil
		case kind == "query" && name != "" && len(name) <= 128 && !strings.ContainsAny(name, "&=# \t"):
			return Source{Kind: SourceQuery, Name: name}, nil
		case kind == "apikey" && !hasName:
			return Source{Kind: SourceAPIKey}, nil
		case kind == "ip" && !hasName:
			return Source{Kind: SourceIP}, nil
		case kind == "jwt" && ValidKey(name):
			return Source{Kind: SourceJWT, Name: name}, nil
		case kind == "context" && ValidKey(name):
			return Source{Kind: SourceContext, Name: name}, nil
		case kind == "principal" && !hasName:
			return Source{Kind: SourcePrincipal}, nil
		case kind == "header" || kind == "query" || kind == "jwt" || kind == "context":
			return Source{}, fmt.Errorf("subject source %q: bad or missing name", item)
		}
		return Source{}, fmt.Errorf("subject source %q: want header:<name>, query:<name>, apikey, ip, jwt:<claim>, context:<key> or principal", item)
	})
}

// parseList reads the items of list s, split at sep and trimmed, with
// parse; more than most items is a problem, which tooMany words from the
// count and most. Every problem is reported; nil with any.
func parseList[T any](s, sep string, most int, tooMany string, parse func(item string) (T, error)) ([]T, error) {
	var (
		out  []T
		errs []error
	)
	for item := range strings.SplitSeq(s, sep) {
		if v, err := parse(strings.TrimSpace(item)); err != nil {
			errs = append(errs, err)
		} else {
			out = append(out, v)
		}
	}
	if len(out) > most {
		errs = append(errs, fmt.Errorf(tooMany, len(out), most))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// ValidKey reports whether name can be a claim or context key: 1 to 128
// printable ASCII characters other than space, comma and semicolon
// ("custom:tenant" is one).
func ValidKey(name string) bool {
	return name != "" && len(name) <= 128 &&
		!strings.ContainsFunc(name, func(c rune) bool { return c <= ' ' || c > '~' || c == ',' || c == ';' })
}

// ParseUpstreamSubject reads a SUBJECT_SOURCES value as whom an
// in-process upstream authorizer's answer names (the ratelimit package's
// wrappers): "principal", its principalId (key ""), or "context:<key>", a
// key of its context. ok is false when s is neither, as a list of the
// middleware's sources is; err is set for context: with a key ValidKey
// refuses.
func ParseUpstreamSubject(s string) (key string, ok bool, err error) {
	kind, key, _ := strings.Cut(strings.TrimSpace(s), ":")
	switch kind = strings.ToLower(strings.TrimSpace(kind)); {
	case kind == "principal" && key == "":
		return "", true, nil
	case kind == "context":
		if key = strings.TrimSpace(key); !ValidKey(key) {
			return "", false, fmt.Errorf("%q: context:<key> needs a key of 1 to 128 printable ASCII characters, no space, comma or semicolon", s)
		}
		return key, true, nil
	}
	return "", false, nil
}

// HasKind reports whether sources include one of kind.
func HasKind(sources []Source, kind SourceKind) bool {
	return slices.ContainsFunc(sources, func(s Source) bool { return s.Kind == kind })
}

// alnum are the ASCII letters and digits, for the character sets the
// name checks trim away.
const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// validToken reports whether name is an HTTP header field name (RFC 9110
// token) of reasonable length.
func validToken(name string) bool {
	return name != "" && len(name) <= 128 && strings.Trim(name, alnum+"!#$%&'*+-.^_`|~") == ""
}

// lookup finds the entry of m whose key is s's name, ignoring case,
// without allocating: direct lookups of the usual spellings first, then a
// scan.
func lookup[V any](m map[string]V, s *Source) (V, bool) {
	var zero V
	if len(m) == 0 {
		return zero, false
	}
	if v, ok := m[s.lower]; ok {
		return v, true
	}
	if v, ok := m[s.canon]; ok {
		return v, true
	}
	if v, ok := m[s.Name]; ok {
		return v, true
	}
	for k, v := range m {
		if strings.EqualFold(k, s.Name) {
			return v, true
		}
	}
	return zero, false
}

// multiValued reports whether the header or query parameter s names was
// sent more than once: two entries in r's multi-value maps (REST APIs), or
// a value with a comma, which is how HTTP APIs join repeated headers and
// parameters. Which of two keys API Gateway puts in the single-value map
// is not the caller's to choose: refuse both.
func (s *Source) multiValued(r *Request, v string) bool {
	switch s.Kind {
	case SourceHeader:
		vs, _ := lookup(r.MultiHeaders, s)
		return len(vs) > 1 || strings.IndexByte(v, ',') >= 0
	case SourceQuery:
		return len(r.MultiQuery[s.Name]) > 1 || strings.IndexByte(v, ',') >= 0
	}
	return false
}

// Request is what the sources read of one request.
type Request struct {
	// Headers are the request headers; names may have any case.
	Headers map[string]string
	// MultiHeaders are the request headers with every value (REST APIs'
	// multiValueHeaders); nil when the event has none.
	MultiHeaders map[string][]string
	// Query holds the query string parameters.
	Query map[string]string
	// MultiQuery holds every value of each query parameter (REST APIs'
	// multiValueQueryStringParameters); nil when the event has none.
	MultiQuery map[string][]string
	// APIKey is the API key API Gateway validated (REST APIs only).
	APIKey string
	// SourceIP is the caller's address as API Gateway saw it.
	SourceIP string
	// Claims are the verified bearer token's claims; nil without one.
	Claims Claims
	// Principal and Context are the upstream authorizer's principalId and
	// context, verified by it; empty without one.
	Principal string
	Context   map[string]string
}

// ValidText reports whether v is text a subject may be: valid UTF-8
// without U+FFFD. The replacement character is refused as the bytes it
// stands for are: a JSON event (API Gateway's, a JWT's payload) reaches
// Go with every byte that is not UTF-8 already replaced by it, so
// "q\xff" and "q\xfe" would otherwise share one bucket. One rule at every
// entry, whether its transport keeps the bytes (net/http) or not (JSON):
// a subject that is not UTF-8 is refused (401), never charged.
func ValidText(v string) bool {
	return utf8.ValidString(v) && !strings.ContainsRune(v, utf8.RuneError)
}

// Finding says what Find found.
type Finding uint8

// Find's outcomes.
const (
	// Absent: no source has a value.
	Absent Finding = iota
	// Found: the subject.
	Found
	// Refused: the first value is hostile (too long, not UTF-8, sent
	// twice) or is a claim with no string form (an object, an array, a
	// number of more than MaxSubjectLen digits); the request must be
	// refused, not charged elsewhere.
	Refused
)

// value is what s reads in r, untrimmed; "" when it is absent.
func (s *Source) value(r *Request) string {
	switch s.Kind {
	case SourceHeader:
		v, _ := lookup(r.Headers, s)
		return v
	case SourceQuery:
		return r.Query[s.Name]
	case SourceAPIKey:
		return r.APIKey
	case SourceIP:
		return r.SourceIP
	case SourceJWT:
		v, _ := r.Claims.String(s.Name)
		return v
	case SourceContext:
		return r.Context[s.Name]
	case SourcePrincipal:
		return r.Principal
	}
	return ""
}

// unusable reports whether s's value in r is there but has no string form:
// a claim that is an object, an array, or a number too long to be a
// subject. Such a request is refused, not charged to a later source.
func (s *Source) unusable(r *Request) bool {
	if s.Kind != SourceJWT {
		return false
	}
	_, ok := r.Claims.String(s.Name)
	return !ok && r.Claims.has(s.Name)
}

// Find returns the first non-empty value of sources in r (surrounding
// white space trimmed), and the kind of source it came from: Found, or
// Absent when none has a value. It is Refused when that first value is
// longer than MaxSubjectLen bytes, is not valid UTF-8, was sent twice
// (see multiValued), or is a claim with no string form (Claims.String):
// the request is refused, not charged to a later source (an oversized or
// doubled key must not fall back to the caller's IP bucket).
// It does not allocate.
func Find(sources []Source, r *Request) (subject string, from SourceKind, f Finding) {
	for i := range sources {
		s := &sources[i]
		v := strings.TrimSpace(s.value(r))
		if v == "" && s.unusable(r) {
			return "", s.Kind, Refused
		}
		if v != "" {
			if len(v) > MaxSubjectLen || !ValidText(v) || s.multiValued(r, v) {
				return "", s.Kind, Refused
			}
			return v, s.Kind, Found
		}
	}
	return "", 0, Absent
}
