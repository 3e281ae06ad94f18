package ratelimit_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/subjectkey"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/ratelimit"
)

// deploymentKey is the subject hash key of the deployments below, as the
// stack's secret would hold it.
const deploymentKey = "deployment-subject-key-0123456789"

// sampleAPI is the API id of the sample events (events/).
const sampleAPI = "a1b2c3d4e5"

// deployment is a Sluice deployment as an embedded Limiter meets it: its
// rules database, its Redis under a key prefix of the test's own, and its
// admin API's object graph (app.NewAdmin, as the admin Lambdas build it),
// hashing subjects under key ("" none).
type deployment struct {
	redisURL, dbURL, prefix string
	adm                     *app.Admin
	out                     *testenv.Buffer
}

func newDeployment(t *testing.T, key string) deployment {
	t.Helper()
	d := deployment{redisURL: testenv.RedisURL(t), dbURL: pgtest.NewDatabase(t), prefix: testenv.Prefix(t, "ratelimit-key"), out: &testenv.Buffer{}}
	testenv.DeleteKeys(t, testenv.Redis(t), d.prefix)
	env := map[string]string{"REDIS_URL": d.redisURL, "DATABASE_URL": d.dbURL, "REDIS_PREFIX": d.prefix, "SUBJECT_HMAC_KEY": key}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if d.adm, err = app.NewAdmin(context.Background(), cfg, app.AdminFull, app.Options{Out: d.out}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.adm.Close)
	return d
}

// createRule creates (and publishes) the rule of the issue: 4 a minute for
// every subject on GET /orders/{id} of the sample API.
func (d deployment) createRule(t *testing.T) {
	t.Helper()
	resp := d.call(t, "POST", "/rules", nil, map[string]any{"api": sampleAPI, "route": "GET /orders/{id}", "subject": "*", "limit": 4, "period": "1m"})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create rule = %d %s", resp.Status, resp.Body)
	}
}

// call sends one request to the deployment's admin API.
func (d deployment) call(t *testing.T, method, path string, query url.Values, body any) adminResponse {
	t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	return serveAdmin(d.adm.Service, method, path, query, b, "ratelimit-key-test")
}

// limiter builds an embedded Limiter next to the deployment: its Redis,
// database and prefix, with o's other settings.
func (d deployment) limiter(o ratelimit.Options) (*ratelimit.Limiter, error) {
	if o.RedisURL == "" {
		o.RedisURL = d.redisURL
	}
	o.Prefix, o.Out = d.prefix, d.out
	return ratelimit.New(context.Background(), o)
}

// effect sends the sample REST event through h and returns the answer's
// effect ("Allow", "Deny") or its error.
func effect(t *testing.T, h ratelimit.RESTHandler) string {
	t.Helper()
	ev := sample[events.APIGatewayCustomAuthorizerRequestTypeRequest](t, "authorizer-rest.json")
	r, err := h(context.Background(), ev)
	if err != nil {
		return "error: " + err.Error()
	}
	return r.PolicyDocument.Statement[0].Effect
}

// awaitAllowed sends the event until it is allowed and returns how long
// that took; it fails when that takes more than 2 s: the Limiter's local deny cache holds a denial at
// most 1 s (DENY_CACHE_MAX_AGE) before it asks Redis again, and the rule
// refills a token only every 15 s.
func awaitAllowed(t *testing.T, h ratelimit.RESTHandler, after string) time.Duration {
	t.Helper()
	return testenv.Await(t, 2*time.Second, 20*time.Millisecond,
		"after "+after+" the wrapped authorizer still denies: the admin API acted on other buckets than it charges",
		func() bool {
			switch e := effect(t, h); e {
			case "Allow":
				return true
			case "Deny":
				return false
			default:
				t.Fatalf("after %s the wrapped authorizer answers %s, want Deny until Allow", after, e)
				return false
			}
		})
}

