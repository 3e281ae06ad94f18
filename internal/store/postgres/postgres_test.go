package postgres_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

var _ storetest.Store = (*postgres.Store)(nil)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return pgtest.NewStore(t) })
}
