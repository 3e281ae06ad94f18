package apigw_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/testenv"
)

// jwtIssuer is an ES256 issuer served by httptest, signing any payload.
type jwtIssuer struct {
	url    string
	signer jose.Signer
}

func newJWTIssuer(t testing.TB) *jwtIssuer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(jwks) }))
	t.Cleanup(srv.Close)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k, KeyID: "k1"}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	return &jwtIssuer{url: srv.URL, signer: s}
}

// token signs a claims payload given as JSON text after the standard
// claims, so a test controls how each number is written.
func (is *jwtIssuer) token(t testing.TB, extra string) string {
	t.Helper()
	payload := `{"iss":"https://issuer.example","aud":"app-1","exp":` + jsonInt(time.Now().Add(time.Hour).Unix()) + `,` + extra + `}`
	jws, err := is.signer.Sign([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// jwtAuthorizer is the Lambda handler with SUBJECT_SOURCES=jwt:uid,ip over
// real Redis: 100 a minute on any API.
func jwtAuthorizer(t *testing.T, is *jwtIssuer) *apigw.Handler {
	t.Helper()
	return jwtAuthorizerOn(t, is, testenv.Redis(t))
}

// jwtAuthorizerOn is jwtAuthorizer over client c.
func jwtAuthorizerOn(t testing.TB, is *jwtIssuer, c *redis.Client) *apigw.Handler {
	t.Helper()
	v, err := identity.NewVerifier(context.Background(), identity.JWTOptions{Issuer: "https://issuer.example",
		Audience: []string{"app-1"}, JWKSURL: is.url})
	if err != nil {
		t.Fatal(err)
	}
	sources, err := identity.ParseSources("jwt:uid,ip")
	if err != nil {
		t.Fatal(err)
	}
	lim := limiter.New(c, limiter.Options{Prefix: testenv.Prefix(t, "apigw-jwt"), Timeout: time.Second, BreakerCooldown: time.Hour})
	a := decision(lim, authorizer.Options{Sources: sources, JWT: v}, everywhere("r-api", 100, time.Minute))
	return apigw.NewHandler(a, apigw.Options{Logger: jsonLog(io.Discard)})
}

// restSample returns events/authorizer-rest.json, as API Gateway recorded
// it, with its Authorization lines set to auth (none when empty): the
// single-value map holds the last, as API Gateway's does.
func restSample(t testing.TB, auth ...string) []byte {
	t.Helper()
	return edited(t, sample(t, "authorizer-rest.json"), func(ev map[string]any) {
		headers, multi := ev["headers"].(map[string]any), ev["multiValueHeaders"].(map[string]any)
		delete(headers, "X-Api-Key")
		delete(multi, "X-Api-Key")
		if len(auth) > 0 {
			headers["Authorization"] = auth[len(auth)-1]
			multi["Authorization"] = auth
		}
	})
}

// sampleIP is the sourceIp of events/authorizer-rest.json.
const sampleIP = "203.0.113.7"

// invokePrincipal runs payload through Invoke, the Lambda entry point,
// and returns the policy's principalId and effect, or the error.
func invokePrincipal(t *testing.T, h *apigw.Handler, payload []byte) (principal, effect string, err error) {
	t.Helper()
	out, err := h.Invoke(context.Background(), payload)
	if err != nil {
		return "", "", err
	}
	var resp struct {
		PrincipalID    string `json:"principalId"`
		PolicyDocument struct{ Statement []struct{ Effect string } }
	}
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.PolicyDocument.Statement) != 1 {
		t.Fatalf("Invoke reply %s: %v", out, err)
	}
	return resp.PrincipalID, resp.PolicyDocument.Statement[0].Effect, nil
}

// respell changes the last character of a base64url segment to another
// that the lenient decoder (go-jose's, base64.RawURLEncoding) reads as the
// same bytes: one of the unused trailing bits set. It fails the test when
// the segment has no unused bits.
func respell(t testing.TB, seg string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if len(seg)%4 == 0 {
		t.Fatalf("segment of %d characters has no unused bits", len(seg))
	}
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	out := seg[:len(seg)-1] + string(alphabet[last^1])
	a, errA := base64.RawURLEncoding.DecodeString(seg)
	b, errB := base64.RawURLEncoding.DecodeString(out)
	if errA != nil || errB != nil || string(a) != string(b) {
		t.Fatalf("respell(%q) = %q does not decode to the same bytes", seg, out)
	}
	return out
}

// TestInvokeJWTAuthorization: with a jwt: source, a REST request through
// Invoke is charged to its bearer token only when its Authorization header
// is exactly one valid bearer token; anything else is 401, never another
// token's subject, never the IP.
func TestInvokeJWTAuthorization(t *testing.T) {
	t.Parallel()
	is := newJWTIssuer(t)
	h := jwtAuthorizer(t, is)
	alice, bob := is.token(t, `"uid":"alice"`), is.token(t, `"uid":"bob"`)
	parts := strings.Split(alice, ".")
	respelledSig := parts[0] + "." + parts[1] + "." + respell(t, parts[2])

	tests := []struct {
		name      string
		auth      []string
		principal string // "" wants Unauthorized
	}{
		{"one bearer token", []string{"Bearer " + alice}, "alice"},
		{"scheme in any case", []string{"bearer " + alice}, "alice"},
		{"no Authorization: the IP", nil, sampleIP},
		// API Gateway's headers map keeps the last line; a backend may
		// read the first.
		{"two Authorization lines", []string{"Bearer " + alice, "Bearer " + bob}, ""},
		{"the same token twice", []string{"Bearer " + alice, "Bearer " + alice}, ""},
		{"two tokens in one line", []string{"Bearer " + alice + ", Bearer " + bob}, ""},
		{"Basic, not Bearer", []string{"Basic YWxpY2U6c2VjcmV0"}, ""},
		{"a bare token", []string{alice}, ""},
		{"scheme only", []string{"Bearer"}, ""},
		{"empty", []string{""}, ""},
		{"token and junk", []string{"Bearer " + alice + " x"}, ""},
		{"signature respelled: same bytes, another spelling", []string{"Bearer " + respelledSig}, ""},
		{"payload respelled", []string{"Bearer " + parts[0] + "." + respell(t, parts[1]) + "." + parts[2]}, ""},
	}
	for _, tc := range tests {
		principal, effect, err := invokePrincipal(t, h, restSample(t, tc.auth...))
		switch {
		case tc.principal == "" && !errors.Is(err, apigw.ErrUnauthorized):
			t.Errorf("%s: Invoke = principal %s %s, %v; want Unauthorized (401)", tc.name, principal, effect, err)
		case tc.principal != "" && (err != nil || effect != "Allow" || principal != limiter.SubjectHash(tc.principal)):
			t.Errorf("%s: Invoke = principal %s %s, %v; want %s's hash %s allowed", tc.name, principal, effect, err,
				tc.principal, limiter.SubjectHash(tc.principal))
		}
	}

	// An HTTP API joins repeated headers with commas.
	v2 := func(auth string) []byte {
		b, _ := json.Marshal(map[string]any{"version": "2.0", "type": "REQUEST", "routeKey": "GET /orders/{id}",
			"routeArn":       "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3/$default/GET/orders/42",
			"headers":        map[string]string{"authorization": auth},
			"requestContext": map[string]any{"apiId": "a1b2c3", "http": map[string]string{"method": "GET", "sourceIp": sampleIP}}})
		return b
	}
	if _, err := h.Invoke(context.Background(), v2("Bearer "+alice)); err != nil {
		t.Errorf("Invoke(HTTP API, one token) error = %v, want allowed", err)
	}
	if out, err := h.Invoke(context.Background(), v2("Bearer "+alice+",Bearer "+bob)); !errors.Is(err, apigw.ErrUnauthorized) {
		t.Errorf("Invoke(HTTP API, two Authorization headers joined) = %s, %v; want Unauthorized", out, err)
	}
}

// TestInvokeJWTLargeNumbers: numeric claims are read exactly, one spelling
// per number: uid 9007199254740993 and 9007199254740992 (2^53+1 and 2^53,
// one float64) are two principals, and 1e3 and 1000.0 are 1000.
func TestInvokeJWTLargeNumbers(t *testing.T) {
	t.Parallel()
	is := newJWTIssuer(t)
	h := jwtAuthorizer(t, is)
	for _, tc := range []struct{ uid, subject string }{
		{"9007199254740993", "9007199254740993"},
		{"9007199254740992", "9007199254740992"},
		{"18446744073709551617", "18446744073709551617"},
		{"-9007199254740993", "-9007199254740993"},
		{"1e3", "1000"},
		{"1000.0", "1000"},
		{"12.50", "12.5"},
		{"9007199254740993.0", "9007199254740993"},
	} {
		tok := is.token(t, `"uid":`+tc.uid)
		principal, effect, err := invokePrincipal(t, h, restSample(t, "Bearer "+tok))
		if err != nil || effect != "Allow" || principal != limiter.SubjectHash(tc.subject) {
			t.Errorf("uid %s: Invoke = principal %s %s, %v; want %s's hash %s", tc.uid, principal, effect, err,
				tc.subject, limiter.SubjectHash(tc.subject))
		}
	}
	// A claim with no string form is refused, not charged to the IP.
	for _, uid := range []string{`{"a":1}`, `[1,2]`, `1e400`} {
		tok := is.token(t, `"uid":`+uid)
		if principal, effect, err := invokePrincipal(t, h, restSample(t, "Bearer "+tok)); !errors.Is(err, apigw.ErrUnauthorized) {
			t.Errorf("uid %s: Invoke = principal %s %s, %v; want Unauthorized", uid, principal, effect, err)
		}
	}
}

// FuzzInvokeJWTAuthorization: whatever the Authorization lines of a REST
// event, Invoke charges alice only when there is exactly one and it is
// "Bearer " and alice's token in its one spelling; otherwise it answers
// Unauthorized. Never the IP: the event always carries a header. The
// limiter's Redis is down, so every allowed decision fails open.
func FuzzInvokeJWTAuthorization(f *testing.F) {
	is := newJWTIssuer(f)
	h := jwtAuthorizerOn(f, is, downRedis(f))
	alice := is.token(f, `"uid":"alice"`)
	parts := strings.Split(alice, ".")
	for _, v := range []string{"Bearer " + alice, "bearer   " + alice + " ", "Basic YTpi", alice, "Bearer " + alice + ",Bearer " + alice,
		"Bearer " + parts[0] + "." + parts[1] + "." + respell(f, parts[2]), "Bearer " + alice + "\n", ""} {
		f.Add(v, "", false)
		f.Add(v, "Bearer "+alice, true)
	}
	f.Fuzz(func(t *testing.T, first, second string, two bool) {
		auth := []string{first}
		if two {
			auth = append(auth, second)
		}
		principal, _, err := invokePrincipal(t, h, restSample(t, auth...))
		if err != nil {
			if !errors.Is(err, apigw.ErrUnauthorized) {
				t.Fatalf("Invoke(Authorization %q) error = %v, want Unauthorized", auth, err)
			}
			return
		}
		v := strings.Trim(first, " \t")
		one := !two && len(v) > 7 && strings.EqualFold(v[:7], "Bearer ") && strings.TrimLeft(v[7:], " ") == alice
		if principal != limiter.SubjectHash("alice") || !one {
			t.Fatalf("Invoke(Authorization %q) = principal %s; want alice's hash, for exactly one %q only", auth, principal, "Bearer "+alice)
		}
	})
}
