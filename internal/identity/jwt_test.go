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
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
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
// can rotate its keys, stall and go down.
type issuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey // public keys published
	stall   func()            // nil, or run before each fetch is answered
	down    atomic.Bool
	fetches atomic.Int64
}

// newIssuer serves a JWKS publishing keys.
func newIssuer(t *testing.T, keys ...signingKey) *issuer {
	t.Helper()
	is := &issuer{}
	is.publish(keys...)
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		stall := is.stall
		is.mu.Unlock()
		if stall != nil {
			stall()
		}
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

func isTokenErr(err error) bool { return errors.Is(err, identity.ErrToken) }
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

// respell returns seg, a base64url segment, with its last character
// changed to one that base64.RawURLEncoding (go-jose's decoder) reads as
// the same bytes: an unused trailing bit set. "" when seg has no unused
// bits (a length that is a multiple of 4).
func respell(tb testing.TB, seg string) string {
	tb.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if len(seg)%4 == 0 {
		return ""
	}
	out := seg[:len(seg)-1] + string(alphabet[strings.IndexByte(alphabet, seg[len(seg)-1])^1])
	a, errA := base64.RawURLEncoding.DecodeString(seg)
	b, errB := base64.RawURLEncoding.DecodeString(out)
	if errA != nil || errB != nil || string(a) != string(b) {
		tb.Fatalf("respell(%q) = %q does not decode to the same bytes", seg, out)
	}
	return out
}

// TestVerify covers every acceptance and rejection path of a token against
// a JWKS of an RSA and an EC key.
func TestVerify(t *testing.T) {
	t.Parallel()
	rs, ec, other := rsaKey(t, "rs"), ecKey(t, "ec"), rsaKey(t, "rs")
	is := newIssuer(t, rs, ec)
	c := newClock(now)
	v := verifier(t, is, c, "")

	forged := sign(t, other, claims(nil)) // same kid, another key
	parts := strings.Split(sign(t, rs, claims(nil)), ".")
	none := b64(`{"alg":"none","kid":"rs"}`) + "." + parts[1] + "."
	hs := b64(`{"alg":"HS256","kid":"rs"}`) + "." + parts[1] + "." + parts[2]
	tampered := parts[0] + "." + b64(`{"iss":"https://issuer.example","aud":"app-1","sub":"mallory","exp":9999999999}`) + "." + parts[2]
	// An RS256 signature (256 bytes) and an ES256 one (64) end in a
	// character with 4 unused bits; go-jose's lenient decoding reads 16
	// spellings of it as one signature.
	ecParts := strings.Split(sign(t, ec, claims(nil)), ".")
	respelled := map[string]string{
		"RS256 signature respelled":   parts[0] + "." + parts[1] + "." + respell(t, parts[2]),
		"ES256 signature respelled":   ecParts[0] + "." + ecParts[1] + "." + respell(t, ecParts[2]),
		"signature with a line break": parts[0] + "." + parts[1] + "." + parts[2][:10] + "\n" + parts[2][10:],
		"payload with a line break":   parts[0] + "." + parts[1][:10] + "\r\n" + parts[1][10:] + "." + parts[2],
		"padded signature":            parts[0] + "." + parts[1] + "." + base64.URLEncoding.EncodeToString(mustDecode(t, parts[2])),
	}
	// go-jose verifies over its own re-encoding of header and payload, so
	// their spelling is malleable too; claims whose encoding has unused
	// bits show it.
	for i := 0; len(respelled) < 7; i++ {
		p := strings.Split(sign(t, rs, claims(map[string]any{"pad": strings.Repeat("x", i)})), ".")
		if r := respell(t, p[1]); r != "" {
			respelled["payload respelled"] = p[0] + "." + r + "." + p[2]
		}
		if r := respell(t, p[0]); r != "" {
			respelled["header respelled"] = r + "." + p[1] + "." + p[2]
		}
		if i > 8 {
			t.Fatal("no claims whose encoding has unused bits")
		}
	}

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
		{"RS256 signature respelled", respelled["RS256 signature respelled"], ""},
		{"ES256 signature respelled", respelled["ES256 signature respelled"], ""},
		{"payload respelled", respelled["payload respelled"], ""},
		{"header respelled", respelled["header respelled"], ""},
		{"signature with a line break", respelled["signature with a line break"], ""},
		{"payload with a line break", respelled["payload with a line break"], ""},
		{"padded signature", respelled["padded signature"], ""},
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
	// Each respelled token decodes, leniently, to the very bytes of a
	// token that verifies: only its spelling is refused.
	for name, tok := range respelled {
		if strings.ContainsAny(tok, "\r\n=") {
			continue
		}
		ps := strings.Split(tok, ".")
		canon := make([]string, 3)
		for i, p := range ps {
			canon[i] = base64.RawURLEncoding.EncodeToString(mustDecode(t, p))
		}
		if _, err := v.Verify(context.Background(), strings.Join(canon, ".")); err != nil {
			t.Errorf("%s: the canonical spelling does not verify (%v): the test proves nothing", name, err)
		}
	}
}

func mustDecode(tb testing.TB, seg string) []byte {
	tb.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// signPayload signs payload, JSON text, as it is: a test controls how each
// number is written.
func signPayload(t *testing.T, k signingKey, payload string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestVerifyNumbers: numeric claims are read exactly, one string per
// number: 2^53+1 is not 2^53 (a float64 makes them one), and 1e3 is 1000.
// A claim with no string form is refused by the sources, not passed over.
func TestVerifyNumbers(t *testing.T) {
	t.Parallel()
	rs := rsaKey(t, "rs")
	is := newIssuer(t, rs)
	v := verifier(t, is, newClock(now), "")
	base := `{"iss":"https://issuer.example","aud":"app-1","exp":` + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `,"uid":`
	sources, err := identity.ParseSources("jwt:uid,ip")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		uid, want string
		f         identity.Finding
	}{
		{"9007199254740993", "9007199254740993", identity.Found},
		{"9007199254740992", "9007199254740992", identity.Found},
		{"123456789012345678901234567890", "123456789012345678901234567890", identity.Found},
		{"-9007199254740993", "-9007199254740993", identity.Found},
		{"1e3", "1000", identity.Found},
		{"1E+3", "1000", identity.Found},
		{"1000.000", "1000", identity.Found},
		{"12.50", "12.5", identity.Found},
		{"125e-1", "12.5", identity.Found},
		{"0.000125e2", "0.0125", identity.Found},
		{"-0", "0", identity.Found},
		{"0e999999999999", "0", identity.Found},
		{"true", "true", identity.Found},
		{`"u-1"`, "u-1", identity.Found},
		{`""`, "192.0.2.1", identity.Found}, // empty: absent, as an empty header
		{"null", "192.0.2.1", identity.Found},
		{`{"id":1}`, "", identity.Refused},
		{`[1]`, "", identity.Refused},
		{"1e300", "", identity.Refused},
		{"1e-300", "", identity.Refused},
	} {
		c, err := v.Verify(context.Background(), signPayload(t, rs, base+tc.uid+"}"))
		if err != nil {
			t.Errorf("Verify(uid %s) error = %v", tc.uid, err)
			continue
		}
		got, _, f := identity.Find(sources, &identity.Request{Claims: c, SourceIP: "192.0.2.1"})
		if got != tc.want || f != tc.f {
			t.Errorf("uid %s: Find = %q, %v; want %q, %v", tc.uid, got, f, tc.want, tc.f)
		}
	}
}

// TestNumber: Number's decimal form of JSON number literals, and what it
// refuses.
func TestNumber(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "7": "7", "-7": "-7", "9007199254740993": "9007199254740993",
		"1.0": "1", "1.5": "1.5", "-1.50": "-1.5", "0.5": "0.5", "0.05e1": "0.5", "5e-1": "0.5",
		"1e0": "1", "1e+2": "100", "1E2": "100", "12.34e1": "123.4", "12.34e-3": "0.01234", "0.0e5": "0",
		"1e255": "1" + strings.Repeat("0", 255),
		// Not numbers, or too long.
		"": "", "-": "", "+1": "", "01": "", "1.": "", ".5": "", "1e": "", "1e+": "", "1e++1": "", "1e+-1": "",
		"0x10": "", "1 ": "", "NaN": "", "1e256": "", "-1e255": "", "1e-255": "", strings.Repeat("9", 257): "",
	} {
		got, ok := identity.Number(in)
		if got != want || ok != (want != "") {
			t.Errorf("Number(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// FuzzNumber: for every JSON number, Number's form is the same number
// (exactly, by big.Rat), written as Number writes it (a fixed point), and
// the same for every spelling of it.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "9007199254740993", "1e3", "12.50", "0.0001e-4", "-1.5E+7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, n string) {
		got, ok := identity.Number(n)
		var x any
		dec := json.NewDecoder(strings.NewReader(n))
		dec.UseNumber()
		isJSON := json.Valid([]byte(n)) && dec.Decode(&x) == nil
		if _, isNum := x.(json.Number); !isNum || strings.TrimSpace(n) != n {
			isJSON = false
		}
		if !isJSON {
			if ok {
				t.Fatalf("Number(%q) = %q, want no number", n, got)
			}
			return
		}
		if !ok {
			if len(got) > 0 || len(n) <= 20 && !strings.ContainsAny(n, "eE") {
				t.Fatalf("Number(%q) = %q, false; want its form", n, got)
			}
			return
		}
		// big.Rat takes exponents that fit an int32 only.
		want, okW := new(big.Rat).SetString(n)
		have, okH := new(big.Rat).SetString(got)
		if !okH || okW && want.Cmp(have) != 0 || !okW && got != "0" {
			t.Fatalf("Number(%q) = %q: another number", n, got)
		}
		if again, _ := identity.Number(got); again != got || strings.ContainsAny(got, "eE+") || len(got) > identity.MaxSubjectLen {
			t.Fatalf("Number(%q) = %q, which is not its own form (%q)", n, got, again)
		}
		// Another spelling of the same number: an exponent and a zero.
		other := n
		if !strings.ContainsAny(n, "eE") {
			if !strings.Contains(other, ".") {
				other += ".0"
			}
			other += "0e0"
		}
		if o, _ := identity.Number(other); o != got {
			t.Fatalf("Number(%q) = %q, Number(%q) = %q: one number, two forms", n, got, other, o)
		}
	})
}

func TestVerifyTokenUse(t *testing.T) {
	t.Parallel()
	rs := rsaKey(t, "rs")
	is := newIssuer(t, rs)
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
	is := newIssuer(t, old)
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
	is := newIssuer(t, rs)
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
	is := newIssuer(t, rs)
	v, err := identity.NewVerifier(context.Background(), identity.JWTOptions{Issuer: is.srv.URL + "/", Audience: []string{"app-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := v.JWKSURL(), is.srv.URL+"/.well-known/jwks.json"; got != want {
		t.Errorf("JWKSURL() = %q, want %q", got, want)
	}
}

// TestBearerToken: the token of exactly one "Bearer <token>" header, in
// any spelling of the name and the scheme; no header is no token; anything
// else is ErrToken, never "no token" (which would let the request fall
// through to a later source, such as the IP).
func TestBearerToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		r     identity.Request
		token string // "" with ok: no header
		ok    bool
	}{
		{"none", identity.Request{Headers: map[string]string{"accept": "*/*"}}, "", true},
		{"nil maps", identity.Request{}, "", true},
		{"one", identity.Request{Headers: map[string]string{"Authorization": "Bearer abc.def.ghi"}}, "abc.def.ghi", true},
		{"scheme in any case, spaces", identity.Request{Headers: map[string]string{"authorization": " bearer  abc "}}, "abc", true},
		{"name in any case", identity.Request{Headers: map[string]string{"AUTHORIZATION": "BEARER abc"}}, "abc", true},
		{"b64token with padding", identity.Request{Headers: map[string]string{"authorization": "Bearer a+b/c~=="}}, "a+b/c~==", true},
		{"REST: one line", identity.Request{Headers: map[string]string{"Authorization": "Bearer abc"},
			MultiHeaders: map[string][]string{"Authorization": {"Bearer abc"}}}, "abc", true},
		{"REST: only the multi-value map", identity.Request{MultiHeaders: map[string][]string{"authorization": {"Bearer abc"}}}, "abc", true},
		{"REST: two lines", identity.Request{Headers: map[string]string{"Authorization": "Bearer b"},
			MultiHeaders: map[string][]string{"Authorization": {"Bearer a", "Bearer b"}}}, "", false},
		{"REST: two lines under two spellings", identity.Request{Headers: map[string]string{"Authorization": "Bearer b"},
			MultiHeaders: map[string][]string{"authorization": {"Bearer a"}, "Authorization": {"Bearer b"}}}, "", false},
		{"REST: maps disagree", identity.Request{Headers: map[string]string{"Authorization": "Bearer b"},
			MultiHeaders: map[string][]string{"Authorization": {"Bearer a"}}}, "", false},
		{"two spellings of the name", identity.Request{Headers: map[string]string{"authorization": "Bearer a", "Authorization": "Bearer a"}}, "", false},
		{"HTTP API: joined", identity.Request{Headers: map[string]string{"authorization": "Bearer a,Bearer b"}}, "", false},
		{"HTTP API: joined with a space", identity.Request{Headers: map[string]string{"authorization": "Bearer a, Bearer b"}}, "", false},
		{"Basic", identity.Request{Headers: map[string]string{"authorization": "Basic YTpi"}}, "", false},
		{"no scheme", identity.Request{Headers: map[string]string{"authorization": "abc.def.ghi"}}, "", false},
		{"scheme only", identity.Request{Headers: map[string]string{"authorization": "Bearer"}}, "", false},
		{"scheme and spaces", identity.Request{Headers: map[string]string{"authorization": "Bearer   "}}, "", false},
		{"no space", identity.Request{Headers: map[string]string{"authorization": "Bearerabc"}}, "", false},
		{"tab for a space", identity.Request{Headers: map[string]string{"authorization": "Bearer\tabc"}}, "", false},
		{"empty", identity.Request{Headers: map[string]string{"authorization": ""}}, "", false},
		{"two words", identity.Request{Headers: map[string]string{"authorization": "Bearer abc def"}}, "", false},
		{"only padding", identity.Request{Headers: map[string]string{"authorization": "Bearer =="}}, "", false},
		{"padding inside", identity.Request{Headers: map[string]string{"authorization": "Bearer a=b"}}, "", false},
	} {
		tok, err := identity.BearerToken(&tc.r)
		switch {
		case tc.ok && (err != nil || tok != tc.token):
			t.Errorf("%s: BearerToken = %q, %v; want %q", tc.name, tok, err, tc.token)
		case !tc.ok && !isTokenErr(err):
			t.Errorf("%s: BearerToken = %q, %v; want ErrToken", tc.name, tok, err)
		}
	}
}

// FuzzBearerToken: whatever the Authorization lines, BearerToken returns
// a token only for exactly one line of the form "Bearer <b64token>", and
// that token is the line's, unchanged; it never panics.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  a.b.c ", "Basic abc", "Bearer a,Bearer b", "Bearer a, Bearer b", "", "Bearer", "Bearer ==", "Bearer a=b="} {
		f.Add(s, "", false)
		f.Add(s, s, true)
	}
	f.Fuzz(func(t *testing.T, first, second string, two bool) {
		r := identity.Request{Headers: map[string]string{"Authorization": first}, MultiHeaders: map[string][]string{"Authorization": {first}}}
		if two {
			r.Headers["Authorization"] = second
			r.MultiHeaders["Authorization"] = []string{first, second}
		}
		tok, err := identity.BearerToken(&r)
		if err != nil {
			if !isTokenErr(err) || tok != "" {
				t.Fatalf("BearerToken(%q, %q, %v) = %q, %v; want an ErrToken and no token", first, second, two, tok, err)
			}
			return
		}
		if two {
			t.Fatalf("BearerToken(two lines %q, %q) = %q, want ErrToken", first, second, tok)
		}
		v := strings.Trim(first, " \t")
		if tok == "" || !strings.EqualFold(v[:7], "Bearer ") || strings.TrimLeft(v[7:], " ") != tok ||
			strings.ContainsAny(tok, " \t,\r\n") {
			t.Fatalf("BearerToken(%q) = %q: not the one token of a Bearer header", first, tok)
		}
	})
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
	gp := strings.Split(good, ".")
	f.Add(gp[0] + "." + gp[1] + "." + respell(f, gp[2])) // the same signature bytes
	f.Add(gp[0] + "." + gp[1] + "\n." + gp[2])
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
		// Accepted: it must be the one token signed, in its one spelling
		// (RSA PKCS #1 v1.5 signatures are deterministic).
		if sub, _ := c.String("sub"); sub != "alice" {
			t.Fatalf("Verify(%q) accepted sub %q", tok, sub)
		}
		if tok != good {
			t.Fatalf("Verify(%q) accepted another spelling of %q", tok, good)
		}
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
	is := newIssuer(t, rs)
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

// TestVerifySlowJWKS: while an unknown kid's refetch waits on a JWKS that
// does not answer, tokens of cached keys verify without waiting for it.
func TestVerifySlowJWKS(t *testing.T) {
	t.Parallel()
	rs := rsaKey(t, "rs")
	is := newIssuer(t, rs)
	c := newClock(now)
	v := verifier(t, is, c, "")
	c.add(time.Minute)
	started, held := make(chan struct{}, 1), make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // before the server closes, should the test stop early
	is.mu.Lock()
	is.stall = func() {
		select {
		case started <- struct{}{}:
		default:
		}
		<-held
	}
	is.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.Verify(context.Background(), sign(t, ecKey(t, "new"), claims(nil)))
	}()
	<-started // the refetch is under way, its answer held
	start := time.Now()
	if _, err := v.Verify(context.Background(), sign(t, rs, claims(nil))); err != nil {
		t.Errorf("Verify(cached key) during a refetch = %v", err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Verify(cached key) took %v during a slow refetch, want no wait", took)
	}
	release()
	<-done
}
