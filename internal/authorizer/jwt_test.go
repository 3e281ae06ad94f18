package authorizer_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// devIssuer serves a DevIssuer's JWKS over httptest and returns it.
func devIssuer(t *testing.T) (*identity.DevIssuer, *identity.Verifier) {
	t.Helper()
	pemKey, err := identity.NewDevKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := identity.ParseDevKey(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	var iss *identity.DevIssuer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(iss.JWKS()) }))
	t.Cleanup(srv.Close)
	if iss, err = identity.NewDevIssuer(srv.URL, key); err != nil {
		t.Fatal(err)
	}
	v, err := identity.NewVerifier(context.Background(), identity.JWTOptions{Issuer: srv.URL, Audience: []string{identity.DevAudience}})
	if err != nil {
		t.Fatal(err)
	}
	return iss, v
}

// TestDecideJWT: a verified claim is the subject and reaches the context;
// every rejected token is ErrNoSubject (401) without a limiter call, even
// with an ip source to fall back on.
func TestDecideJWT(t *testing.T) {
	t.Parallel()
	iss, v := devIssuer(t)
	other, _ := devIssuer(t)
	sources, err := identity.ParseSources("jwt:custom:tenant,ip")
	if err != nil {
		t.Fatal(err)
	}
	lim := limiter.New(testenv.Redis(t), limiter.Options{Prefix: testenv.Prefix(t, "jwt"), Timeout: time.Second})
	snap := rules.NewSnapshot([]rules.Rule{rule("r", "api", "*", "*", 100, time.Minute)}, nil, rules.SnapshotOptions{})
	a := authorizer.New(snaps{snap}, lim, authorizer.Options{Sources: sources, JWT: v})
	ctx := context.Background()
	req := func(tok string) *authorizer.Request {
		r := &authorizer.Request{API: "api", Method: "GET", Resource: "/", SourceIP: "192.0.2.7", Headers: map[string]string{}}
		if tok != "" {
			r.Headers["Authorization"] = "Bearer " + tok
		}
		return r
	}
	now := time.Now()
	good, _ := iss.Sign("alice", map[string]string{"custom:tenant": "acme"}, time.Hour, now)
	res, err := a.Decide(ctx, req(good))
	if err != nil || res.Subject != "acme" || !res.Allowed {
		t.Fatalf("Decide(good token) = %+v, %v; want subject acme allowed", res, err)
	}
	if got := res.Context["jwt_custom_tenant"]; got != "acme" {
		t.Errorf("context jwt_custom_tenant = %q, want acme (context %v)", got, res.Context)
	}
	if res, _ := a.Decide(ctx, req("")); res.Subject != "192.0.2.7" {
		t.Errorf("Decide(no token) subject = %q, want the IP", res.Subject)
	}

	expired, _ := iss.Sign("alice", map[string]string{"custom:tenant": "acme"}, time.Second, now.Add(-time.Hour))
	forged, _ := other.Sign("alice", map[string]string{"custom:tenant": "acme"}, time.Hour, now)
	before := lim.Stats().Calls
	for name, tok := range map[string]string{"expired": expired, "other issuer's key": forged, "garbage": "x.y.z"} {
		if _, err := a.Decide(ctx, req(tok)); !errors.Is(err, authorizer.ErrNoSubject) || !errors.Is(err, identity.ErrToken) {
			t.Errorf("Decide(%s) error = %v, want ErrNoSubject wrapping ErrToken", name, err)
		}
	}
	if after := lim.Stats().Calls; after != before {
		t.Errorf("limiter calls %d → %d for rejected tokens, want none", before, after)
	}
}
