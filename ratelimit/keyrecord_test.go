package ratelimit_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/subjectkey"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/ratelimit"
)

// awaitEffect sends the sample event through h until cond holds of its
// answer, for at most 3 s (the Limiter checks its key again on its own
// clock, against a real Redis), and returns that answer.
func awaitEffect(t *testing.T, h ratelimit.RESTHandler, what string, cond func(string) bool) string {
	t.Helper()
	var e string
	testenv.Await(t, 3*time.Second, 20*time.Millisecond, what, func() bool {
		e = effect(t, h)
		return cond(e)
	})
	return e
}

// config returns the deployment's configuration with key as its subject
// hash key: another process of it, or of a deployment sharing its Redis
// prefix and database.
func (d deployment) config(t *testing.T, key string) config.Config {
	t.Helper()
	env := map[string]string{"REDIS_URL": d.redisURL, "DATABASE_URL": d.dbURL, "REDIS_PREFIX": d.prefix, "SUBJECT_HMAC_KEY": key}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// adminWith is the deployment's admin API with key as its subject hash key.
func (d deployment) adminWith(t *testing.T, key string) *app.Admin {
	t.Helper()
	a, err := app.NewAdmin(context.Background(), d.config(t, key), app.AdminFull, app.Options{Out: d.out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// migrate invokes the deployment's migrate function, with key as its
// subject hash key, with the event bytes ev, as Lambda would.
func (d deployment) migrate(t *testing.T, key, ev string) (app.MigrateResult, error) {
	t.Helper()
	cfg := d.config(t, key)
	m, err := app.NewMigrator(context.Background(), cfg, app.Options{Out: d.out})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.PublishSnapshot(context.Background(), cfg, app.Options{}); err != nil {
		t.Fatal(err)
	}
	return m.Migrator.Handle(context.Background(), json.RawMessage(ev))
}

// TestStaleUnkeyedRecord is the repro: a process without the key
// ran once, before the deployment, and (as the first writer did) recorded
// that the buckets are unkeyed. The keyed deployment's first write takes
// the record over, a keyed Limiter then starts, and the unkeyed one is
// refused from its next check on, with the fix.
func TestStaleUnkeyedRecord(t *testing.T) {
	defer ratelimit.SetKeyChecks(50*time.Millisecond, 50*time.Millisecond)()
	d := newDeployment(t, deploymentKey)
	rdb := testenv.Redis(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, subjectkey.Key(d.prefix), subjectkey.Unkeyed, 0).Err(); err != nil {
		t.Fatal(err)
	}
	unkeyed, err := d.limiter(ratelimit.Options{DefaultLimit: "100/1m"})
	if err != nil {
		t.Fatalf("New without a key next to an unkeyed record: %v", err)
	}
	defer unkeyed.Close()
	h := unkeyed.WrapREST(restAnswer("Allow", "", "alice", nil, nil))
	if e := effect(t, h); e != "Allow" {
		t.Fatalf("the unkeyed Limiter's request = %s, want Allow", e)
	}

	d.createRule(t) // the deployment's publish writes the record
	if got := rdb.Get(ctx, subjectkey.Key(d.prefix)).Val(); got != subjectkey.ID([]byte(deploymentKey)) {
		t.Fatalf("record after the deployment's write = %q, want its key's id", got)
	}
	keyed, err := d.limiter(ratelimit.Options{SubjectKey: deploymentKey})
	if err != nil {
		t.Fatalf("New with the deployment's key: %v (the stale unkeyed record still wins)", err)
	}
	keyed.Close()
	awaitEffect(t, h, "the unkeyed Limiter refused with the fix", func(e string) bool {
		return strings.Contains(e, "this process has no subject hash key") && strings.Contains(e, subjectkey.Recovery)
	})
	if resp := d.call(t, "DELETE", "/subjects/alice/buckets", url.Values{"api": {sampleAPI}}, nil); resp.Status != http.StatusNoContent {
		t.Errorf("reset = %d %s, want 204", resp.Status, resp.Body)
	}
}

// TestRotateThroughMigrate: the deployment's key changes on purpose. The
// new key's admin API refuses with the command that records it, a deploy
// leaves the old record (and says so), the migrate function invoked with
// {"subjectKeyFrom": <old id>} records the new key (a compare-and-set: a
// stale id changes nothing), and an embedded Limiter follows the record
// both ways without a restart.
func TestRotateThroughMigrate(t *testing.T) {
	defer ratelimit.SetKeyChecks(50*time.Millisecond, 50*time.Millisecond)()
	const newKey = "rotated-subject-key-0123456789"
	d := newDeployment(t, deploymentKey)
	d.createRule(t)
	oldID, newID := subjectkey.ID([]byte(deploymentKey)), subjectkey.ID([]byte(newKey))
	rl, err := d.limiter(ratelimit.Options{SubjectKey: deploymentKey})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	h := rl.WrapREST(restAnswer("Allow", "", "alice", nil, nil))
	if e := effect(t, h); e != "Allow" {
		t.Fatalf("request with the recorded key = %s, want Allow", e)
	}

	rotated := d.adminWith(t, newKey)
	resp := serveAdmin(rotated.Service, "DELETE", "/subjects/alice/buckets", url.Values{"api": {sampleAPI}}, nil, "rotate-test")
	if resp.Status != http.StatusConflict || !strings.Contains(string(resp.Body), `subjectKeyFrom\":\"`+oldID) {
		t.Fatalf("reset with the new key = %d %s, want 409 naming the rotation from %s", resp.Status, resp.Body, oldID)
	}
	res, err := d.migrate(t, newKey, `{"RequestType":"Create"}`)
	if err != nil || res.SubjectKey != "refused" {
		t.Fatalf("deploy with the new key = %+v, %v; want the record refused, not the deploy", res, err)
	}
	if !strings.Contains(d.out.String(), "subject-key record not written") {
		t.Errorf("the deploy did not log the refused record:\n%s", d.out)
	}
	if _, err := d.migrate(t, newKey, `{"subjectKeyFrom":"`+subjectkey.Unkeyed+`"}`); err == nil || !strings.Contains(err.Error(), oldID) {
		t.Fatalf("rotation from a stale id = %v, want it refused, naming %s", err, oldID)
	}
	if res, err := d.migrate(t, newKey, `{"subjectKeyFrom":"`+oldID+`"}`); err != nil || res.SubjectKey != "rotated" {
		t.Fatalf("rotation from %s = %+v, %v; want rotated", oldID, res, err)
	}
	if got := testenv.Redis(t).Get(context.Background(), subjectkey.Key(d.prefix)).Val(); got != newID {
		t.Fatalf("record after the rotation = %q, want %s", got, newID)
	}
	resp = serveAdmin(rotated.Service, "DELETE", "/subjects/alice/buckets", url.Values{"api": {sampleAPI}}, nil, "rotate-test")
	if resp.Status != http.StatusNoContent {
		t.Errorf("reset with the new key after the rotation = %d %s, want 204", resp.Status, resp.Body)
	}
	awaitEffect(t, h, "the old key's Limiter refused after the rotation", func(e string) bool {
		return strings.Contains(e, "records key id "+newID) && strings.Contains(e, "SUBJECT_HMAC_KEY_SECRET_ARN")
	})
	if res, err := d.migrate(t, deploymentKey, `{"subjectKeyFrom":"`+newID+`"}`); err != nil || res.SubjectKey != "rotated" {
		t.Fatalf("rotation back = %+v, %v", res, err)
	}
	awaitEffect(t, h, "the old key's Limiter accepted again once the record names its key, without a restart", func(e string) bool { return e == "Allow" })
}
