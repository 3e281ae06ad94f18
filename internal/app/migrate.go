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
	"github.com/sluicehq/sluice/migrations"
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
	// ResourceProperties are the custom resource's properties in the
	// template being deployed (rolled back to, on a rollback), and
	// OldResourceProperties those it replaces (Update only).
	ResourceProperties    migrateProperties `json:"ResourceProperties"`
	OldResourceProperties migrateProperties `json:"OldResourceProperties"`
}

// migrateProperties are the custom resource's properties the migrator reads.
type migrateProperties struct {
	// Migrations is the migrations.Digest of the set the template asks
	// for (the stack sets it at synth).
	Migrations string `json:"Migrations"`
}

// MigrateResult is the migrate function's reply. PhysicalResourceID and
// Data are read by the CDK Provider framework and ignored by everyone else.
type MigrateResult struct {
	// Applied names the migration files applied by this call, in order;
	// empty (not null) when the database was up to date.
	Applied []string `json:"applied"`
	// Version is the schema version after the call.
	Version int64 `json:"version"`
	// Skipped says why nothing was done, else empty: "delete" (a custom
	// resource Delete), "unchanged" (an Update that asks for the set
	// already asked for), "rollback" (an Update that asks for another set
	// than this function carries: CloudFormation rolling back).
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
// deploy then rolls back). Running it again applies nothing; concurrent
// runs serialise on an advisory lock.
//
// Only a Create, or an Update to the set of migrations this function
// carries, touches the database. The custom resource's Migrations property
// is the digest of the set (migrations.Digest), so CloudFormation sends an
// Update only when it changes. Three custom resource events never reach
// the database, so that no failing database can hold up a stack that is
// leaving it: a Delete; an Update whose Migrations differ from this
// function's, which is CloudFormation rolling back (it sends the previous
// template's properties to the function that still runs the new code,
// and migrations only go forward); and an Update that asks again for the
// set it asked for before.
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

// skipReason says why the event must not touch the database, or "".
func skipReason(ev *migrateEvent) string {
	switch {
	case ev.RequestType == "Delete":
		return "delete"
	case ev.RequestType != "Update" || ev.ResourceProperties.Migrations == "":
		// A resource without the property (not the stack's) migrates on
		// every Update, as before the property existed.
		return ""
	case ev.ResourceProperties.Migrations != migrations.Digest():
		return "rollback"
	case ev.ResourceProperties.Migrations == ev.OldResourceProperties.Migrations:
		return "unchanged"
	}
	return ""
}

// Handle migrates the database for one invocation.
func (m *Migrator) Handle(ctx context.Context, raw json.RawMessage) (MigrateResult, error) {
	log := m.log
	var ev migrateEvent
	_ = json.Unmarshal(raw, &ev) // not an object: a direct invocation
	if ev.RequestType != "" {
		log = log.With(slog.String("requestType", ev.RequestType))
	}
	if skip := skipReason(&ev); skip != "" {
		log.InfoContext(ctx, "custom resource event: nothing to do", slog.String("skipped", skip),
			slog.String("migrations", ev.ResourceProperties.Migrations), slog.String("carried", migrations.Digest()))
		return MigrateResult{Applied: []string{}, Skipped: skip, PhysicalResourceID: MigrationsResourceID}, nil
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
