package ratelimit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestMain gives the runnable examples what a Lambda's environment gives
// the package: REDIS_URL (the test Redis), DATABASE_URL (a fresh, migrated
// database on the test server, dropped at the end) and a REDIS_PREFIX of
// their own (its keys deleted at the end). An example cannot skip: without
// SLUICE_TEST_REDIS_URL and SLUICE_TEST_DATABASE_URL the package skips as a
// whole, or fails when SLUICE_REQUIRE_INTEGRATION=1.
func TestMain(m *testing.M) {
	redisURL, dbServer := os.Getenv(testenv.RedisURLVar), os.Getenv(testenv.DatabaseURLVar)
	if redisURL == "" || dbServer == "" {
		if os.Getenv(testenv.RequireVar) == "1" {
			fmt.Fprintf(os.Stderr, "%s and %s must be set with %s=1; run under scripts/testenv.sh\n",
				testenv.RedisURLVar, testenv.DatabaseURLVar, testenv.RequireVar)
			os.Exit(1)
		}
		fmt.Printf("skipping ratelimit tests: %s or %s not set; run under scripts/testenv.sh\n", testenv.RedisURLVar, testenv.DatabaseURLVar)
		os.Exit(0)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	prefix := "sltest:ratelimit-example:" + suffix + ":"
	dbURL, drop, err := newDatabase(dbServer, "sluice_test_"+suffix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for k, v := range map[string]string{"REDIS_URL": redisURL, "DATABASE_URL": dbURL, "REDIS_PREFIX": prefix, "LOG_LEVEL": "warn"} {
		os.Setenv(k, v)
	}
	code := m.Run()
	if err := deleteKeys(redisURL, prefix); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if err := drop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// newDatabase creates and migrates database name on the server at server,
// as pgtest.NewDatabase does for a test, and returns its URL and its drop.
func newDatabase(server, name string) (string, func() error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", nil, fmt.Errorf("connect to the test PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			return fmt.Errorf("connect to drop %s: %w", name, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", drop, fmt.Errorf("parse %s: %w", testenv.DatabaseURLVar, err)
	}
	u.Path = "/" + name
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return "", drop, fmt.Errorf("connect to %s: %w", name, err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if _, err := postgres.Migrate(ctx, db); err != nil {
		return "", drop, fmt.Errorf("migrate %s: %w", name, err)
	}
	return u.String(), drop, nil
}

// deleteKeys deletes the keys under prefix, which the examples left.
func deleteKeys(redisURL, prefix string) error {
	o, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("parse %s: %w", testenv.RedisURLVar, err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for it.Next(ctx) {
		if err := c.Del(ctx, it.Val()).Err(); err != nil {
			return fmt.Errorf("DEL %s: %w", it.Val(), err)
		}
	}
	return it.Err()
}
