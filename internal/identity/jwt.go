package identity

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// MaxTokenLen bounds a bearer token in bytes. Cognito's largest tokens are
// a few KB; a longer one is refused before it is parsed.
const MaxTokenLen = 8 << 10

// Algorithms are the only signature algorithms a token may use: asymmetric
// ones, as published in a JWKS. Never "none", never HS* (a verifier that
// accepts HS256 can be fed a token signed with the public key as secret).
var Algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.ES256, jose.ES384}

// ErrToken is wrapped by every rejection of a bearer token (bad signature,
// issuer, audience, time, token_use, unknown key). A request carrying such
// a token is refused with 401, whatever the other sources hold.
var ErrToken = errors.New("invalid bearer token")

// Defaults of JWTOptions.
const (
	DefaultJWTLeeway   = 30 * time.Second
	DefaultJWKSRefetch = 5 * time.Second
	DefaultJWKSTimeout = 3 * time.Second
	maxJWKSBytes       = 1 << 20
	wellKnownJWKSPath  = "/.well-known/jwks.json"
)

// JWTOptions configure a Verifier.
type JWTOptions struct {
	// Issuer is JWT_ISSUER: the exact "iss" every token must carry, such
	// as https://cognito-idp.<region>.amazonaws.com/<pool id>. Required.
	Issuer string
	// Audience is JWT_AUDIENCE: a token's "aud", or a Cognito access
	// token's "client_id", must be one of these. Required.
	Audience []string
	// TokenUse is JWT_TOKEN_USE: when set, the "token_use" claim must equal
	// it (Cognito: "id" or "access").
	TokenUse string
	// JWKSURL is JWT_JWKS_URL; default Issuer + "/.well-known/jwks.json"
	// (Cognito's address).
	JWKSURL string
	// Leeway is the clock skew allowed on exp, nbf and iat; default 30s.
	Leeway time.Duration
	// Refetch is the least time between two JWKS fetches; a token with an
	// unknown kid triggers one at most this often. Default 5s.
	Refetch time.Duration
	// Client fetches the JWKS; default an http.Client with a 3s timeout.
	Client *http.Client
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Verifier checks bearer tokens against an issuer's JWKS. Keys are fetched
// when it is made and cached; an unknown kid refetches them, at most once
// every Refetch; a failed fetch keeps the keys it had. A fetch never holds
// up a token whose key is cached. It is safe for concurrent use.
type Verifier struct {
	o JWTOptions

	mu   sync.RWMutex
	keys jose.JSONWebKeySet // replaced whole by a fetch

	fetching  sync.Mutex // one fetch at a time
	lastFetch time.Time  // last attempt, successful or not; under fetching
}

// NewVerifier returns a Verifier for o and fetches the JWKS within ctx. A
// failed fetch returns the Verifier anyway, with the error: it serves 401s
// until a later fetch (triggered by a token, at most every Refetch)
// succeeds, so a cold start while the issuer is down recovers by itself.
func NewVerifier(ctx context.Context, o JWTOptions) (*Verifier, error) {
	if o.Issuer == "" || len(o.Audience) == 0 {
		return nil, errors.New("jwt: an issuer and at least one audience are required")
	}
	o.JWKSURL = cmp.Or(o.JWKSURL, strings.TrimSuffix(o.Issuer, "/")+wellKnownJWKSPath)
	if o.Leeway <= 0 {
		o.Leeway = DefaultJWTLeeway
	}
	if o.Refetch <= 0 {
		o.Refetch = DefaultJWKSRefetch
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: DefaultJWKSTimeout}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	v := &Verifier{o: o}
	v.fetching.Lock()
	defer v.fetching.Unlock()
	return v, v.refreshLocked(ctx)
}

// JWKSURL returns where the keys are fetched from.
func (v *Verifier) JWKSURL() string { return v.o.JWKSURL }

// refreshLocked fetches the JWKS and, when that works, replaces the keys;
// on failure the old keys stay. v.fetching is held; v.mu is taken only to
// swap the set, so verifications go on during the fetch.
func (v *Verifier) refreshLocked(ctx context.Context) error {
	v.lastFetch = v.o.Now()
	set, err := v.fetch(ctx)
	if err != nil {
		return err
	}
	v.mu.Lock()
	v.keys = set
	v.mu.Unlock()
	return nil
}

// fetch GETs and decodes the JWKS, keeping its public signing keys.
func (v *Verifier) fetch(ctx context.Context) (jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	ctx, cancel := context.WithTimeout(ctx, DefaultJWKSTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.o.JWKSURL, nil)
	if err != nil {
		return set, fmt.Errorf("jwt: fetch JWKS %s: %w", v.o.JWKSURL, err)
	}
	resp, err := v.o.Client.Do(req)
	if err != nil {
		return set, fmt.Errorf("jwt: fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return set, fmt.Errorf("jwt: fetch JWKS %s: status %d", v.o.JWKSURL, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKSBytes)).Decode(&set); err != nil {
		return set, fmt.Errorf("jwt: decode JWKS %s: %w", v.o.JWKSURL, err)
	}
	// Only public signing keys: a JWKS that (wrongly) published a private
	// or symmetric key must not turn into a key we verify with.
	set.Keys = slices.DeleteFunc(set.Keys, func(k jose.JSONWebKey) bool {
		return !k.Valid() || !k.IsPublic() || k.Use != "" && k.Use != "sig"
	})
	if len(set.Keys) == 0 {
		return set, fmt.Errorf("jwt: JWKS %s has no public signing key", v.o.JWKSURL)
	}
	return set, nil
}

// key returns the key of kid, refetching the JWKS once when it is unknown
// and the last fetch is at least Refetch old. A token whose kid is unknown
// while another fetch runs is refused rather than kept waiting.
func (v *Verifier) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	if k := v.lookup(kid); k != nil {
		return k, nil
	}
	if !v.fetching.TryLock() {
		return nil, fmt.Errorf("%w: unknown key id %q (keys being refetched)", ErrToken, kid)
	}
	defer v.fetching.Unlock()
	if k := v.lookup(kid); k != nil { // fetched while we got here
		return k, nil
	}
	if v.o.Now().Sub(v.lastFetch) < v.o.Refetch {
		return nil, fmt.Errorf("%w: unknown key id %q", ErrToken, kid)
	}
	if err := v.refreshLocked(ctx); err != nil {
		return nil, fmt.Errorf("%w: unknown key id %q (%w)", ErrToken, kid, err)
	}
	if k := v.lookup(kid); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("%w: unknown key id %q", ErrToken, kid)
}

// lookup finds kid among the cached keys.
func (v *Verifier) lookup(kid string) *jose.JSONWebKey {
	v.mu.RLock()
	defer v.mu.RUnlock()
	ks := v.keys.Keys
	// A token without kid matches only a JWKS with one key.
	if i := slices.IndexFunc(ks, func(k jose.JSONWebKey) bool { return k.KeyID == kid || kid == "" && len(ks) == 1 }); i >= 0 {
		return &ks[i]
	}
	return nil
}

// Claims are a verified token's claims. Numbers are json.Number: read
// exactly, never through a float64.
type Claims map[string]any

// String returns claim name as a string: a string as is, a number in its
// exact decimal form (Number), a boolean as true/false. Other values
// (objects, arrays, null), absent claims and numbers whose decimal form is
// longer than MaxSubjectLen give ok false: they are no subject.
func (c Claims) String(name string) (string, bool) {
	switch v := c[name].(type) {
	case string:
		return v, true
	case json.Number:
		return Number(string(v))
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// has reports whether claim name is present and not null.
func (c Claims) has(name string) bool { return c[name] != nil }

// Number returns the decimal form of JSON number literal n: exact, and one
// per value, so a number is one subject however the issuer wrote it. An
// integer is its digits (9007199254740993 stays itself, where a float64
// would make it …992); "1e3", "1000.0" and "1000" are all "1000"; "12.50"
// is "12.5"; "-0" is "0". ok is false when n is no JSON number or the form
// would be longer than MaxSubjectLen bytes (1e300). A plain integer does
// not allocate.
func Number(n string) (string, bool) {
	digits, neg := n, false
	if strings.HasPrefix(digits, "-") {
		digits, neg = digits[1:], true
	}
	if digits == "" {
		return "", false
	}
	if isDigits(digits) && (digits[0] != '0' || digits == "0") {
		switch {
		case digits == "0":
			return "0", true // -0 too
		case len(n) > MaxSubjectLen:
			return "", false
		}
		return n, true
	}
	mant, exp := digits, 0
	if i := strings.IndexAny(mant, "eE"); i >= 0 {
		e, negExp := mant[i+1:], false
		if e != "" && (e[0] == '+' || e[0] == '-') {
			e, negExp = e[1:], e[0] == '-'
		}
		if e == "" || !isDigits(e) {
			return "", false
		}
		if e = strings.TrimLeft(e, "0"); len(e) > 6 {
			e = "999999" // beyond any form MaxSubjectLen allows
		}
		if e != "" {
			exp, _ = strconv.Atoi(e)
		}
		if negExp {
			exp = -exp
		}
		mant = mant[:i]
	}
	whole, frac, hasPoint := strings.Cut(mant, ".")
	if whole == "" || !isDigits(whole) || !isDigits(frac) || hasPoint && frac == "" || len(whole) > 1 && whole[0] == '0' {
		return "", false
	}
	// The value is 0.ds × 10^point: strip the zeros that do not count.
	ds := strings.TrimRight(whole+frac, "0")
	point := len(whole)
	for len(ds) > 0 && ds[0] == '0' {
		ds, point = ds[1:], point-1
	}
	if ds == "" {
		return "0", true
	}
	if exp > 2*MaxSubjectLen || exp < -2*MaxSubjectLen {
		return "", false // far too long (and point+exp must not overflow)
	}
	point += exp
	size := len(ds) + 1 // a decimal point
	switch {
	case point >= len(ds):
		size = point
	case point <= 0:
		size = 2 - point + len(ds) // "0." and the zeros
	}
	if neg {
		size++
	}
	if size > MaxSubjectLen {
		return "", false
	}
	b := make([]byte, 0, size)
	if neg {
		b = append(b, '-')
	}
	switch {
	case point >= len(ds):
		b = append(b, ds...)
		b = append(b, strings.Repeat("0", point-len(ds))...)
	case point <= 0:
		b = append(b, "0."...)
		b = append(b, strings.Repeat("0", -point)...)
		b = append(b, ds...)
	default:
		b = append(b, ds[:point]...)
		b = append(b, '.')
		b = append(b, ds[point:]...)
	}
	return string(b), true
}

// isDigits reports whether s holds only ASCII digits ("" does).
func isDigits(s string) bool { return strings.Trim(s, "0123456789") == "" }

// authorizationName is the header a bearer token comes in.
const authorizationName = "authorization"

// BearerToken returns the token of r's "Authorization: Bearer <token>"
// header: "" and no error when r has no Authorization header. A header
// that is there but is not exactly one bearer token is an error wrapping
// ErrToken, for the caller to refuse (401) rather than to read a later
// source: sent twice (two lines in REST's multiValueHeaders, two spellings
// of the name, or an HTTP API's comma join), another scheme ("Basic …"),
// no scheme, an empty token, or anything after it. A backend that reads
// the first of two headers, or another scheme, must not see a request
// Sluice charged to someone else, or to the caller's IP.
//
// The scheme is case-insensitive and may be followed by several spaces
// (RFC 6750 §2.1); the token is RFC 6750's b64token. Verify then checks it
// is a JWS in its one spelling.
func BearerToken(r *Request) (string, error) {
	v, n := authorization(r)
	switch {
	case n == 0:
		return "", nil
	case n > 1:
		return "", fmt.Errorf("%w: %d Authorization headers, want one", ErrToken, n)
	}
	v = strings.Trim(v, " \t")
	const scheme = "Bearer"
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) || v[len(scheme)] != ' ' {
		return "", fmt.Errorf("%w: the Authorization header is not \"Bearer <token>\"", ErrToken)
	}
	tok := strings.TrimLeft(v[len(scheme):], " ")
	switch {
	case tok == "":
		return "", fmt.Errorf("%w: the Authorization header has no token", ErrToken)
	case strings.IndexByte(tok, ',') >= 0:
		return "", fmt.Errorf("%w: the Authorization header holds two values", ErrToken)
	case !b64token(tok):
		return "", fmt.Errorf("%w: the Authorization header is not \"Bearer <token>\": the token has a character outside RFC 6750's b64token", ErrToken)
	}
	return tok, nil
}

// authorization returns the value of r's Authorization header and how many
// it has: every line of every spelling of the name in the multi-value map
// (REST), else every spelling in the single-value map. A single value that
// is not the multi-value map's one line counts as a second.
func authorization(r *Request) (v string, n int) {
	for k, vs := range r.MultiHeaders {
		if len(vs) > 0 && strings.EqualFold(k, authorizationName) {
			v, n = vs[0], n+len(vs)
		}
	}
	multi := n
	for k, s := range r.Headers {
		if strings.EqualFold(k, authorizationName) {
			switch {
			case multi == 0:
				v, n = s, n+1
			case s != v:
				n++
			}
		}
	}
	return v, n
}

// b64token reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func b64token(s string) bool {
	body := strings.TrimRight(s, "=")
	return body != "" && strings.Trim(body, alnum+"-._~+/") == ""
}

// strictBase64URL decodes base64url without padding and refuses a last
// character whose unused bits are not zero (RFC 4648 §3.5).
var strictBase64URL = base64.RawURLEncoding.Strict()

// canonicalJWS checks that token is a JWS compact serialization in the one
// spelling RFC 7515 allows: three segments of base64url without padding,
// each the encoding of its bytes. go-jose decodes each segment leniently,
// ignoring a last character's unused bits and any CR or LF, and verifies
// the signature over its own re-encoding of header and payload: without
// this check one signed token has many spellings (16 for an ES256 or
// RS256 signature's last character alone), each of which verifies.
func canonicalJWS(token string) error {
	n := 0
	for seg := range strings.SplitSeq(token, ".") {
		n++
		if n > 3 {
			break
		}
		if strings.ContainsAny(seg, "\r\n") {
			return fmt.Errorf("segment %d holds a line break", n)
		}
		if _, err := strictBase64URL.DecodeString(seg); err != nil {
			return fmt.Errorf("segment %d is not canonical base64url: %w", n, err)
		}
	}
	if n != 3 {
		return errors.New("a compact JWS has three segments")
	}
	return nil
}

// payload keeps a token's verified payload as it is, for a decoder that
// keeps numbers exact: go-jose decodes a number into a float64.
type payload []byte

// UnmarshalJSON keeps a copy of b.
func (p *payload) UnmarshalJSON(b []byte) error {
	*p = append((*p)[:0], b...)
	return nil
}

// Verify checks token and returns its claims. Every failure wraps
// ErrToken: a malformed or oversized token, one not in its canonical
// spelling (canonicalJWS), an algorithm outside
// Algorithms (alg "none" included), an unknown key, a bad signature, the
// wrong issuer, audience or token_use, an expired or not yet valid token,
// or one without exp.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	if len(token) > MaxTokenLen {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrToken, len(token), MaxTokenLen)
	}
	if err := canonicalJWS(token); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrToken, err)
	}
	tok, err := jwt.ParseSigned(token, Algorithms)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrToken, err)
	}
	if len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: %d signatures", ErrToken, len(tok.Headers))
	}
	h := tok.Headers[0]
	key, err := v.key(ctx, h.KeyID)
	if err != nil {
		return nil, err
	}
	if key.Algorithm != "" && key.Algorithm != h.Algorithm {
		return nil, fmt.Errorf("%w: token alg %s, key %q is for %s", ErrToken, h.Algorithm, key.KeyID, key.Algorithm)
	}
	var (
		std jwt.Claims
		raw payload
		all map[string]any
	)
	if err := tok.Claims(key.Key, &std, &raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrToken, err)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&all); err != nil {
		return nil, fmt.Errorf("%w: claims: %w", ErrToken, err)
	}
	if std.Expiry == nil {
		return nil, fmt.Errorf("%w: no exp claim", ErrToken)
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.o.Issuer, Time: v.o.Now()}, v.o.Leeway); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrToken, err)
	}
	c := Claims(all)
	if !v.audienceOK(std.Audience, c) {
		return nil, fmt.Errorf("%w: audience %v is not in JWT_AUDIENCE", ErrToken, []string(std.Audience))
	}
	if v.o.TokenUse != "" {
		if use, _ := c.String("token_use"); use != v.o.TokenUse {
			return nil, fmt.Errorf("%w: token_use %q, want %q", ErrToken, use, v.o.TokenUse)
		}
	}
	return c, nil
}

// audienceOK reports whether aud, or a Cognito access token's client_id
// (which has no aud), names one of the audiences.
func (v *Verifier) audienceOK(aud jwt.Audience, c Claims) bool {
	if slices.ContainsFunc(v.o.Audience, aud.Contains) {
		return true
	}
	id, ok := c["client_id"].(string)
	return len(aud) == 0 && ok && slices.Contains(v.o.Audience, id)
}
