package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// DevAudience is the audience of the development issuer's tokens, and
// DevIssuerName the issuer ("iss") sluice local gives it: a name under the
// reserved .invalid domain, so no real issuer can share it.
const (
	DevAudience   = "sluice-local"
	DevIssuerName = "https://sluice-local.invalid"
)

// DevIssuer is a development JWT issuer: one ES256 key, its JWKS, and
// tokens signed with it. `sluice local` serves it when a jwt: source has no
// JWT_ISSUER, so JWT limits can be tried without an identity provider;
// tests use it too. Never for production: whoever holds its key (a file on
// a laptop) mints any subject.
type DevIssuer struct {
	issuer string
	key    *ecdsa.PrivateKey
	kid    string
	signer jose.Signer
}

// NewDevIssuer returns the issuer named issuer (its "iss") signing with
// key; serve its JWKS where the verifier's JWKSURL points.
func NewDevIssuer(issuer string, key *ecdsa.PrivateKey) (*DevIssuer, error) {
	jwk := jose.JSONWebKey{Key: &key.PublicKey}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("dev issuer key: %w", err)
	}
	kid := base64.RawURLEncoding.EncodeToString(tp)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("dev issuer signer: %w", err)
	}
	return &DevIssuer{issuer: issuer, key: key, kid: kid, signer: s}, nil
}

// NewDevKey generates a P-256 key for a DevIssuer, PEM-encoded (PKCS #8)
// so it can be kept in a file.
func NewDevKey() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate dev issuer key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encode dev issuer key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseDevKey reads a key NewDevKey made.
func ParseDevKey(pemBytes []byte) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, errors.New("dev issuer key: no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("dev issuer key: %w", err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("dev issuer key: not a P-256 key")
	}
	return ec, nil
}

// JWKS returns the JSON Web Key Set of the issuer's public key.
func (d *DevIssuer) JWKS() []byte {
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: &d.key.PublicKey, KeyID: d.kid, Algorithm: string(jose.ES256), Use: "sig",
	}}})
	return b
}

// MaxDevTokenTTL bounds a development token's lifetime.
const MaxDevTokenTTL = 30 * 24 * time.Hour

// Sign returns a token for sub with the extra claims (string values; they
// cannot override iss, sub, aud, iat or exp), valid for ttl from now.
func (d *DevIssuer) Sign(sub string, extra map[string]string, ttl time.Duration, now time.Time) (string, error) {
	if sub == "" || len(sub) > MaxSubjectLen {
		return "", fmt.Errorf("sub must be 1 to %d bytes", MaxSubjectLen)
	}
	if ttl <= 0 || ttl > MaxDevTokenTTL {
		return "", fmt.Errorf("ttl %s must be positive and at most %s", ttl, MaxDevTokenTTL)
	}
	c := make(map[string]any, len(extra)+5)
	for k, v := range extra {
		c[k] = v
	}
	c["iss"], c["sub"], c["aud"] = d.issuer, sub, DevAudience
	c["iat"], c["exp"] = now.Unix(), now.Add(ttl).Unix()
	tok, err := jwt.Signed(d.signer).Claims(c).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign dev token: %w", err)
	}
	return tok, nil
}
