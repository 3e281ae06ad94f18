// Package pgtest gives tests a fresh, migrated PostgreSQL database of their
// own on the server named by SLUICE_TEST_DATABASE_URL, dropped when the test
// ends. Without that variable a test skips, unless
// SLUICE_REQUIRE_INTEGRATION=1 (make test, CI), where it fails.
//
//	func TestSomething(t *testing.T) {
//		store := pgtest.NewStore(t)      // *postgres.Store on a new database
//		url := pgtest.NewDatabase(t)     // or only the database URL
//	}
//
// Tests that stop and restart the database start a private server of their
// own with StartServer.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/testenv"
)

// NewEmptyDatabase creates a database named sluice_test_<random> with no
// schema and returns its URL. t.Cleanup drops it (WITH FORCE, so open
// connections do not keep it alive).
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	server := testenv.DatabaseURL(t)
	name := "sluice_test_" + testenv.Random(t)
	// The name is ours (hex) and quoted: DDL takes no parameters.
	ident := pgx.Identifier{name}.Sanitize()
	if err := onServer(server, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := onServer(server, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})

	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("pgtest: parse SLUICE_TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// onServer runs one statement on the server at serverURL, on a connection of
// its own, within 30 seconds.
func onServer(serverURL, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(serverURL), err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// NewDatabase creates a fresh database, applies every migration and returns
// its URL. t.Cleanup drops it.
func NewDatabase(t testing.TB) string {
	t.Helper()
	dbURL := NewEmptyDatabase(t)
	migrate(t, dbURL)
	return dbURL
}

// migrate applies every migration to the database at dbURL.
func migrate(t testing.TB, dbURL string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", redact(dbURL), err)
	}
	db := stdlib.OpenDB(*cfg) // connects on first use: a failure is Migrate's
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := postgres.Migrate(ctx, db); err != nil {
		t.Fatalf("pgtest: migrate: %v", err)
	}
}

// NewPool returns a pool on a fresh, migrated database, closed by t.Cleanup
// before the database is dropped.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", redact(dbURL), err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", redact(dbURL), err)
	}
	// Cleanups run last-in first-out: the pool closes before the drop.
	t.Cleanup(pool.Close)
	return pool
}

// NewStore returns a *postgres.Store on a fresh, migrated database.
func NewStore(t testing.TB) *postgres.Store {
	t.Helper()
	return postgres.New(NewPool(t))
}

// redact hides a password in a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
