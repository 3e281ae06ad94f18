package app

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/migrations"
)

// allMigrations returns the embedded migrations' names and the version of
// the last, so these tests follow the migrations/ directory.
func allMigrations(t *testing.T) ([]string, int64) {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v, %v", names, err)
	}
	v, err := strconv.ParseInt(names[len(names)-1][:5], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return names, v
}

func TestHandle(t *testing.T) {
	all, last := allMigrations(t)
	vs := strconv.FormatInt(last, 10)
	pool, err := pgxpool.New(t.Context(), pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m := &Migrator{db: stdlib.OpenDBFromPool(pool), log: slog.New(slog.NewJSONHandler(io.Discard, nil))}

	digest := migrations.Digest()
	cfnCreate := `{"RequestType":"Create","ServiceToken":"arn:aws:lambda:x","ResponseURL":"https://example.invalid/r",
		"StackId":"arn:aws:cloudformation:x","RequestId":"r1","LogicalResourceId":"Migrations","ResourceType":"Custom::Migrations",
		"ResourceProperties":{"ServiceToken":"arn:aws:lambda:x","Hash":"abc"}}`
	tests := []struct {
		name, event string
		want        MigrateResult
	}{
		{"first direct invocation applies everything", `{}`, MigrateResult{Applied: all, Version: last}},
		{"a trigger's event applies nothing more", `{"anything":[1,2,3]}`, MigrateResult{Applied: []string{}, Version: last}},
		{"not an object", `"hello"`, MigrateResult{Applied: []string{}, Version: last}},
		{"custom resource create", cfnCreate, MigrateResult{Applied: []string{}, Version: last, PhysicalResourceID: MigrationsResourceID, Data: map[string]string{"Version": vs}}},
		{"custom resource delete", `{"RequestType":"Delete","PhysicalResourceId":"sluice-migrations"}`, MigrateResult{Applied: []string{}, Skipped: "delete", PhysicalResourceID: MigrationsResourceID}},
		{"update to this set", update(digest, "0ld"), MigrateResult{Applied: []string{}, Version: last, PhysicalResourceID: MigrationsResourceID, Data: map[string]string{"Version": vs}}},
	}
	for _, tc := range tests {
		got, err := m.Handle(t.Context(), json.RawMessage(tc.event))
		if err != nil {
			t.Fatalf("handle(%s) error = %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("handle(%s) mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
}

// update is a CloudFormation custom resource Update event of the stack's
// Migration resource, asking for the migrations digest now (was before).
func update(now, was string) string {
	return fmt.Sprintf(`{"RequestType":"Update","ServiceToken":"arn:aws:lambda:x","ResponseURL":"https://example.invalid/r",
		"StackId":"arn:aws:cloudformation:x","RequestId":"r2","LogicalResourceId":"Migration","ResourceType":"Custom::SluiceMigrate",
		"PhysicalResourceId":"sluice-migrations",
		"ResourceProperties":{"ServiceToken":"arn:aws:lambda:x","Migrations":%q},
		"OldResourceProperties":{"ServiceToken":"arn:aws:lambda:x","Migrations":%q}}`, now, was)
}

// newMigration builds the migrate function's graph from env, as its main
// does; with publish, it also publishes the rules snapshot after each run,
// under a Redis prefix of the test's own, which it returns.
func newMigration(t *testing.T, env map[string]string, publish bool) (*Migration, string) {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMigrator(t.Context(), cfg, Options{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if !publish {
		return m, ""
	}
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, "migrate")
	t.Cleanup(func() { testenv.DeleteKeys(t, rdb, prefix) })
	if err := m.PublishSnapshot(t.Context(), cfg, Options{Redis: rdb, Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	return m, prefix
}

// TestHandleSkipsWithoutDatabase: the events that must never reach the
// database succeed with it unreachable. A rollback (CloudFormation sends
// the previous template's Migrations to the function that still carries
// the new set) and an Update that asks for the same set again would
// otherwise migrate, fail on the database, and leave the stack in
// UPDATE_ROLLBACK_FAILED. An Update to this function's set, and a Create,
// still migrate: with the database down they fail.
func TestHandleSkipsWithoutDatabase(t *testing.T) {
	m := unreachableMigrator(t)
	digest := migrations.Digest()
	for _, tc := range []struct {
		name, event, skipped string
	}{
		{"delete", `{"RequestType":"Delete","PhysicalResourceId":"sluice-migrations"}`, "delete"},
		{"rollback to the previous set", update("0ld", digest), "rollback"},
		{"rollback to the previous set and limits file", `{"RequestType":"Update","ResourceProperties":{"Migrations":"0ld","Limits":"version: 1\nset: a\nrules: []\n"},` +
			`"OldResourceProperties":{"Migrations":"` + digest + `","Limits":"version: 1\nset: b\nrules: []\n"}}`, "rollback"},
		{"update asking for the same set", update(digest, digest), "unchanged"},
		{"create", `{"RequestType":"Create","ResourceProperties":{"Migrations":"` + digest + `"}}`, ""},
		{"update to this set", update(digest, "0ld"), ""},
		{"update without the property (not the stack's resource)", `{"RequestType":"Update","ResourceProperties":{"Nonce":"b"},"OldResourceProperties":{"Nonce":"a"}}`, ""},
	} {
		got, err := m.Handle(t.Context(), json.RawMessage(tc.event))
		switch {
		case tc.skipped == "" && err == nil:
			t.Errorf("handle(%s) = %+v, nil; want the database's failure", tc.name, got)
		case tc.skipped != "" && (err != nil || got.Skipped != tc.skipped || got.PhysicalResourceID != MigrationsResourceID):
			t.Errorf("handle(%s) = %+v, %v; want skipped %q with physical id %s and no error", tc.name, got, err, tc.skipped, MigrationsResourceID)
		}
	}
}

// unreachableMigrator is a Migrator whose database went away: its pool
// is closed.
func unreachableMigrator(t *testing.T) *Migrator {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	pool.Close() // the database is unreachable now
	return &Migrator{db: db, log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
}

func TestHandleFails(t *testing.T) {
	m := unreachableMigrator(t)
	if _, err := m.Handle(t.Context(), json.RawMessage(`{}`)); err == nil {
		t.Error("handle(closed pool) error = nil, want the failure reported (CloudFormation rolls back)")
	}
}

// TestOnce: a run outside Lambda writes the result as one JSON line, and a
// second run applies nothing.
func TestOnce(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m := &Migrator{db: stdlib.OpenDBFromPool(pool), log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	all, last := allMigrations(t)
	quoted, _ := json.Marshal(all)
	for i, want := range []string{fmt.Sprintf(`{"applied":%s,"version":%d}`, quoted, last), fmt.Sprintf(`{"applied":[],"version":%d}`, last)} {
		var out strings.Builder
		if err := m.Once(t.Context(), &out); err != nil {
			t.Fatalf("Once #%d: %v", i+1, err)
		}
		if got := strings.TrimSpace(out.String()); got != want {
			t.Errorf("Once #%d wrote %s, want %s", i+1, got, want)
		}
	}
}

// TestHandleWaitsForDatabase: a Create whose database refuses connections
// for 20 s, then accepts, migrates, as the first deploy through an RDS
// Proxy created moments before must (its targets register after the
// proxy itself is available: Amazon RDS User Guide, "Troubleshooting for
// RDS Proxy", target state REGISTERING). The pool here has no retry of
// its own (DATABASE_URL, 5 s), so it is the migrator that waits.
func TestHandleWaitsForDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 20 s")
	}
	u, err := url.Parse(pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.NewProxy(t, u.Host)
	u.Host = p.Addr()
	pool, err := pgxpool.New(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m := &Migrator{db: stdlib.OpenDBFromPool(pool), log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	const refused = 20 * time.Second
	up := time.AfterFunc(refused, func() { p.Up(t) })
	defer up.Stop()
	start := time.Now()
	res, err := m.Handle(t.Context(), json.RawMessage(`{"RequestType":"Create","ResourceProperties":{"Migrations":"`+migrations.Digest()+`"}}`))
	if took := time.Since(start); err != nil || len(res.Applied) == 0 || took < refused {
		t.Fatalf("Handle(Create) after %v = %+v, %v; want every migration applied once the database accepts, after %v", took, res, err, refused)
	}
}

// TestHandlePublishesSnapshot: the migration of a fresh stack publishes
// the rules snapshot, empty as it is, so an authorizer's cold start finds
// it in Redis and never reads the database (which would wake a paused
// Aurora); a skipped event publishes nothing.
func TestHandlePublishesSnapshot(t *testing.T) {
	m, prefix := newMigration(t, map[string]string{"DATABASE_URL": pgtest.NewEmptyDatabase(t)}, true)
	rdb := testenv.Redis(t)
	snaps := rulesync.NewSnapshots(rdb, rulesync.SnapshotsOptions{Prefix: prefix})

	res, err := m.Migrator.Handle(t.Context(), json.RawMessage(update(migrations.Digest(), migrations.Digest())))
	if err != nil || res.Published != nil {
		t.Fatalf("Handle(unchanged) = %+v, %v; want nothing published", res, err)
	}
	res, err = m.Migrator.Handle(t.Context(), json.RawMessage(`{"RequestType":"Create","ResourceProperties":{"Migrations":"`+migrations.Digest()+`"}}`))
	if err != nil || res.Published == nil || !*res.Published {
		t.Fatalf("Handle(Create) = %+v, %v; want the snapshot published", res, err)
	}
	set, err := snaps.LoadAll(t.Context())
	if err != nil || set.Version < 1 || len(set.Rules) != 0 {
		t.Errorf("snapshot after the migration = %+v, %v; want an empty set with a version", set, err)
	}
}

// TestHandleAppliesLimitsFile: the stack's limits file (the custom
// resource's Limits property) is applied after the migrations, as a
// CloudFormation Create and Update deliver it: its set converges to the
// file, a rule outside the set (an operator's override) is never touched,
// an Update that changes only the file applies it without being skipped,
// an unchanged one is skipped, and a file that does not parse fails the
// deploy with nothing written.
func TestHandleAppliesLimitsFile(t *testing.T) {
	dbURL := pgtest.NewEmptyDatabase(t)
	mg, _ := newMigration(t, map[string]string{"DATABASE_URL": dbURL}, false)
	m := mg.Migrator
	digest := migrations.Digest()
	event := func(kind, limits, old string) json.RawMessage {
		ev := map[string]any{"RequestType": kind, "ResourceProperties": map[string]string{"Migrations": digest, "Limits": limits}}
		if kind == "Update" {
			ev["OldResourceProperties"] = map[string]string{"Migrations": digest, "Limits": old}
		}
		b, _ := json.Marshal(ev)
		return b
	}
	v1 := "version: 1\nset: platform\nrules:\n  - api: orders\n    route: \"*\"\n    subject: \"*\"\n    limit: 100\n    period: 1m\n"
	v2 := strings.Replace(v1, "limit: 100", "limit: 200", 1)
	res, err := m.Handle(t.Context(), event("Create", v1, ""))
	if err != nil || res.LimitsApplied == nil || *res.LimitsApplied != 1 {
		t.Fatalf("Create with a limits file = %+v, %v; want 1 write", res, err)
	}
	// An operator's override, outside the file's set.
	override := mustCreate(t, mg, `{"api":"orders","route":"*","subject":"customer-x","limit":500,"period":"1m"}`)

	res, err = m.Handle(t.Context(), event("Update", v2, v1))
	if err != nil || res.Skipped != "" || res.LimitsApplied == nil || *res.LimitsApplied != 1 {
		t.Fatalf("Update changing only the file = %+v, %v; want applied, 1 write", res, err)
	}
	if res, err := m.Handle(t.Context(), event("Update", v2, v2)); err != nil || res.Skipped != "unchanged" {
		t.Errorf("Update with the same file = %+v, %v; want skipped as unchanged", res, err)
	}
	if _, err := m.Handle(t.Context(), event("Update", "version: 1\nset: platform\nrules: [{api: orders}]\n", v2)); err == nil {
		t.Errorf("a file that does not validate: no error, want the deploy to fail")
	}
	set, err := mg.Store.LoadAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range set.Rules {
		got[r.Subject+"/"+r.Set] = *r.Limit
	}
	if diff := cmp.Diff(map[string]int64{"*/platform": 200, "customer-x/": 500}, got); diff != "" {
		t.Errorf("rules after the deploys (-want +got):\n%s", diff)
	}
	for _, r := range set.Rules {
		if r.ID == override.ID && r.Version != override.Version {
			t.Errorf("the override outside the set was written: version %d, want %d", r.Version, override.Version)
		}
	}
}

// TestRollbackRestoresLimits: a deploy that changed both the migrations
// and the limits file applied its file, then failed on a later resource;
// CloudFormation's rollback Update (the previous template's properties,
// sent to the function that carries the new set) migrates nothing but
// puts the previous file back and publishes it. A rollback that leaves
// the file as it was writes nothing, and one whose database is gone
// still succeeds (TestHandleSkipsWithoutDatabase).
func TestRollbackRestoresLimits(t *testing.T) {
	dbURL := pgtest.NewEmptyDatabase(t)
	mg, _ := newMigration(t, map[string]string{"DATABASE_URL": dbURL}, false)
	m := mg.Migrator
	digest := migrations.Digest()
	v1 := "version: 1\nset: platform\nrules:\n  - api: orders\n    route: \"*\"\n    subject: \"*\"\n    limit: 100\n    period: 1m\n"
	v2 := strings.Replace(v1, "limit: 100", "limit: 200", 1)
	event := func(migs, limits, oldMigs, oldLimits string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"RequestType": "Update",
			"ResourceProperties":    map[string]string{"Migrations": migs, "Limits": limits},
			"OldResourceProperties": map[string]string{"Migrations": oldMigs, "Limits": oldLimits}})
		return b
	}
	limit := func() int64 {
		set, err := mg.Store.LoadAll(t.Context())
		if err != nil || len(set.Rules) != 1 {
			t.Fatalf("rules = %+v, %v; want the file's one", set, err)
		}
		return *set.Rules[0].Limit
	}
	if _, err := m.Handle(t.Context(), event(digest, v1, "0ld", "")); err != nil {
		t.Fatal(err)
	}
	// The failed deploy: new migrations (this function's set) and v2.
	if res, err := m.Handle(t.Context(), event(digest, v2, "0ld", v1)); err != nil || limit() != 200 {
		t.Fatalf("deploy of v2 = %+v, %v; limit %d, want 200", res, err, limit())
	}
	res, err := m.Handle(t.Context(), event("0ld", v1, digest, v2))
	if err != nil || res.Skipped != "rollback" || res.LimitsApplied == nil || *res.LimitsApplied != 1 || len(res.Applied) != 0 {
		t.Errorf("rollback = %+v, %v; want skipped as a rollback, 1 write, no migration", res, err)
	}
	if got := limit(); got != 100 {
		t.Errorf("limit after the rollback = %d, want the file rolled back to's 100", got)
	}
	if res, err := m.Handle(t.Context(), event("0ld", v1, digest, v1)); err != nil || res.Skipped != "rollback" || res.LimitsApplied != nil {
		t.Errorf("rollback with the file unchanged = %+v, %v; want skipped, nothing written", res, err)
	}
}

// mustCreate creates a rule from JSON through the store, as the admin API
// would, outside any set.
func mustCreate(t *testing.T, mg *Migration, body string) rules.Rule {
	t.Helper()
	var r rules.Rule
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	created, err := mg.Store.CreateRule(t.Context(), r, "test")
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// TestHandleGivesRulesPublicKey: the migration custom resource answers
// every event with RulesPublicKey, the public half of the key the
// function signs snapshots with (the stack's deciders get it as
// RULES_PUBLIC_KEY through GetAtt), skipped events too, since
// CloudFormation keeps the last response's Data alone. An Update that
// changes only the signing key is not skipped: it republishes the
// snapshot signed with the new key. A function that does not sign, given
// a key by the stack, fails the deploy and says why.
func TestHandleGivesRulesPublicKey(t *testing.T) {
	const secret = "the migration's own rules signing secret, 32+ bytes"
	const arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:RulesSigningKey-AbCdEf"
	want := rulesync.FormatPublicKey(rulesync.NewSigningKey([]byte(secret)).Public().(ed25519.PublicKey))
	dbURL := pgtest.NewEmptyDatabase(t)
	m, prefix := newMigration(t, map[string]string{"DATABASE_URL": dbURL, "RULES_SIGNING_KEY": secret}, true)
	event := func(kind string, now, was map[string]string) json.RawMessage {
		b, err := json.Marshal(map[string]any{"RequestType": kind, "PhysicalResourceId": MigrationsResourceID,
			"ResourceProperties": now, "OldResourceProperties": was})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	digest := migrations.Digest()
	props := map[string]string{"Migrations": digest, "RulesSigningKey": arn}
	for _, tc := range []struct {
		name      string
		event     json.RawMessage
		skipped   string
		published bool
	}{
		{"create", event("Create", props, nil), "", true},
		{"update asking for the same", event("Update", props, props), "unchanged", false},
		{"rollback to the previous set", event("Update", map[string]string{"Migrations": "0ld", "RulesSigningKey": arn}, props), "rollback", false},
		{"update giving the key first (an upgrade)", event("Update", props, map[string]string{"Migrations": digest}), "", true},
		{"update to another key", event("Update", props, map[string]string{"Migrations": digest, "RulesSigningKey": arn + "0"}), "", true},
		{"delete", event("Delete", props, nil), "delete", false},
	} {
		got, err := m.Migrator.Handle(t.Context(), tc.event)
		if err != nil {
			t.Fatalf("Handle(%s) error = %v", tc.name, err)
		}
		if got.Skipped != tc.skipped || (got.Published != nil) != tc.published || got.Data["RulesPublicKey"] != want {
			t.Errorf("Handle(%s) = skipped %q, published %v, Data %v; want skipped %q, published %v, RulesPublicKey %s",
				tc.name, got.Skipped, got.Published != nil, got.Data, tc.skipped, tc.published, want)
		}
	}
	// What it published verifies with the key it answered.
	pub, _ := base64.StdEncoding.DecodeString(want)
	verify := rulesync.NewSnapshots(m.Redis, rulesync.SnapshotsOptions{Prefix: prefix, PublicKey: pub})
	if set, err := verify.LoadAll(t.Context()); err != nil || set.Version < 1 {
		t.Errorf("the published snapshot under RulesPublicKey: %+v, %v; want it verified", set, err)
	}

	unsigned, _ := newMigration(t, map[string]string{"DATABASE_URL": dbURL}, true)
	if got, err := unsigned.Migrator.Handle(t.Context(), event("Create", props, nil)); err == nil || !strings.Contains(err.Error(), "RULES_SIGNING_KEY_SECRET_ARN") {
		t.Errorf("Handle(create) without a signing key = %+v, %v; want an error naming RULES_SIGNING_KEY_SECRET_ARN", got, err)
	}
	if got, err := unsigned.Migrator.Handle(t.Context(), event("Delete", props, nil)); err != nil || got.Skipped != "delete" || got.Data != nil {
		t.Errorf("Handle(delete) without a signing key = %+v, %v; want skipped, no Data", got, err)
	}
}
