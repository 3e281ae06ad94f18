package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/migrations"
)

func openDB(t *testing.T, url string) *sql.DB {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close(); pool.Close() })
	return db
}

func tables(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' AND table_name <> 'goose_db_version' ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// sources returns the embedded migration files and the newest version.
func sources(t *testing.T, db *sql.DB) (paths []string, last int64) {
	t.Helper()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.ListSources() {
		paths = append(paths, s.Path)
		last = s.Version
	}
	if len(paths) == 0 {
		t.Fatal("no migrations embedded")
	}
	return paths, last
}

func TestMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	db := openDB(t, pgtest.NewEmptyDatabase(t))
	ctx := t.Context()

	all, last := sources(t, db)
	res, err := postgres.Migrate(ctx, db)
	if err != nil {
		t.Fatalf("Migrate() error = %v", err)
	}
	want := postgres.MigrateResult{Applied: all, Version: last}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("Migrate(empty database) mismatch (-want +got):\n%s", diff)
	}
	wantTables := []string{"audit_log", "plans", "rules", "rules_version"}
	if diff := cmp.Diff(wantTables, tables(t, db)); diff != "" {
		t.Errorf("tables after Migrate() mismatch (-want +got):\n%s", diff)
	}

	// Idempotent: nothing left to do.
	res, err = postgres.Migrate(ctx, db)
	if diff := cmp.Diff(postgres.MigrateResult{Applied: []string{}, Version: last}, res); err != nil || diff != "" {
		t.Errorf("Migrate(again) = %v, mismatch (-want +got):\n%s", err, diff)
	}

	// Every Down undoes its Up completely.
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("DownTo(0) error = %v", err)
	}
	if got := tables(t, db); len(got) != 0 {
		t.Errorf("tables after DownTo(0) = %v, want none", got)
	}
	res, err = postgres.Migrate(ctx, db)
	if err != nil || len(res.Applied) != len(all) {
		t.Fatalf("Migrate(after down) = %+v, %v; want every migration applied again", res, err)
	}
	if diff := cmp.Diff(wantTables, tables(t, db)); diff != "" {
		t.Errorf("tables after re-Migrate() mismatch (-want +got):\n%s", diff)
	}
}

func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	const runners = 4
	results := make([]postgres.MigrateResult, runners)
	errs := make([]error, runners)
	var wg sync.WaitGroup
	for i := range runners {
		db := openDB(t, url) // separate pools, as separate Lambdas would have
		wg.Go(func() { results[i], errs[i] = postgres.Migrate(t.Context(), db) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Migrate() error = %v", err)
	}
	applied := 0
	for _, r := range results {
		applied += len(r.Applied)
		if r.Version != results[0].Version || r.Version == 0 {
			t.Errorf("concurrent Migrate() versions = %+v, want all equal and > 0", results)
		}
	}
	all, _ := sources(t, openDB(t, url))
	if n := len(all); applied != n {
		t.Errorf("concurrent Migrate() applied %d migrations in total, want each of %d once", applied, n)
	}
}
