package app

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rulefile"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/subjectkey"
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
	// SubjectKeyFrom, in a direct invocation, rotates the subject-key
	// record from this key id to the function's own key's
	// (subjectkey.Record.Rotate): after a deliberate key change.
	SubjectKeyFrom string `json:"subjectKeyFrom"`
}

// migrateProperties are the custom resource's properties the migrator reads.
type migrateProperties struct {
	// Migrations is the migrations.Digest of the set the template asks
	// for (the stack sets it at synth).
	Migrations string `json:"Migrations"`
	// Limits is the limits file the stack declares (StackProps.Limits,
	// -c limitsFile), applied after the migrations; "" declares none.
	Limits string `json:"Limits"`
	// RulesSigningKey is the ARN of the rules signing key's secret the
	// stack gives the function: a new one republishes the snapshot signed
	// with it, and the function must sign (RulesPublicKey in Data).
	RulesSigningKey string `json:"RulesSigningKey"`
}

// MigrateResult is the migrate function's reply. PhysicalResourceID and
// Data are read by the CDK Provider framework and ignored by everyone else:
// Data holds Version (when migrated) and RulesPublicKey, the public half
// of the key the snapshots are signed with, which the stack gives the
// deciders as RULES_PUBLIC_KEY.
type MigrateResult struct {
	// Applied names the migration files applied by this call, in order;
	// empty (not null) when the database was up to date.
	Applied []string `json:"applied"`
	// Version is the schema version after the call.
	Version int64 `json:"version"`
	// Skipped says why nothing was done, else empty: "delete" (a custom
	// resource Delete), "unchanged" (an Update that changes none of the
	// migrateProperties), "rollback" (an Update that asks for another set
	// than this function carries: CloudFormation rolling back).
	Skipped string `json:"skipped,omitempty"`
	// Published says whether the rules snapshot was written to Redis
	// (false: Redis held a newer one); nil when nothing was published
	// (no Redis configured, a skipped event, or a failure, logged).
	Published *bool `json:"published,omitempty"`
	// LimitsApplied is the number of writes the stack's limits file made
	// (0: the deployment already matched it); nil without a file. On a
	// rollback, those that put back the file rolled back to (nil: none
	// restored, logged).
	LimitsApplied *int `json:"limitsApplied,omitempty"`
	// SubjectKey is what became of the subject-key record: a
	// subjectkey.Outcome, "rotated", or "refused" (logged with the fix);
	// empty without Redis.
	SubjectKey         string            `json:"subjectKey,omitempty"`
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
// Update only when it changes. Three custom resource events never migrate,
// so that no failing database can hold up a stack that is leaving it: a
// Delete; an Update whose Migrations differ from this function's, which
// is CloudFormation rolling back (it sends the previous template's
// properties to the function that still runs the new code, and
// migrations only go forward: only a changed limits file is put back,
// best effort); and an Update that asks again for the set it asked for
// before.
type Migrator struct {
	db  *sql.DB
	log *slog.Logger
	// reader is the read-only role's login (DB_READER_SECRET_ARN), set
	// after every migration run; nil leaves the role as it is.
	reader *config.Credentials
	// store is the rules store a limits file is applied to.
	store store.Store
	// publish, when set, publishes the rules snapshot to Redis after
	// every migration run (Migration.PublishSnapshot sets it).
	publish func(context.Context) (bool, error)
	// subjectKey, set with publish, is the subject-key record the
	// deployment writes after every migration run.
	subjectKey *subjectkey.Record
	// rulesKey, set with publish, is RULES_PUBLIC_KEY of the key publish
	// signs with; "" when it publishes unsigned.
	rulesKey string
}

// PublishSnapshot makes the migrator publish the rules and plans to
// cfg's Redis after every migration run, as the admin path does after a
// write: a fresh stack then has a snapshot, empty or not, before its
// first rule is written, so no authorizer cold start reads the database
// (which would wake a paused Aurora). Without REDIS_URL it does nothing.
// o.Redis and o.Prefix are as for NewMigrator's other graphs.
func (m *Migration) PublishSnapshot(ctx context.Context, cfg config.Config, o Options) error {
	if cfg.RedisURL == "" && o.Redis == nil {
		return nil
	}
	if o.Prefix == "" {
		o.Prefix = cmp.Or(cfg.RedisPrefix, limiter.DefaultPrefix)
	}
	if err := m.openRedis(ctx, cfg, &o); err != nil {
		return err
	}
	m.Migrator.publish = m.PublishRules
	key, err := config.SubjectKey(ctx, cfg)
	if err != nil {
		return err
	}
	m.Migrator.subjectKey = subjectkey.New(m.Redis, o.Prefix, key, 0)
	if m.signedBy != nil {
		m.Migrator.rulesKey = rulesync.FormatPublicKey(m.signedBy)
	}
	return nil
}

// onceTimeout bounds a migration run outside Lambda.
const onceTimeout = 5 * time.Minute

// Once migrates the database as a direct invocation would, outside Lambda,
// and writes the result to w as one JSON line; subjectKeyFrom, when not
// empty, rotates the subject-key record from that key id, as the event's
// subjectKeyFrom does.
func (m *Migrator) Once(ctx context.Context, w io.Writer, subjectKeyFrom ...string) error {
	ctx, cancel := context.WithTimeout(ctx, onceTimeout)
	defer cancel()
	ev, _ := json.Marshal(migrateEvent{SubjectKeyFrom: strings.Join(subjectKeyFrom, "")})
	res, err := m.Handle(ctx, ev)
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
	case ev.ResourceProperties == ev.OldResourceProperties:
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
	if arn := ev.ResourceProperties.RulesSigningKey; arn != "" && m.rulesKey == "" && ev.RequestType != "Delete" {
		return MigrateResult{}, fmt.Errorf("migrate: the stack gives the rules signing key %s, but this function does not sign "+
			"(no RULES_SIGNING_KEY_SECRET_ARN, or no REDIS_URL): the deciders would get no RULES_PUBLIC_KEY", arn)
	}
	if skip := skipReason(&ev); skip != "" {
		log.InfoContext(ctx, "custom resource event: nothing to do", slog.String("skipped", skip),
			slog.String("migrations", ev.ResourceProperties.Migrations), slog.String("carried", migrations.Digest()))
		// The key even so: CloudFormation answers GetAtt from the last
		// response's Data alone.
		out := MigrateResult{Applied: []string{}, Skipped: skip, PhysicalResourceID: MigrationsResourceID, Data: m.data(nil)}
		if skip == "rollback" {
			out.LimitsApplied, out.Published = m.restoreLimits(ctx, log, &ev)
		}
		return out, nil
	}

	start := time.Now()
	if err := m.awaitDB(ctx); err != nil {
		log.ErrorContext(ctx, "database unreachable", slog.Any("error", err),
			slog.Int64("waitedMs", time.Since(start).Milliseconds()))
		return MigrateResult{}, fmt.Errorf("migrate: %w", err)
	}
	res, err := postgres.Migrate(ctx, m.db)
	if err != nil {
		log.ErrorContext(ctx, "migrate failed", slog.Any("applied", res.Applied), slog.Any("error", err))
		return MigrateResult{}, fmt.Errorf("migrate: %w", err)
	}
	log.InfoContext(ctx, "migrated", slog.Any("applied", res.Applied), slog.Int64("version", res.Version),
		slog.Int64("durationMs", time.Since(start).Milliseconds()))
	if err := m.setReaderLogin(ctx); err != nil {
		log.ErrorContext(ctx, "read-only role not set up", slog.Any("error", err))
		return MigrateResult{}, fmt.Errorf("migrate: %w", err)
	}
	out := MigrateResult{Applied: res.Applied, Version: res.Version}
	if limits := ev.ResourceProperties.Limits; limits != "" {
		// Before the snapshot is published, so that it carries them. A
		// file that does not apply fails the deploy, which rolls back:
		// CloudFormation shows this error.
		n, err := m.applyLimits(ctx, limits)
		if err != nil {
			log.ErrorContext(ctx, "limits file not applied", slog.Any("error", err))
			return MigrateResult{}, fmt.Errorf("migrate: limits file: %w", err)
		}
		out.LimitsApplied = &n
		log.InfoContext(ctx, "limits file applied", slog.Int("writes", n))
	}
	if m.publish != nil {
		// Best effort, as after an admin write: the stack works without
		// it (authorizers load from the database until a rule is written),
		// so a Redis failure does not roll the deploy back.
		published, err := m.publish(ctx)
		switch {
		case err != nil && published:
			// Too large to store, or it replaced a snapshot the rule
			// writers did not sign: the error says which.
			out.Published = &published
			log.ErrorContext(ctx, "rules snapshot published with a problem", slog.Any("error", err))
		case err != nil:
			log.ErrorContext(ctx, "rules snapshot not published: authorizers load from the database until a rule or plan is written",
				slog.Any("error", err))
		default:
			out.Published = &published
			log.InfoContext(ctx, "rules snapshot published", slog.Bool("published", published))
		}
	}
	if m.subjectKey != nil {
		sk, err := m.recordKey(ctx, log, ev.SubjectKeyFrom)
		if err != nil {
			return MigrateResult{}, fmt.Errorf("migrate: %w", err)
		}
		out.SubjectKey = sk
	}
	if ev.RequestType != "" {
		out.PhysicalResourceID = MigrationsResourceID
		out.Data = m.data(&res.Version)
	}
	return out, nil
}

// restoreLimits puts back, on a rollback, the limits file of the template
// rolled back to, when the failed deploy changed it: that deploy's
// Update applied its own file before a later resource failed, and
// migrations only go forward but a limits file is data. It returns the
// writes made and whether the snapshot was published (nil: nothing done).
// A failure is logged with the fix and does not fail the rollback, which
// must not hang on the database (Handle); nor does a rollback to a
// template without a file, whose rules before are not known.
func (m *Migrator) restoreLimits(ctx context.Context, log *slog.Logger, ev *migrateEvent) (*int, *bool) {
	back, failed := ev.ResourceProperties.Limits, ev.OldResourceProperties.Limits
	switch {
	case back == failed:
		return nil, nil
	case back == "":
		log.WarnContext(ctx, "rollback: the failed deploy's limits file stays applied (the template rolled back to has none); "+
			"run sluice apply on the file you want")
		return nil, nil
	}
	n, err := 0, m.awaitDB(ctx)
	if err == nil {
		n, err = m.applyLimits(ctx, back)
	}
	if err != nil {
		log.ErrorContext(ctx, "rollback: the limits file rolled back to is not applied; the failed deploy's stays: "+
			"run sluice apply on the file rolled back to", slog.Any("error", err))
		return nil, nil
	}
	log.InfoContext(ctx, "rollback: limits file rolled back to applied", slog.Int("writes", n))
	if m.publish == nil || n == 0 {
		return &n, nil
	}
	published, err := m.publish(ctx)
	if err != nil && !published {
		log.ErrorContext(ctx, "rules snapshot not published: authorizers load from the database until a rule or plan is written",
			slog.Any("error", err))
		return &n, nil
	}
	return &n, &published
}

// data is a custom resource event's Data: the schema version, when
// migrated, and RulesPublicKey, when the function signs; nil when empty.
func (m *Migrator) data(version *int64) map[string]string {
	d := map[string]string{}
	if version != nil {
		d["Version"] = strconv.FormatInt(*version, 10)
	}
	if m.rulesKey != "" {
		d["RulesPublicKey"] = m.rulesKey
	}
	if len(d) == 0 {
		return nil
	}
	return d
}

// recordKey writes the subject-key record as the deployment does
// (subjectkey.Record.Deploy), or rotates it from the key id from. At a
// deploy, a record of another key is left as it is and logged with the
// fix, and so is Redis failing: neither rolls the deploy back (the admin
// API and the limiters refuse with the same fix). A rotation asked for
// and refused is the invocation's error.
func (m *Migrator) recordKey(ctx context.Context, log *slog.Logger, from string) (string, error) {
	if from != "" {
		if err := m.subjectKey.Rotate(ctx, from); err != nil {
			return "", err
		}
		log.InfoContext(ctx, "subject-key record rotated", slog.String("from", from), slog.String("to", m.subjectKey.ID()))
		return "rotated", nil
	}
	outcome, err := m.subjectKey.Deploy(ctx)
	if err != nil {
		log.ErrorContext(ctx, "subject-key record not written: the admin API and embedded limiters refuse until it is fixed", slog.Any("error", err))
		return "refused", nil
	}
	log.InfoContext(ctx, "subject-key record", slog.String("outcome", string(outcome)), slog.String("keyId", m.subjectKey.ID()))
	return string(outcome), nil
}

// LimitsActor is the audit log's actor of the writes a deploy's limits
// file makes.
const LimitsActor = "cdk deploy (limits file)"

// applyLimits converges the limits file's set to it, as `sluice apply`
// does (rulefile.Diff, then one all-or-nothing store.Apply): it creates,
// updates at the stored versions and deletes within the file's set, and
// never writes a rule or plan outside it. It returns the number of
// writes.
func (m *Migrator) applyLimits(ctx context.Context, text string) (int, error) {
	if m.store == nil {
		return 0, errors.New("no rules store")
	}
	f, err := rulefile.Parse("limits", []byte(text))
	if err != nil {
		return 0, err
	}
	have, err := m.store.LoadAll(ctx)
	if err != nil {
		return 0, err
	}
	b, _, err := rulefile.Diff(f, have)
	if err != nil {
		return 0, err
	}
	if len(b.Ops) == 0 {
		return 0, nil
	}
	if _, err := m.store.Apply(ctx, b, LimitsActor); err != nil {
		return 0, err
	}
	return len(b.Ops), nil
}

// dbWait bounds how long a migration waits for the database to accept a
// connection (awaitDB), within the function's 5 minutes: a stack's first
// deploy connects through an RDS Proxy created moments before, whose
// targets take a while to register, and a paused Aurora takes about 15 s
// to resume. A failure here rolls back the whole creation (about 30
// minutes with a proxy), so it waits rather than fail fast.
const dbWait = 3 * time.Minute

// dbRetry is the pause between two failed connections in awaitDB.
const dbRetry = 2 * time.Second

// awaitDB pings the database until a connection succeeds, retrying
// connection failures (pgconn.ConnectError: refused, timed out, or the
// server's error during startup, as a proxy without a target answers) for
// up to dbWait; any other error, and the context's end, stop it.
func (m *Migrator) awaitDB(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dbWait)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := m.db.PingContext(ctx)
		var ce *pgconn.ConnectError
		if err == nil || !errors.As(err, &ce) {
			return err
		}
		m.log.WarnContext(ctx, "database not reachable yet", slog.Int("attempt", attempt), slog.Any("error", err))
		t := time.NewTimer(dbRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("database unreachable after %d attempts: %w", attempt, err)
		case <-t.C:
		}
	}
}

