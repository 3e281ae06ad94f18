package identity

import (
	"context"
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
	bearerPrefix       = "bearer "
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
	if o.JWKSURL == "" {
		o.JWKSURL = strings.TrimSuffix(o.Issuer, "/") + wellKnownJWKSPath
	}
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
	return v.lookupLocked(kid)
}

func (v *Verifier) lookupLocked(kid string) *jose.JSONWebKey {
	for i := range v.keys.Keys {
		k := &v.keys.Keys[i]
		// A token without kid matches only a JWKS with one key.
		if k.KeyID == kid || kid == "" && len(v.keys.Keys) == 1 {
			return k
		}
	}
	return nil
}

// Claims are a verified token's claims.
type Claims map[string]any

// String returns claim name as a string: a string as is, a number in its
// JSON form, a boolean as true/false. Other values (objects, arrays) and
// absent claims give ok false: they are no subject.
func (c Claims) String(name string) (string, bool) {
	switch v := c[name].(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header in headers (any case); "" when there is none.
func BearerToken(headers map[string]string) string {
	s := Source{Name: "authorization", lower: "authorization", canon: "Authorization"}
	v := strings.TrimSpace(s.header(headers))
	if len(v) < len(bearerPrefix) || !strings.EqualFold(v[:len(bearerPrefix)], bearerPrefix) {
		return ""
	}
	return strings.TrimSpace(v[len(bearerPrefix):])
}

// Verify checks token and returns its claims. Every failure wraps
// ErrToken: a malformed or oversized token, an algorithm outside
// Algorithms (alg "none" included), an unknown key, a bad signature, the
// wrong issuer, audience or token_use, an expired or not yet valid token,
// or one without exp.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	if len(token) > MaxTokenLen {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrToken, len(token), MaxTokenLen)
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
		all map[string]any
	)
	if err := tok.Claims(key.Key, &std, &all); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrToken, err)
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
	for _, a := range v.o.Audience {
		if aud.Contains(a) {
			return true
		}
	}
	if len(aud) == 0 {
		if id, ok := c["client_id"].(string); ok && slices.Contains(v.o.Audience, id) {
			return true
		}
	}
	return false
}
