package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestUpstreamChain runs a team's own authorizer (testdata/upstream) and
// Sluice's authorizer each under the Lambda Runtime Interface Emulator,
// Sluice invoking the upstream through the AWS SDK's Lambda client pointed
// at the upstream's emulator (AWS_ENDPOINT_URL_LAMBDA). Sluice limits each
// tenant (SUBJECT_SOURCES=context:tenant) with DEFAULT_LIMIT 2/1m, reads
// the upstream's policies written with plain strings (as AWS's examples
// write them), answers the upstream's Deny and Unauthorized with
// Unauthorized (401, never the Deny a rate limit's 429 is made of), keeps
// the upstream's principalId and usageIdentifierKey, merges the contexts,
// and invokes the upstream once per identity within the cache TTL, the
// identity being the header named in UPSTREAM_IDENTITY_SOURCES.
func TestUpstreamChain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	prebuild(t, "authorizer")
	dir, err := binDir()
	if err != nil {
		t.Fatal(err)
	}
	upBin := goBuild(t, dir, "upstream/bootstrap", "./e2e/testdata/upstream", true)
	up := startEmulator(t, upBin, nil)
	db := pgtest.NewDatabase(t) // migrated, no rules: DEFAULT_LIMIT applies
	sluice := startEmulator(t, bootstrap(t, "authorizer"), map[string]string{
		"REDIS_URL":           testenv.RedisURL(t),
		"REDIS_PREFIX":        redisPrefix(t),
		"DATABASE_URL":        db,
		"REDIS_TIMEOUT":       "500ms",
		"SUBJECT_SOURCES":     "context:tenant",
		"DEFAULT_LIMIT":       "2/1m",
		"UPSTREAM_AUTHORIZER": "function", // the emulator's one function
		// What the upstream reads: its answers are cached (300s) per value.
		"UPSTREAM_IDENTITY_SOURCES": "header:authorization",
		"AWS_ENDPOINT_URL_LAMBDA":   "http://" + up.host(),
		"AWS_REGION":                "eu-west-1",
		"AWS_ACCESS_KEY_ID":         "test",
		"AWS_SECRET_ACCESS_KEY":     "test",
		"SUBJECT_HMAC_KEY":          "e2e-subject-key-0123456789",
	})

	var base events.APIGatewayCustomAuthorizerRequestTypeRequest
	decodeStrict(t, "authorizer-rest.json", &base)
	call := func(auth string) ([]byte, events.APIGatewayCustomAuthorizerResponse) {
		t.Helper()
		ev := base
		ev.Headers = map[string]string{"Authorization": auth}
		ev.MultiValueHeaders = nil
		payload, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		raw := sluice.invoke(t, payload)
		var resp events.APIGatewayCustomAuthorizerResponse
		_ = json.Unmarshal(raw, &resp)
		return raw, resp
	}
	effect := func(r events.APIGatewayCustomAuthorizerResponse) string {
		if len(r.PolicyDocument.Statement) == 0 {
			return ""
		}
		return r.PolicyDocument.Statement[0].Effect
	}

	for i, want := range []string{"Allow", "Allow", "Deny"} {
		raw, resp := call("Bearer allow-acme")
		if effect(resp) != want {
			t.Fatalf("acme #%d = %s, want %s", i+1, raw, want)
		}
		if resp.PrincipalID != "user-acme" || resp.UsageIdentifierKey != "plan-key-acme" {
			t.Errorf("acme #%d principalId %q usageIdentifierKey %q, want the upstream's user-acme and plan-key-acme", i+1, resp.PrincipalID, resp.UsageIdentifierKey)
		}
		// The upstream's values as it wrote them (seats a number), as an
		// in-process authorizer's (ratelimit.Wrap*) and as the upstream
		// alone would answer.
		if resp.Context["tenant"] != "acme" || resp.Context["plan"] != "gold" || resp.Context["seats"] != 3.0 || resp.Context["rule"] != "default" {
			t.Errorf("acme #%d context = %v, want the upstream's (tenant, plan, seats a number) and Sluice's", i+1, resp.Context)
		}
	}
	if _, resp := call("Bearer allow-globex"); effect(resp) != "Allow" {
		t.Errorf("globex = %s, want Allow: its own bucket", effect(resp))
	}
	if raw, _ := call("Bearer deny"); !strings.Contains(string(raw), `"errorMessage":"Unauthorized"`) {
		t.Errorf("the upstream's Deny = %s, want the error Unauthorized (401)", raw)
	}
	if raw, _ := call("Bearer who"); !strings.Contains(string(raw), `"errorMessage":"Unauthorized"`) {
		t.Errorf("unknown token = %s, want the error Unauthorized (401)", raw)
	}
	// One invocation per identity: acme's three requests, within the
	// 300s TTL, asked the upstream once.
	if n := strings.Count(up.out.String(), "upstream invoked: Bearer allow-acme"); n != 1 {
		t.Errorf("upstream invoked %d times for acme, want 1 (cached)\n%s", n, up.out)
	}
}
