package admin_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/internal/store/postgres"
)

// newPostgres returns a PostgreSQL store on a fresh, migrated database of
// its own, dropped when the test ends, and a counter that reads the tables
// directly.
func newPostgres(t testing.TB) (testStore, rowCounter) {
	t.Helper()
	base := integration(t, "SLUICE_TEST_DATABASE_URL")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect %s: %v", base, err)
	}
	name := "sl_admin_" + randomHex(t)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	admin.Close(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("connect to drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})

	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	if _, err := postgres.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	db.Close()

	return postgres.New(pool), func(t testing.TB) (r, p, a int64) {
		err := pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM rules), (SELECT count(*) FROM plans), (SELECT count(*) FROM audit_log)`).
			Scan(&r, &p, &a)
		if err != nil {
			t.Fatalf("count rows: %v", err)
		}
		return r, p, a
	}
}
