package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/sluicehq/sluice/internal/identity"
)

// issuer is a JWKS served by httptest, with keys generated in the test; it
// can rotate its keys and go down.
type issuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey // public keys published
	down    atomic.Bool
	fetches atomic.Int64
	delay   atomic.Int64 // ns each fetch waits before answering
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		time.Sleep(time.Duration(is.delay.Load()))
		if is.down.Load() || r.URL.Path != "/.well-known/jwks.json" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		is.mu.Lock()
		defer is.mu.Unlock()
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: is.keys})
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) publish(keys ...signingKey) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = is.keys[:0]
	for _, k := range keys {
		is.keys = append(is.keys, k.public())
	}
}

type signingKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv any
}

func (k signingKey) public() jose.JSONWebKey {
	var pub any
	switch p := k.priv.(type) {
	case *rsa.PrivateKey:
		pub = &p.PublicKey
	case *ecdsa.PrivateKey:
		pub = &p.PublicKey
	}
	return jose.JSONWebKey{Key: pub, KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

func rsaKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: jose.RS256, priv: k}
}

func ecKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: jose.ES256, priv: k}
}

// sign returns a compact token of claims signed by k.
func sign(t *testing.T, k signingKey, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func claims(over map[string]any) map[string]any {
	c := map[string]any{
		"iss": "https://issuer.example", "aud": "app-1", "sub": "alice",
		"exp": now.Add(time.Hour).Unix(), "iat": now.Add(-time.Minute).Unix(), "custom:tenant": "acme",
	}
	for k, v := range over {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// clock is a settable time for the verifier.
type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(0, c.t.Load()) }
func (c *clock) add(d time.Duration) { c.t.Add(int64(d)) }
func newClock(t time.Time) *clock    { c := &clock{}; c.t.Store(t.UnixNano()); return c }
func b64(s string) string            { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
func isTokenErr(err error) bool      { return errors.Is(err, identity.ErrToken) }
func verifier(t *testing.T, is *issuer, c *clock, use string) *identity.Verifier {
	t.Helper()
	v, err := identity.NewVerifier(context.Background(), identity.JWTOptions{
		Issuer: "https://issuer.example", Audience: []string{"app-1", "app-2"}, TokenUse: use,
		JWKSURL: is.srv.URL + "/.well-known/jwks.json", Now: c.now, Leeway: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

// TestVerify covers every acceptance and rejection path of a token against
// a JWKS of an RSA and an EC key.
func TestVerify(t *testing.T) {
	t.Parallel()
	rs, ec, other := rsaKey(t, "rs"), ecKey(t, "ec"), rsaKey(t, "rs")
	is := newIssuer(t)
	is.publish(rs, ec)
	c := newClock(now)
	v := verifier(t, is, c, "")

	forged := sign(t, other, claims(nil)) // same kid, another key
	parts := strings.Split(sign(t, rs, claims(nil)), ".")
	none := b64(`{"alg":"none","kid":"rs"}`) + "." + parts[1] + "."
	hs := b64(`{"alg":"HS256","kid":"rs"}`) + "." + parts[1] + "." + parts[2]
	tampered := parts[0] + "." + b64(`{"iss":"https://issuer.example","aud":"app-1","sub":"mallory","exp":9999999999}`) + "." + parts[2]

	tests := []struct {
		name  string
		token string
		sub   string // "" wants a rejection
	}{
		{"RS256", sign(t, rs, claims(nil)), "alice"},
		{"ES256", sign(t, ec, claims(nil)), "alice"},
		{"second audience", sign(t, rs, claims(map[string]any{"aud": []string{"other", "app-2"}})), "alice"},
		{"Cognito access token: client_id, no aud", sign(t, rs, claims(map[string]any{"aud": nil, "client_id": "app-1"})), "alice"},
		{"expired within the leeway", sign(t, rs, claims(map[string]any{"exp": now.Add(-3 * time.Second).Unix()})), "alice"},
		{"bad signature", forged, ""},
		{"tampered payload", tampered, ""},
		{"alg none", none, ""},
		{"alg HS256 with the public key", hs, ""},
		{"wrong iss", sign(t, rs, claims(map[string]any{"iss": "https://evil.example"})), ""},
		{"wrong aud", sign(t, rs, claims(map[string]any{"aud": "app-3"})), ""},
		{"Cognito client_id not ours", sign(t, rs, claims(map[string]any{"aud": nil, "client_id": "app-9"})), ""},
		{"client_id ignored when aud is wrong", sign(t, rs, claims(map[string]any{"aud": "app-3", "client_id": "app-1"})), ""},
		{"expired", sign(t, rs, claims(map[string]any{"exp": now.Add(-time.Minute).Unix()})), ""},
		{"not yet valid", sign(t, rs, claims(map[string]any{"nbf": now.Add(time.Minute).Unix()})), ""},
		{"issued in the future", sign(t, rs, claims(map[string]any{"iat": now.Add(time.Hour).Unix()})), ""},
		{"no exp", sign(t, rs, claims(map[string]any{"exp": nil})), ""},
		{"garbage", "a.b.c", ""},
		{"empty", "", ""},
		{"oversized", strings.Repeat("a", identity.MaxTokenLen+1), ""},
	}
	for _, tc := range tests {
		got, err := v.Verify(context.Background(), tc.token)
		switch {
		case tc.sub == "" && !isTokenErr(err):
			t.Errorf("Verify(%s) = %v, %v; want ErrToken", tc.name, got, err)
		case tc.sub != "" && err != nil:
			t.Errorf("Verify(%s) error = %v, want none", tc.name, err)
		case tc.sub != "":
			if sub, _ := got.String("sub"); sub != tc.sub {
				t.Errorf("Verify(%s) sub = %q, want %q", tc.name, sub, tc.sub)
			}
		}
	}
	if got, err := v.Verify(context.Background(), sign(t, rs, claims(nil))); err == nil {
		if tenant, ok := got.String("custom:tenant"); !ok || tenant != "acme" {
			t.Errorf("custom:tenant = %q, %v; want acme", tenant, ok)
		}
	}
}

func TestVerifyTokenUse(t *testing.T) {
	t.Parallel()
	rs := rsaKey(t, "rs")
	is := newIssuer(t)
	is.publish(rs)
	v := verifier(t, is, newClock(now), "access")
	if _, err := v.Verify(context.Background(), sign(t, rs, claims(map[string]any{"token_use": "access"}))); err != nil {
		t.Errorf("Verify(token_use access) error = %v", err)
	}
	for _, use := range []any{"id", nil} {
		if _, err := v.Verify(context.Background(), sign(t, rs, claims(map[string]any{"token_use": use}))); !isTokenErr(err) {
			t.Errorf("Verify(token_use %v) error = %v, want ErrToken", use, err)
		}
	}
}

// TestVerifyRotation: a token of an unknown kid is refused; the JWKS is
// refetched for it at most once per Refetch window (5s), and once the
// issuer publishes the new key, its tokens pass. The old key, dropped by
// the issuer, stops passing after the refetch.
func TestVerifyRotation(t *testing.T) {
	t.Parallel()
	old, next := rsaKey(t, "2026-11"), ecKey(t, "2026-12")
	is := newIssuer(t)
	is.publish(old)
	c := newClock(now)
	v := verifier(t, is, c, "")
	ctx := context.Background()
	if n := is.fetches.Load(); n != 1 {
		t.Fatalf("fetches after NewVerifier = %d, want 1", n)
	}
	newTok := sign(t, next, claims(nil))
	if _, err := v.Verify(ctx, newTok); !isTokenErr(err) {
		t.Fatalf("Verify(unknown kid) error = %v, want ErrToken", err)
	}
	// Within 5s of the last fetch, unknown kids do not refetch: a flood of
	// made-up kids costs the issuer one fetch per window.
	for range 100 {
		v.Verify(ctx, newTok)
	}
	if n := is.fetches.Load(); n != 1 {
		t.Errorf("fetches after 101 unknown-kid tokens within the window = %d, want 1", n)
	}
	is.publish(next) // the issuer rotates
	if _, err := v.Verify(ctx, newTok); !isTokenErr(err) {
		t.Errorf("Verify(new kid, still within the window) error = %v, want ErrToken", err)
	}
	c.add(identity.DefaultJWKSRefetch)
	if _, err := v.Verify(ctx, newTok); err != nil {
		t.Errorf("Verify(new kid after the window) error = %v, want none", err)
	}
	if n := is.fetches.Load(); n != 2 {
		t.Errorf("fetches = %d, want 2", n)
	}
	if _, err := v.Verify(ctx, sign(t, old, claims(nil))); !isTokenErr(err) {
		t.Errorf("Verify(retired key) error = %v, want ErrToken", err)
	}
}

// TestVerifyJWKSDown: with the JWKS down, the cached keys keep verifying;
// an unknown kid is refused; a verifier whose first fetch failed refuses
// every token and recovers when the JWKS is back.
func TestVerifyJWKSDown(t *testing.T) {
	t.Parallel()
	rs, next := rsaKey(t, "rs"), rsaKey(t, "next")
	is := newIssuer(t)
	is.publish(rs)
	c := newClock(now)
	v := verifier(t, is, c, "")
	ctx := context.Background()

	is.down.Store(true)
	c.add(time.Minute)
	if _, err := v.Verify(ctx, sign(t, next, claims(nil))); !isTokenErr(err) {
		t.Errorf("Verify(unknown kid, JWKS down) error = %v, want ErrToken", err)
	}
	if _, err := v.Verify(ctx, sign(t, rs, claims(nil))); err != nil {
		t.Errorf("Verify(cached key, JWKS down) error = %v, want none: a failed fetch keeps the keys", err)
	}

	cold := newClock(now)
	v2, err := identity.NewVerifier(ctx, identity.JWTOptions{
		Issuer: "https://issuer.example", Audience: []string{"app-1"},
		JWKSURL: is.srv.URL + "/.well-known/jwks.json", Now: cold.now,
	})
	if err == nil || v2 == nil {
		t.Fatalf("NewVerifier(JWKS down) = %v, %v; want a verifier and the error", v2, err)
	}
	tok := sign(t, rs, claims(nil))
	if _, err := v2.Verify(ctx, tok); !isTokenErr(err) {
		t.Errorf("Verify(no keys yet) error = %v, want ErrToken", err)
	}
	is.down.Store(false)
	cold.add(identity.DefaultJWKSRefetch)
	if _, err := v2.Verify(ctx, tok); err != nil {
		t.Errorf("Verify(JWKS back) error = %v, want none", err)
	}
}

func TestVerifierDefaultJWKSURL(t *testing.T) {
	t.Parallel()
	rs := rsaKey(t, "rs")
	is := newIssuer(t)
	is.publish(rs)
	v, err := identity.NewVerifier(context.Background(), identity.JWTOptions{Issuer: is.srv.URL + "/", Audience: []string{"app-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := v.JWKSURL(), is.srv.URL+"/.well-known/jwks.json"; got != want {
		t.Errorf("JWKSURL() = %q, want %q", got, want)
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Bearer abc": "abc", "bearer  abc ": "abc", "BEARER abc": "abc",
		"Basic abc": "", "Bearer": "", "": "", "Bearerabc": "",
	} {
		for _, name := range []string{"Authorization", "authorization", "AUTHORIZATION"} {
			if got := identity.BearerToken(map[string]string{name: in}); got != want {
				t.Errorf("BearerToken(%s: %q) = %q, want %q", name, in, got, want)
			}
		}
	}
}

// FuzzVerify: whatever the token, Verify never panics and never accepts
// what no key signed.
func FuzzVerify(f *testing.F) {
	rs := signingKey{kid: "rs", alg: jose.RS256}
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	rs.priv = k
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{rs.public()}})
	}))
	defer srv.Close()
	v, err := identity.NewVerifier(context.Background(), identity.JWTOptions{
		Issuer: "https://issuer.example", Audience: []string{"app-1"}, JWKSURL: srv.URL, Now: func() time.Time { return now },
		Refetch: time.Hour,
	})
	if err != nil {
		f.Fatal(err)
	}
	s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: k, KeyID: "rs"}}, nil)
	good, _ := jwt.Signed(s).Claims(claims(nil)).Serialize()
	f.Add(good)
	f.Add("")
	f.Add("a.b.c")
	f.Add(b64(`{"alg":"none"}`) + "." + b64(`{"sub":"x"}`) + ".")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Verify(context.Background(), tok)
		if err != nil {
			if !isTokenErr(err) {
				t.Fatalf("Verify(%q) error %v does not wrap ErrToken", tok, err)
			}
			return
		}
		// Accepted: it must carry the signed claims (only the signature's
		// own bytes may differ, in their encoding).
		if sub, _ := c.String("sub"); sub != "alice" {
			t.Fatalf("Verify(%q) accepted sub %q", tok, sub)
		}
		identity.BearerToken(map[string]string{"authorization": "Bearer " + tok})
	})
}