// TestAdminActsOnWrappedBuckets: a wrapped authorizer given the
// deployment's subject hash key, and the deployment's admin API, on one
// Redis. The admin API's peek, refund (POST /usage) and reset act on the
// very bucket the wrapper charges: alice, denied after four requests, is
// seen at 0, gets one more request after a refund of 1, and four after a
// reset.
func TestAdminActsOnWrappedBuckets(t *testing.T) {
	d := newDeployment(t, deploymentKey)
	d.createRule(t)
	rl, err := d.limiter(ratelimit.Options{SubjectKey: deploymentKey})
	if err != nil {
		t.Fatalf("New with the deployment's key: %v", err)
	}
	t.Cleanup(rl.Close)
	h := rl.WrapREST(restAnswer("Allow", "", "alice", nil, nil))

	var effects []string
	for range 5 {
		effects = append(effects, effect(t, h))
	}
	if want := []string{"Allow", "Allow", "Allow", "Allow", "Deny"}; !cmp.Equal(effects, want) {
		t.Fatalf("alice's five requests = %v, want %v", effects, want)
	}

	// Peek: the admin API sees the bucket the wrapper emptied.
	resp := d.call(t, "GET", "/subjects/alice/limits", url.Values{"api": {sampleAPI}, "route": {"GET /orders/{id}"}}, nil)
	var limits admin.SubjectLimitsResponse
	if err := json.Unmarshal(resp.Body, &limits); resp.Status != http.StatusOK || err != nil || len(limits.Limits) != 1 {
		t.Fatalf("GET /subjects/alice/limits = %d %s", resp.Status, resp.Body)
	}
	if l := limits.Limits[0]; l.Limit != 4 || l.Remaining != 0 {
		t.Errorf("peek: limit %d remaining %d, want 4 and 0 (the wrapper's four requests)", l.Limit, l.Remaining)
	}

	// Refund one token: one more request passes, the next is denied.
	resp = d.call(t, "POST", "/usage", nil, map[string]any{"api": sampleAPI, "route": "GET /orders/{id}", "subject": "alice", "cost": -1})
	var usage admin.UsageResponse
	if err := json.Unmarshal(resp.Body, &usage); resp.Status != http.StatusOK || err != nil || len(usage.Buckets) != 1 || usage.Buckets[0].Remaining != 1 {
		t.Fatalf("POST /usage refund = %d %s, want one bucket at 1", resp.Status, resp.Body)
	}
	refunded := awaitAllowed(t, h, "the refund")
	if e := effect(t, h); e != "Deny" {
		t.Errorf("after the refunded request: %s, want Deny", e)
	}

	// Reset: the bucket starts full, four requests pass.
	if resp := d.call(t, "DELETE", "/subjects/alice/buckets", url.Values{"api": {sampleAPI}}, nil); resp.Status != http.StatusNoContent {
		t.Fatalf("DELETE /subjects/alice/buckets = %d %s", resp.Status, resp.Body)
	}
	reset := awaitAllowed(t, h, "the reset")
	t.Logf("the wrapper admitted alice %v after the refund and %v after the reset (its deny cache asks Redis again within DENY_CACHE_MAX_AGE, 1s)",
		refunded.Round(time.Millisecond), reset.Round(time.Millisecond))
	effects = effects[:0]
	for range 4 {
		effects = append(effects, effect(t, h))
	}
	if want := []string{"Allow", "Allow", "Allow", "Deny"}; !cmp.Equal(effects, want) {
		t.Errorf("after the reset and one request: %v, want %v", effects, want)
	}
}

