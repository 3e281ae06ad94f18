package app_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/decider"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestForgedRulesRefused: a process holding only Redis (an authorizer,
// check, an embedded limiter) publishes rules that block every caller,
// first unsigned, then signed by a key of its own under a version far in
// the future. An authorizer with RULES_PUBLIC_KEY, entered through Invoke
// with the sample event, keeps the rule writers' rules, counts each
// refusal (RulesRefused) and logs it; an embedded limiter with no
// database keeps them too. One without the key adopts the forgery (the
// attack is real). The admin API's next write is adopted all the same.
func TestForgedRulesRefused(t *testing.T) {
	const secret = "the rule writers' own secret, more than 32 bytes"
	pub := rulesync.NewSigningKey([]byte(secret)).Public().(ed25519.PublicKey)
	dbURL, redisURL := pgtest.NewDatabase(t), testenv.RedisURL(t)
	adm, admLog := newAdmin(t, map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL, "RULES_SIGNING_KEY": secret})
	call(t, adm.Service, "POST", "/rules", nil, map[string]any{"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 100, "period": "1m"}, 201)

	env := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL, "RULES_VERSION_POLL": "10ms", "RULES_PUBLIC_KEY": rulesync.FormatPublicKey(pub)}
	authz, out := newApp(t, env)
	delete(env, "RULES_PUBLIC_KEY")
	unverified, _ := newApp(t, env)
	if st := authz.Cache.Stats(); st.Origin != rulesync.FromSnapshot || st.Refused != 0 {
		t.Fatalf("authorizer cache at start = %+v, want the signed snapshot", st)
	}
	// An embedded limiter: the snapshot is its only source of rules.
	rdb := testenv.Redis(t)
	embedded := decider.New(t.Context(), rdb, decider.Options{Out: io.Discard, Prefix: prefixFor(t), Poll: 10 * time.Millisecond, RulesPublicKey: pub})
	t.Cleanup(embedded.Close)

	sample, err := os.ReadFile("../../events/authorizer-rest.json")
	if err != nil {
		t.Fatal(err)
	}
	invoke := func(a interface {
		Invoke(context.Context, []byte) ([]byte, error)
	}) string {
		t.Helper()
		raw, err := a.Invoke(context.Background(), sample)
		if err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		var resp events.APIGatewayCustomAuthorizerResponse
		if err := json.Unmarshal(raw, &resp); err != nil || len(resp.PolicyDocument.Statement) == 0 {
			t.Fatalf("Invoke = %s: %v", raw, err)
		}
		return resp.PolicyDocument.Statement[0].Effect
	}
	embeddedBlocks := func() bool {
		m := embedded.Cache.Snapshot(context.Background()).Match("a1b2c3d4e5", "GET", "/orders/{id}", "demo-key-0001")
		return m.API != nil && m.API.Limit == 0
	}
	if got := invoke(authz.Authorizer); got != "Allow" {
		t.Fatalf("before any forgery: %s, want Allow", got)
	}

	// The forger holds the Redis URL and prefix, not the writers' key.
	block := rules.Set{Rules: []rules.Rule{{ID: "0e9f3c1a-0000-4000-8000-000000000001", API: "a1b2c3d4e5", Route: "*", Subject: "*",
		Limit: new(int64(0)), Period: rules.Period(time.Minute)}}}
	vk, sk := authz.Snapshots.Keys()
	for _, forge := range []struct {
		name string
		do   func()
	}{
		{"unsigned, the next version", func() {
			block.Version = time.Now().UnixMicro() + 1000
			forger := rulesync.NewSnapshots(rdb, rulesync.SnapshotsOptions{Prefix: prefixFor(t)})
			if ok, err := forger.Publish(t.Context(), block); !ok {
				t.Fatalf("forger Publish = %v, %v", ok, err)
			}
		}},
		{"its own key, a version far ahead", func() {
			block.Version = math.MaxInt64 / 4
			forger := rulesync.NewSnapshots(rdb, rulesync.SnapshotsOptions{Prefix: prefixFor(t), MaxAhead: math.MaxInt64,
				SigningKey: rulesync.NewSigningKey([]byte("the forger's own key, 32 bytes long"))})
			if ok, err := forger.Publish(t.Context(), block); !ok {
				t.Fatalf("forger Publish = %v, %v", ok, err)
			}
			if v, _ := rdb.Get(t.Context(), vk).Int64(); v != block.Version {
				t.Fatalf("version key = %d, want the forged %d", v, block.Version)
			}
		}},
	} {
		refused := authz.Cache.Stats().Refused
		forge.do()
		waitFor(t, 5*time.Second, forge.name+": the unverified authorizer denies (it took the forged rules)", func() bool { return invoke(unverified.Authorizer) == "Deny" })
		waitFor(t, 5*time.Second, forge.name+": the authorizer refuses it", func() bool {
			invoke(authz.Authorizer)
			return authz.Cache.Stats().Refused > refused
		})
		// Every look keeps the writers' rules, through 5 more version reads
		// of each (the forgery is refused on every check, not once).
		for i := range 5 {
			reads, embReads := authz.Cache.Stats().VersionReads, embedded.Cache.Stats().VersionReads
			testenv.Await(t, 5*time.Second, 5*time.Millisecond, fmt.Sprintf("%s: version read %d of the authorizer and the embedded limiter", forge.name, i+1), func() bool {
				if got := invoke(authz.Authorizer); got != "Allow" {
					t.Fatalf("%s: the authorizer with RULES_PUBLIC_KEY answered %s, want Allow (the writers' 100/1m)", forge.name, got)
				}
				if embeddedBlocks() {
					t.Fatalf("%s: the embedded limiter adopted the forged rules", forge.name)
				}
				return authz.Cache.Stats().VersionReads > reads && embedded.Cache.Stats().VersionReads > embReads
			})
		}
	}
	if !strings.Contains(out.String(), "rules refused") {
		t.Errorf("no \"rules refused\" log line; log:\n%s", out.String())
	}
	authz.Metrics.Flush()
	if !strings.Contains(out.String(), `"Name":"RulesRefused"`) || !strings.Contains(out.String(), `"RulesRefused":`) {
		t.Errorf("no RulesRefused metric in the EMF lines:\n%s", out.String())
	}

	// The writers' next publish, under the forged version and over the
	// forged snapshot, is adopted: the sample's caller is blocked.
	call(t, adm.Service, "POST", "/rules", nil, map[string]any{"api": "a1b2c3d4e5", "route": "*", "subject": "demo-key-0001", "limit": 0, "period": "1m"}, 201)
	if v, _ := rdb.Get(t.Context(), vk).Int64(); v >= math.MaxInt64/4 {
		t.Fatalf("version key after the admin write = %d: the forged version still pins it", v)
	}
	if !strings.Contains(admLog.String(), "replaced one the rule writers did not publish") {
		t.Errorf("the admin's publish did not say it replaced a forged snapshot; log:\n%s", admLog.String())
	}
	waitFor(t, 5*time.Second, "the authorizer adopts the admin's write", func() bool { return invoke(authz.Authorizer) == "Deny" })
	waitFor(t, 5*time.Second, "the embedded limiter adopts it", func() bool {
		m := embedded.Cache.Snapshot(context.Background()).Match("a1b2c3d4e5", "GET", "/orders/{id}", "demo-key-0001")
		return m.API != nil && m.API.Subject == "demo-key-0001"
	})
	raw, _ := rdb.Get(t.Context(), sk).Bytes()
	if !bytes.HasPrefix(raw, []byte("SLR2")) {
		t.Errorf("stored snapshot starts %q, want the signed format SLR2", raw[:min(4, len(raw))])
	}
	t.Logf("refused: %d (authorizer), %d (embedded); version %s", authz.Cache.Stats().Refused, embedded.Cache.Stats().Refused,
		strconv.FormatInt(authz.Cache.Stats().Version, 10))
}