// BenchmarkVerify is the cost a jwt: source adds to a decision: parse,
// key lookup, signature and claim checks of one token.
func BenchmarkVerify(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256"} {
		b.Run(alg, func(b *testing.B) {
			t := &testing.T{}
			k := rsaKey(t, "k")
			if alg == "ES256" {
				k = ecKey(t, "k")
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.public()}})
			}))
			defer srv.Close()
			v, err := identity.NewVerifier(context.Background(), identity.JWTOptions{
				Issuer: "https://issuer.example", Audience: []string{"app-1"}, JWKSURL: srv.URL, Now: func() time.Time { return now },
			})
			if err != nil {
				b.Fatal(err)
			}
			tok := sign(t, k, claims(nil))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestVerifyConcurrent: verifications and refetches from many goroutines
// at once (run with -race); concurrent unknown kids still fetch once per
// window.
func TestVerifyConcurrent(t *testing.T) {
	t.Parallel()
	rs := rsaKey(t, "rs")
	is := newIssuer(t)
	is.publish(rs)
	c := newClock(now)
	v := verifier(t, is, c, "")
	good, unknown := sign(t, rs, claims(nil)), sign(t, ecKey(t, "nope"), claims(nil))
	c.add(time.Minute) // the next unknown kid may refetch
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if _, err := v.Verify(context.Background(), good); err != nil {
					t.Errorf("Verify(good) = %v", err)
				}
				v.Verify(context.Background(), unknown)
			}
		})
	}
	wg.Wait()
	if n := is.fetches.Load(); n != 2 {
		t.Errorf("fetches = %d, want 2 (init, one refetch)", n)
	}
}

// TestVerifySlowJWKS: while an unknown kid's refetch waits on a slow JWKS
// (1s), tokens of cached keys verify without waiting for it.
func TestVerifySlowJWKS(t *testing.T) {
	t.Parallel()
	rs := rsaKey(t, "rs")
	is := newIssuer(t)
	is.publish(rs)
	c := newClock(now)
	v := verifier(t, is, c, "")
	c.add(time.Minute)
	is.delay.Store(int64(time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.Verify(context.Background(), sign(t, ecKey(t, "new"), claims(nil)))
	}()
	for is.fetches.Load() < 2 { // the refetch has started
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if _, err := v.Verify(context.Background(), sign(t, rs, claims(nil))); err != nil {
		t.Errorf("Verify(cached key) during a refetch = %v", err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Verify(cached key) took %v during a slow refetch, want no wait", took)
	}
	<-done
}
