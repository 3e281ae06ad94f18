package app

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/store/postgres"
)

// MigrationsResourceID is the physical id of the one CloudFormation custom
// resource the migrate function backs.
const MigrationsResourceID = "sluice-migrations"

// migrateEvent is the part of an invocation the migrator looks at; every
// other field, and any other event, is ignored.
type migrateEvent struct {
	// RequestType is Create, Update or Delete for CloudFormation custom
	// resource events, empty otherwise.
	RequestType string `json:"RequestType"`
}

// MigrateResult is the migrate function's reply. PhysicalResourceID and
// Data are read by the CDK Provider framework and ignored by everyone else.
type MigrateResult struct {
	// Applied names the migration files applied by this call, in order;
	// empty (not null) when the database was up to date.
	Applied []string `json:"applied"`
	// Version is the schema version after the call.
	Version int64 `json:"version"`
	// Skipped says why nothing was done ("delete"), else empty.
	Skipped            string            `json:"skipped,omitempty"`
	PhysicalResourceID string            `json:"PhysicalResourceId,omitempty"`
	Data               map[string]string `json:"Data,omitempty"`
}

// Migrator applies the embedded migrations (package migrations) to the
// configured database: the migrate Lambda's handler.
//
// It accepts any JSON event, so it works invoked directly (`aws lambda
// invoke`), as a CDK triggers.Trigger, and as the onEvent handler of a
// CloudFormation custom resource behind the CDK Provider framework: the
// framework answers CloudFormation's ResponseURL itself, so returning
// normally reports success and returning an error reports failure (the
// deploy then rolls back). For a custom resource Delete event it does
// nothing: deleting the stack must not depend on the database. Running it
// again applies nothing; concurrent runs serialise on an advisory lock.
type Migrator struct {
	db  *sql.DB
	log *slog.Logger
}

// onceTimeout bounds a migration run outside Lambda.
const onceTimeout = 5 * time.Minute

// Once migrates the database as a direct invocation would, outside Lambda,
// and writes the result to w as one JSON line.
func (m *Migrator) Once(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, onceTimeout)
	defer cancel()
	res, err := m.Handle(ctx, json.RawMessage(`{}`))
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(res)
}

// Handle migrates the database for one invocation.
func (m *Migrator) Handle(ctx context.Context, raw json.RawMessage) (MigrateResult, error) {
	log := m.log
	var ev migrateEvent
	_ = json.Unmarshal(raw, &ev) // not an object: a direct invocation
	if ev.RequestType != "" {
		log = log.With(slog.String("requestType", ev.RequestType))
	}
	if ev.RequestType == "Delete" {
		log.InfoContext(ctx, "custom resource delete: nothing to do")
		return MigrateResult{Applied: []string{}, Skipped: "delete", PhysicalResourceID: MigrationsResourceID}, nil
	}

	start := time.Now()
	res, err := postgres.Migrate(ctx, m.db)
	if err != nil {
		log.ErrorContext(ctx, "migrate failed", slog.Any("applied", res.Applied), slog.Any("error", err))
		return MigrateResult{}, fmt.Errorf("migrate: %w", err)
	}
	log.InfoContext(ctx, "migrated", slog.Any("applied", res.Applied), slog.Int64("version", res.Version),
		slog.Int64("durationMs", time.Since(start).Milliseconds()))
	out := MigrateResult{Applied: res.Applied, Version: res.Version}
	if ev.RequestType != "" {
		out.PhysicalResourceID = MigrationsResourceID
		out.Data = map[string]string{"Version": strconv.FormatInt(res.Version, 10)}
	}
	return out, nil
}
