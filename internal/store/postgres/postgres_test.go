package postgres_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o store.Options) store.Store { return postgres.NewWithOptions(pgtest.NewPool(t), o) })
}

// TestContractExecMode runs the suite with the query mode used behind RDS
// Proxy (no named prepared statements, parameters typed from Go values), so
// every query casts what PostgreSQL cannot infer.
func TestContractExecMode(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o store.Options) store.Store {
		u, err := url.Parse(pgtest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("default_query_exec_mode", "exec")
		u.RawQuery = q.Encode()
		pool, err := pgxpool.New(context.Background(), u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return postgres.NewWithOptions(pool, o)
	})
}