// setReaderLogin gives the read-only role (migration 00007) LOGIN and the
// password of its secret, so that the read-only admin functions can
// connect as it. It runs after every migration run, so a deploy that
// replaces the secret also moves the password. The role must exist: a
// database user without CREATEROLE skips it in the migration, and a stack
// that then hands out the reader's secret would leave those functions
// unable to connect, so the deploy fails here and says why.
func (m *Migrator) setReaderLogin(ctx context.Context) error {
	if m.reader == nil {
		return nil
	}
	var exists bool
	if err := m.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, m.reader.Username).Scan(&exists); err != nil {
		return fmt.Errorf("look up role %q: %w", m.reader.Username, err)
	}
	if !exists {
		return fmt.Errorf("role %q does not exist: the migrating user may not create roles (CREATEROLE); "+
			"create it (CREATE ROLE %s NOLOGIN) and migrate again, or leave DB_READER_SECRET_ARN unset", m.reader.Username, m.reader.Username)
	}
	// ALTER ROLE takes no parameters: the name is quoted as an identifier
	// and the password as a literal (standard_conforming_strings is on
	// in every supported PostgreSQL, so only the quote needs doubling).
	stmt := "ALTER ROLE " + quoteIdent(m.reader.Username) + " WITH LOGIN PASSWORD '" +
		strings.ReplaceAll(string(m.reader.Password), "'", "''") + "'"
	if _, err := m.db.ExecContext(ctx, stmt); err != nil {
		// The statement holds the password: keep only the server's
		// message and code, never the statement.
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return fmt.Errorf("set the login of role %q: %s (SQLSTATE %s)", m.reader.Username, pe.Message, pe.Code)
		}
		return fmt.Errorf("set the login of role %q failed", m.reader.Username)
	}
	m.log.InfoContext(ctx, "read-only role can log in", slog.String("role", m.reader.Username))
	return nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
