package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/sluicehq/sluice/migrations"
)

// MigrateResult says what Migrate did.
type MigrateResult struct {
	// Applied lists the migration files applied by this call, in order;
	// empty when the schema was already current.
	Applied []string `json:"applied"`
	// Version is the schema version after the call: the number of the
	// newest applied migration.
	Version int64 `json:"version"`
}

// Migrate applies every pending migration in the migrations package to db.
// It is idempotent, and safe to run from several processes at once: a
// PostgreSQL session advisory lock serialises them, and the later ones find
// nothing to do. db may be opened with the pgx stdlib driver, for example
// stdlib.OpenDBFromPool(pool).
func Migrate(ctx context.Context, db *sql.DB) (MigrateResult, error) {
	p, err := newProvider(db)
	if err != nil {
		return MigrateResult{}, err
	}
	results, upErr := p.Up(ctx)
	res := MigrateResult{Applied: []string{}}
	for _, r := range results {
		if r.Error == nil {
			res.Applied = append(res.Applied, r.Source.Path)
		}
	}
	if upErr != nil {
		return res, fmt.Errorf("apply migrations: %w", upErr)
	}
	if res.Version, err = p.GetDBVersion(ctx); err != nil {
		return res, fmt.Errorf("read schema version: %w", err)
	}
	return res, nil
}

// newProvider returns a goose provider over the embedded migrations that
// takes the migration advisory lock, retrying every second for 5 minutes.
func newProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}
