package app

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
)

func TestHandle(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m := &Migrator{db: stdlib.OpenDBFromPool(pool), log: slog.New(slog.NewJSONHandler(io.Discard, nil))}

	cfnCreate := `{"RequestType":"Create","ServiceToken":"arn:aws:lambda:x","ResponseURL":"https://example.invalid/r",
		"StackId":"arn:aws:cloudformation:x","RequestId":"r1","LogicalResourceId":"Migrations","ResourceType":"Custom::Migrations",
		"ResourceProperties":{"ServiceToken":"arn:aws:lambda:x","Hash":"abc"}}`
	tests := []struct {
		name, event string
		want        MigrateResult
	}{
		{"first direct invocation applies everything", `{}`, MigrateResult{Applied: []string{"00001_rules.sql", "00002_rules_version.sql", "00003_quotas.sql"}, Version: 3}},
		{"a trigger's event applies nothing more", `{"anything":[1,2,3]}`, MigrateResult{Applied: []string{}, Version: 3}},
		{"not an object", `"hello"`, MigrateResult{Applied: []string{}, Version: 3}},
		{"custom resource create", cfnCreate, MigrateResult{Applied: []string{}, Version: 3, PhysicalResourceID: MigrationsResourceID, Data: map[string]string{"Version": "3"}}},
		{"custom resource delete", `{"RequestType":"Delete","PhysicalResourceId":"sluice-migrations"}`, MigrateResult{Applied: []string{}, Skipped: "delete", PhysicalResourceID: MigrationsResourceID}},
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

func TestHandleFails(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	pool.Close() // the database is unreachable now
	m := &Migrator{db: db, log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
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
	for i, want := range []string{`{"applied":["00001_rules.sql","00002_rules_version.sql","00003_quotas.sql"],"version":3}`, `{"applied":[],"version":3}`} {
		var out strings.Builder
		if err := m.Once(t.Context(), &out); err != nil {
			t.Fatalf("Once #%d: %v", i+1, err)
		}
		if got := strings.TrimSpace(out.String()); got != want {
			t.Errorf("Once #%d wrote %s, want %s", i+1, got, want)
		}
	}
}
