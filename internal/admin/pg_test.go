package admin_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
)

// newPostgres returns a PostgreSQL store on a fresh, migrated database of
// its own (dropped when the test ends), and a counter that reads the tables
// directly.
func newPostgres(t testing.TB) (store.Store, rowCounter) {
	t.Helper()
	pool := pgtest.NewPool(t)
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
