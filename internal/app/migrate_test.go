package app

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
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