// TestSubjectKeyMismatch: an embedded Limiter whose subject hash key is
// not the deployment's never charges buckets the admin API cannot see.
// Whichever starts first records its key's id next to the rules snapshot;
// the other refuses: New returns an error, the admin API answers 409, and
// a Limiter that could not check at New refuses requests once it can.
func TestSubjectKeyMismatch(t *testing.T) {
	t.Run("deployment first", func(t *testing.T) {
		d := newDeployment(t, deploymentKey)
		d.createRule(t) // the publish records the deployment's key
		for _, tt := range []struct {
			name string
			o    ratelimit.Options
			want string
		}{
			{"unkeyed", ratelimit.Options{}, "this process has no subject hash key"},
			{"another key", ratelimit.Options{SubjectKey: "another-subject-key-0123456789"}, "records key id"},
		} {
			rl, err := d.limiter(tt.o)
			if err == nil {
				rl.Close()
				t.Errorf("%s: New = nil error, want the key refused", tt.name)
				continue
			}
			for _, w := range []string{"subject hash key differs", tt.want, "SubjectKey"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: New error = %v, want it to say %q", tt.name, err, w)
				}
			}
		}
	})

	t.Run("FromEnv reads the key", func(t *testing.T) {
		d := newDeployment(t, deploymentKey)
		d.createRule(t)
		t.Setenv("REDIS_URL", d.redisURL)
		t.Setenv("DATABASE_URL", d.dbURL)
		t.Setenv("REDIS_PREFIX", d.prefix)
		t.Setenv("SUBJECT_SOURCES", "principal")
		if rl, err := ratelimit.FromEnv(context.Background()); err == nil {
			rl.Close()
			t.Errorf("FromEnv without SUBJECT_HMAC_KEY = nil error, want the unkeyed limiter refused")
		}
		t.Setenv("SUBJECT_HMAC_KEY", deploymentKey)
		rl, err := ratelimit.FromEnv(context.Background())
		if err != nil {
			t.Fatalf("FromEnv with the deployment's SUBJECT_HMAC_KEY: %v", err)
		}
		defer rl.Close()
		h := rl.WrapREST(restAnswer("Allow", "", "alice", nil, nil))
		for range 4 {
			effect(t, h)
		}
		resp := d.call(t, "GET", "/subjects/alice/limits", url.Values{"api": {sampleAPI}}, nil)
		if !strings.Contains(string(resp.Body), `"remaining":0`) {
			t.Errorf("after 4 requests through FromEnv's Limiter the admin API sees %d %s, want remaining 0", resp.Status, resp.Body)
		}
	})

	t.Run("embedded first", func(t *testing.T) {
		// The first writer: a Limiter without the key, started
		// before the deployment wrote anything, records nothing, so the
		// deployment's admin API still acts (and records its key), and
		// the Limiter is refused from its next check on.
		defer ratelimit.SetKeyChecks(50*time.Millisecond, 50*time.Millisecond)()
		d := newDeployment(t, deploymentKey) // no rule written: nothing recorded yet
		rl, err := d.limiter(ratelimit.Options{DefaultLimit: "4/1m"})
		if err != nil {
			t.Fatalf("New on a prefix nothing recorded: %v", err)
		}
		defer rl.Close()
		h := rl.WrapREST(restAnswer("Allow", "", "alice", nil, nil))
		if e := effect(t, h); e != "Allow" {
			t.Fatalf("first request = %s, want Allow", e)
		}
		if n := testenv.Redis(t).Exists(context.Background(), subjectkey.Key(d.prefix)).Val(); n != 0 {
			t.Fatalf("the unkeyed Limiter wrote the subject-key record")
		}
		for _, c := range []struct {
			method, path string
			query        url.Values
			body         any
		}{
			{"GET", "/subjects/alice/limits", url.Values{"api": {sampleAPI}}, nil},
			{"DELETE", "/subjects/alice/buckets", url.Values{"api": {sampleAPI}}, nil},
		} {
			if resp := d.call(t, c.method, c.path, c.query, c.body); resp.Status >= 300 {
				t.Errorf("%s %s = %d %s, want it served: the deployment's key wins", c.method, c.path, resp.Status, resp.Body)
			}
		}
		awaitEffect(t, h, "the unkeyed Limiter refused, naming the key to give it, once the deployment wrote the record", func(e string) bool {
			return strings.Contains(e, "this process has no subject hash key") && strings.Contains(e, "SUBJECT_HMAC_KEY_SECRET_ARN")
		})
	})

	t.Run("checked once Redis answers", func(t *testing.T) {
		d := newDeployment(t, deploymentKey)
		d.createRule(t)
		proxy := testenv.NewProxy(t, testenv.RedisAddr(t)) // down
		rl, err := d.limiter(ratelimit.Options{RedisURL: "redis://" + proxy.Addr(), DefaultLimit: "100/1m"})
		if err != nil {
			t.Fatalf("New with Redis down: %v, want a Limiter (the key is checked later)", err)
		}
		defer rl.Close()
		proxy.Up(t)
		h := rl.WrapREST(restAnswer("Allow", "", "alice", nil, nil))
		testenv.Await(t, 3*time.Second, 50*time.Millisecond, "wrapped request once Redis is up: the unkeyed Limiter refused", func() bool {
			return strings.Contains(effect(t, h), "subject hash key differs")
		})
		if e := effect(t, h); !strings.Contains(e, "subject hash key differs") {
			t.Errorf("the request after = %s, want refused again", e)
		}
		if !strings.Contains(d.out.String(), "subject hash key refused") {
			t.Errorf("no log line of the refused key in:\n%s", d.out)
		}
	})
}
