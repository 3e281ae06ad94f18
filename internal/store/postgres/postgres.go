// Package postgres is Sluice's rules store on PostgreSQL (pgx v5): rules,
// plans and an audit log of every write to them, plus Migrate, which applies
// the embedded schema in package migrations.
//
// Every write commits together with its audit row in one transaction.
// Updates and deletes are optimistic: they name the version they expect, and
// a lost race is rules.ErrStale rather than a silent overwrite. Scope
// uniqueness and the plan foreign key are enforced by the database, and
// their violations come back as rules.ErrConflict and *rules.ValidationError.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/input"
)

// PostgreSQL error codes the store maps to domain errors.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeCheckViolation      = "23514"
)

// Store is the PostgreSQL rules store. It is safe for concurrent use.
type Store struct {
	store.Single // the single writes, by writeOne
	pool         *pgxpool.Pool
	maxRules     int
}

var _ store.Store = (*Store)(nil)

// New returns a store over pool with the default Options. The schema must
// be migrated (Migrate).
func New(pool *pgxpool.Pool) *Store { return NewWithOptions(pool, store.Options{}) }

// NewWithOptions returns a store over pool configured by o. The schema must
// be migrated (Migrate).
func NewWithOptions(pool *pgxpool.Pool, o store.Options) *Store {
	if o.MaxRules <= 0 {
		o.MaxRules = store.DefaultMaxRules
	}
	s := &Store{pool: pool, maxRules: o.MaxRules}
	s.Single = s.writeOne
	return s
}

// bumpVersion moves the rules version (table rules_version, one row) to the
// time in microseconds, and at least by one. Every write does it first in
// its transaction: the row lock it takes serializes writes until they
// commit, so versions follow commit order (a LoadAll that reads version v
// sees every write up to v and none after it), CreateRule counts rules
// without a race, and no two writes can deadlock on each other's rows.
func bumpVersion(ctx context.Context, tx pgx.Tx) error {
	tag, err := tx.Exec(ctx, `UPDATE rules_version
		SET version = greatest(version + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)`)
	if err != nil {
		return fmt.Errorf("move the rules version: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return errors.New("move the rules version: table rules_version has no row")
	}
	return nil
}

// ruleColumns read a rule's NULL plan and period_ms as "" and 0, as
// ruleArgs' statements write them (nullif).
const ruleColumns = `id::text, api, route, subject, coalesce(plan, ''), limit_count, coalesce(period_ms, 0), burst, cost,
	failure_mode, mode, enabled, description, version, created_at, updated_at, kind, anchor, min_remaining, dimension, durable,
	set_name, expires_at, global`

const planColumns = `name, limit_count, period_ms, burst, description, version, created_at, updated_at, kind, set_name, global`

// write runs fn in a transaction that first moves the rules version
// (bumpVersion). An fn that returns errUnchanged, an update that changes
// nothing, is rolled back and succeeds.
func (s *Store) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := bumpVersion(ctx, tx); err != nil {
			return err
		}
		return fn(tx)
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// writeOne makes op outside a batch (store.Single), each in one
// transaction with its audit row: readied (ready) before any transaction,
// then in one of its own (write), where a rule create first checks the
// room left.
func (s *Store) writeOne(ctx context.Context, op store.Op, actor string) (store.Result, error) {
	if err := ready(&op, ""); err != nil {
		return store.Result{}, err
	}
	var res store.Result
	err := s.write(ctx, func(tx pgx.Tx) (err error) {
		if op.Action == rules.ActionCreate && op.Rule != nil {
			// Under the version row's lock no other write runs: the
			// count holds until we commit.
			if err := s.checkCount(ctx, tx, 0); err != nil {
				return err
			}
		}
		res, err = applyOp(ctx, tx, op, "", actor)
		return err
	})
	return res, s.nameHolder(ctx, err)
}

// ready points op at a copy of its rule or plan, readied for a write for
// set (input.RuleWrite, input.PlanWrite): what needs no database is
// checked before any transaction.
func ready(op *store.Op, set string) error {
	if op.Rule != nil {
		r := *op.Rule
		op.Rule = &r
		return input.RuleWrite(&r, op.Action, set)
	}
	p := *op.Plan
	op.Plan = &p
	return input.PlanWrite(&p, op.Action, set)
}

// checkCount fails with rules.ErrTooManyRules when the store holds more
// than maxRules-room rules: room 0 before one create, -1 after a batch.
func (s *Store) checkCount(ctx context.Context, tx pgx.Tx, room int) error {
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM rules`).Scan(&n); err != nil {
		return err
	}
	if n >= s.maxRules-room {
		return fmt.Errorf("the store holds %d rules, its maximum %d: %w", n, s.maxRules, rules.ErrTooManyRules)
	}
	return nil
}

// createRule inserts r, normalised and checked for text, in tx.
func createRule(ctx context.Context, tx pgx.Tx, r rules.Rule, actor string) (rules.Rule, error) {
	row := tx.QueryRow(ctx, `INSERT INTO rules
		(api, route, subject, plan, limit_count, period_ms, burst, cost, failure_mode, mode, enabled, description,
		 kind, anchor, min_remaining, dimension, durable, set_name, expires_at, global)
		VALUES ($1, $2, $3, nullif($4, ''), $5, nullif($6::bigint, 0), $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
		RETURNING `+ruleColumns, ruleArgs(r)...)
	out, err := scanRule(row)
	if err != nil {
		return rules.Rule{}, ruleWriteError(err, r)
	}
	if err := checkRulePlan(ctx, tx, out); err != nil {
		return rules.Rule{}, err
	}
	return out, audit(ctx, tx, rules.KindRule, out.ID, rules.ActionCreate, actor, nil, out)
}

// GetRule returns the rule with that id, or rules.ErrNotFound (also for an
// id that is not a UUID, without asking the database).
func (s *Store) GetRule(ctx context.Context, id string) (rules.Rule, error) {
	cid, ok := input.ID(id)
	if !ok {
		return rules.Rule{}, fmt.Errorf("get rule %q: %w", id, rules.ErrNotFound)
	}
	r, err := readRule(ctx, s.pool, cid, 0, "", "")
	if err != nil {
		return rules.Rule{}, fmt.Errorf("get rule %q: %w", cid, err)
	}
	return r, nil
}

// updateRule replaces rule r.ID with r in tx when readRule allows it. An
// update that changes nothing returns the rule as it is with errUnchanged:
// the caller rolls back.
func updateRule(ctx context.Context, tx pgx.Tx, r rules.Rule, ifVersion int64, set, actor string) (rules.Rule, error) {
	before, err := readRule(ctx, tx, r.ID, ifVersion, set, "FOR UPDATE")
	if err != nil {
		return rules.Rule{}, err
	}
	// The version condition is already guaranteed by the row lock; it
	// stays in the statement so the UPDATE is correct on its own.
	row := tx.QueryRow(ctx, `UPDATE rules SET
		api = $1, route = $2, subject = $3, plan = nullif($4, ''), limit_count = $5, period_ms = nullif($6::bigint, 0),
		burst = $7, cost = $8, failure_mode = $9, mode = $10, enabled = $11, description = $12,
		kind = $13, anchor = $14, min_remaining = $15, dimension = $16, durable = $17,
		set_name = $18, expires_at = $19, global = $20,
		version = version + 1, updated_at = now()
		WHERE id = $21::uuid AND version = $22
		RETURNING `+ruleColumns, append(ruleArgs(r), r.ID, before.Version)...)
	out, err := scanRule(row)
	if err != nil {
		return rules.Rule{}, ruleWriteError(err, r)
	}
	if input.SameRule(before, out) {
		// Compared as stored, so "1.5m" equals "90s". The rollback
		// undoes the version bumps: no new version, no audit entry.
		return before, errUnchanged
	}
	if err := checkRulePlan(ctx, tx, out); err != nil {
		return rules.Rule{}, err
	}
	return out, audit(ctx, tx, rules.KindRule, r.ID, rules.ActionUpdate, actor, before, out)
}

// deleteRule deletes rule cid in tx when readRule allows it.
func deleteRule(ctx context.Context, tx pgx.Tx, cid string, ifVersion int64, set, actor string) error {
	before, err := readRule(ctx, tx, cid, ifVersion, set, "FOR UPDATE")
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM rules WHERE id = $1::uuid AND version = $2`, cid, before.Version); err != nil {
		return err
	}
	return audit(ctx, tx, rules.KindRule, cid, rules.ActionDelete, actor, before, nil)
}

// checkRulePlan checks, once r is written in tx, that r fits the plan it
// names (rules.Rule.ValidateWithPlan). It reads the plan FOR SHARE, which
// conflicts with the FOR NO KEY UPDATE of updatePlan: a plan update and a
// rule write naming that plan never both commit unchecked against each
// other's numbers (see updatePlan).
func checkRulePlan(ctx context.Context, tx pgx.Tx, r rules.Rule) error {
	if r.Plan == "" {
		return nil
	}
	p, err := scanPlan(tx.QueryRow(ctx, `SELECT `+planColumns+` FROM plans WHERE name = $1 FOR SHARE`, r.Plan))
	if errors.Is(err, pgx.ErrNoRows) {
		// Deleted since the foreign key check: deletePlan's FOR UPDATE
		// made this read wait for it.
		return input.FieldError("plan", fmt.Sprintf("unknown plan %q", r.Plan))
	}
	if err != nil {
		return err
	}
	return r.ValidateWithPlan(p)
}

// readRule reads the rule with the row lock lock (a constant: "" for a
// read, FOR UPDATE for a write) and checks that a write may change it
// (store.CheckRow): rules.ErrNotFound when it is gone, ErrStale when
// ifVersion (unless 0) is not current, a *store.NotOwnedError when set
// (unless "") does not own it. Under the row lock a concurrent writer
// waits, then sees the new version.
func readRule(ctx context.Context, q querier, id string, ifVersion int64, set, lock string) (rules.Rule, error) {
	r, err := scanRule(q.QueryRow(ctx, `SELECT `+ruleColumns+` FROM rules WHERE id = $1::uuid `+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return rules.Rule{}, rules.ErrNotFound
	}
	if err == nil {
		err = store.CheckRow("rule "+id, r.Version, ifVersion, r.Set, set)
	}
	return r, err
}

// ListRules returns one page of the rules matching f, ordered by api, route,
// subject and id, byte by byte (COLLATE "C", as input.Key compares), with
// keyset pagination from the cursor: rules_list_order_idx (migration 00006)
// serves the order, so a page costs the same however deep it is. A bad
// page size or cursor is a *rules.ValidationError.
func (s *Store) ListRules(ctx context.Context, f rules.Filter) (rules.Page, error) {
	size, after, err := input.Page(f)
	if err != nil {
		return rules.Page{}, err
	}
	// The WHERE clause is assembled from fixed column names; every value is
	// a parameter. Only the filters given appear, so each query can use the
	// index that leads with its column.
	var (
		where []string
		args  []any
	)
	// api compares in the list's collation (the same equality: both are
	// deterministic), so that rules_list_order_idx serves an api's list in
	// order; subject, route and plan keep theirs for their own indexes.
	for _, c := range []struct{ col, v string }{{`api COLLATE "C"`, f.API}, {"subject", f.Subject}, {"route", f.Route}, {"plan", f.Plan}} {
		if c.v != "" {
			args = append(args, c.v)
			where = append(where, c.col+" = $"+strconv.Itoa(len(args)))
		}
	}
	if after != nil {
		// A row comparison: the rules after the cursor's, in list order.
		args = append(args, after.API, after.Route, after.Subject, after.ID)
		n := len(args)
		where = append(where, fmt.Sprintf(`(api COLLATE "C", route COLLATE "C", subject COLLATE "C", id) > ($%d, $%d, $%d, $%d::uuid)`, n-3, n-2, n-1, n))
	}
	q := `SELECT ` + ruleColumns + ` FROM rules`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, size+1)
	q += ` ORDER BY api COLLATE "C", route COLLATE "C", subject COLLATE "C", id LIMIT $` + strconv.Itoa(len(args))

	rs, err := all(scanRule)(s.pool.Query(ctx, q, args...))
	if err != nil {
		return rules.Page{}, fmt.Errorf("list rules: %w", err)
	}
	return input.PageOf(rs, size), nil
}

// RuleHistory returns the audit entries of the rule, oldest first, also
// after it was deleted; rules.ErrNotFound when it never existed.
func (s *Store) RuleHistory(ctx context.Context, id string) ([]rules.AuditEntry, error) {
	cid, ok := input.ID(id)
	if !ok {
		return nil, fmt.Errorf("rule history %q: %w", id, rules.ErrNotFound)
	}
	return s.history(ctx, rules.KindRule, cid)
}

// createPlan inserts p, normalised and checked for text, in tx.
func createPlan(ctx context.Context, tx pgx.Tx, p rules.Plan, actor string) (rules.Plan, error) {
	row := tx.QueryRow(ctx, `INSERT INTO plans (name, limit_count, period_ms, burst, description, kind, set_name, global)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+planColumns,
		p.Name, p.Limit, p.Period.Duration().Milliseconds(), p.Burst, p.Description, string(p.Kind), p.Set, p.Global)
	out, err := scanPlan(row)
	if err != nil {
		return rules.Plan{}, planWriteError(err, p.Name)
	}
	return out, audit(ctx, tx, rules.KindPlan, p.Name, rules.ActionCreate, actor, nil, out)
}

// GetPlan returns the plan with that name, or rules.ErrNotFound.
func (s *Store) GetPlan(ctx context.Context, name string) (rules.Plan, error) {
	if !input.Storable(name) {
		return rules.Plan{}, fmt.Errorf("get plan %q: %w", name, rules.ErrNotFound)
	}
	p, err := readPlan(ctx, s.pool, name, 0, "", "")
	if err != nil {
		return rules.Plan{}, fmt.Errorf("get plan %q: %w", name, err)
	}
	return p, nil
}

// updatePlan replaces plan p.Name in tx when readPlan allows it;
// errUnchanged as updateRule.
func updatePlan(ctx context.Context, tx pgx.Tx, p rules.Plan, ifVersion int64, set, actor string) (rules.Plan, error) {
	// NO KEY UPDATE conflicts with the FOR SHARE every rule write
	// naming the plan takes (checkRulePlan): those that locked it
	// first have committed, and the check below sees them; those that
	// come later wait, then check against the new numbers.
	before, err := readPlan(ctx, tx, p.Name, ifVersion, set, "FOR NO KEY UPDATE")
	if err != nil {
		return rules.Plan{}, err
	}
	row := tx.QueryRow(ctx, `UPDATE plans SET
		limit_count = $1, period_ms = $2, burst = $3, description = $4, kind = $7, set_name = $8, global = $9,
		version = version + 1, updated_at = now()
		WHERE name = $5 AND version = $6
		RETURNING `+planColumns,
		p.Limit, p.Period.Duration().Milliseconds(), p.Burst, p.Description, p.Name, before.Version, string(p.Kind), p.Set, p.Global)
	out, err := scanPlan(row)
	if err != nil {
		return rules.Plan{}, planWriteError(err, p.Name)
	}
	if input.SamePlan(before, out) {
		return before, errUnchanged // rolled back, as for a rule
	}
	named, err := all(scanRule)(tx.Query(ctx, `SELECT `+ruleColumns+` FROM rules WHERE plan = $1 ORDER BY id`, p.Name))
	if err != nil {
		return rules.Plan{}, err
	}
	if err := rules.CheckPlanRules(out, named); err != nil {
		return rules.Plan{}, err
	}
	return out, audit(ctx, tx, rules.KindPlan, p.Name, rules.ActionUpdate, actor, before, out)
}

// deletePlan deletes plan name in tx when readPlan allows it and no rule
// names it.
func deletePlan(ctx context.Context, tx pgx.Tx, name string, ifVersion int64, set, actor string) error {
	// FOR UPDATE: no rule can start naming the plan until we commit.
	before, err := readPlan(ctx, tx, name, ifVersion, set, "FOR UPDATE")
	if err != nil {
		return err
	}
	if err := planInUse(ctx, tx, name); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM plans WHERE name = $1 AND version = $2`, name, before.Version); err != nil {
		// A rule created meanwhile still trips the foreign key.
		if pgError(err).Code == codeForeignKeyViolation {
			return &store.PlanInUseError{Plan: name, Count: 1}
		}
		return err
	}
	return audit(ctx, tx, rules.KindPlan, name, rules.ActionDelete, actor, before, nil)
}

// planInUse is a *store.PlanInUseError while rules name the plan, else nil.
func planInUse(ctx context.Context, tx pgx.Tx, name string) error {
	rows, err := tx.Query(ctx, `SELECT id::text, count(*) OVER () FROM rules WHERE plan = $1 ORDER BY id LIMIT $2`, name, store.MaxListed)
	if err != nil {
		return err
	}
	e := &store.PlanInUseError{Plan: name}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id, &e.Count}, func() error {
		e.Rules = append(e.Rules, id)
		return nil
	}); err != nil {
		return err
	}
	if e.Count == 0 {
		return nil
	}
	return e
}

// errUnchanged rolls back an update that would change nothing: write and
// Apply's savepoint take it for success.
var errUnchanged = errors.New("unchanged")

// scopeTaken is the unique violation of a rule write, until nameHolder
// has read who holds the scope.
type scopeTaken struct{ r rules.Rule }

func (e scopeTaken) Error() string { return "scope taken" }

// nameHolder turns a scopeTaken (a write's unique violation, whose
// transaction is aborted by then) into a *store.ScopeTakenError naming the
// rule that holds the scope, read on its own; any other error it returns as
// it is.
func (s *Store) nameHolder(ctx context.Context, err error) error {
	var st scopeTaken
	if !errors.As(err, &st) {
		return err
	}
	r := st.r
	out := &store.ScopeTakenError{API: r.API, Route: r.Route, Kind: r.Kind, Dimension: r.Dimension, Wildcard: r.Subject == rules.Wildcard}
	// No row (deleted meanwhile) or a failed read leaves ID empty: the
	// error then says "another rule".
	_ = s.pool.QueryRow(ctx, `SELECT id::text FROM rules
		WHERE api = $1 AND route = $2 AND subject = $3 AND kind = $4 AND dimension = $5`,
		r.API, r.Route, r.Subject, string(r.Kind), r.Dimension).Scan(&out.ID)
	return out
}

// readPlan reads the plan with the row lock lock and checks that a write
// may change it, as readRule does.
func readPlan(ctx context.Context, q querier, name string, ifVersion int64, set, lock string) (rules.Plan, error) {
	p, err := scanPlan(q.QueryRow(ctx, `SELECT `+planColumns+` FROM plans WHERE name = $1 `+lock, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return rules.Plan{}, rules.ErrNotFound
	}
	if err == nil {
		err = store.CheckRow(fmt.Sprintf("plan %q", name), p.Version, ifVersion, p.Set, set)
	}
	return p, err
}

// ListPlans returns every plan ordered by name.
func (s *Store) ListPlans(ctx context.Context) ([]rules.Plan, error) {
	ps, err := listPlans(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	return ps, nil
}

// PlanHistory returns the audit entries of the plan, oldest first, also
// after it was deleted; rules.ErrNotFound when it never existed.
func (s *Store) PlanHistory(ctx context.Context, name string) ([]rules.AuditEntry, error) {
	if !input.Storable(name) {
		return nil, fmt.Errorf("plan history %q: %w", name, rules.ErrNotFound)
	}
	return s.history(ctx, rules.KindPlan, name)
}

// LoadAll returns every rule, disabled ones too, ordered by id, and every
// plan ordered by name, with the rules version, read from one consistent
// snapshot of the database.
func (s *Store) LoadAll(ctx context.Context) (rules.Set, error) {
	var set rules.Set
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// The version first: it fixes the transaction's snapshot.
		if err := tx.QueryRow(ctx, `SELECT version FROM rules_version`).Scan(&set.Version); err != nil {
			return fmt.Errorf("read the rules version: %w", err)
		}
		var err error
		if set.Rules, err = all(scanRule)(tx.Query(ctx, `SELECT `+ruleColumns+` FROM rules ORDER BY id`)); err != nil {
			return err
		}
		set.Plans, err = listPlans(ctx, tx)
		return err
	})
	if err != nil {
		return rules.Set{}, fmt.Errorf("load rules and plans: %w", err)
	}
	return set, nil
}

// querier is what both a pool and a transaction offer.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// all collects every row of a query, as the query returns them, by scan:
// all(scanRule)(q.Query(ctx, sql, args...)). A failed query is its error.
func all[T any](scan func(pgx.Row) (T, error)) func(pgx.Rows, error) ([]T, error) {
	return func(rows pgx.Rows, err error) ([]T, error) {
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
	}
}

func listPlans(ctx context.Context, q querier) ([]rules.Plan, error) {
	return all(scanPlan)(q.Query(ctx, `SELECT `+planColumns+` FROM plans ORDER BY name`))
}

func (s *Store) history(ctx context.Context, kind, target string) ([]rules.AuditEntry, error) {
	es, err := all(func(row pgx.Row) (e rules.AuditEntry, err error) {
		// SQL NULL scans as a nil json.RawMessage.
		err = row.Scan(&e.ID, &e.Kind, &e.TargetID, &e.Action, &e.Actor, &e.At, &e.Before, &e.After)
		e.At = e.At.UTC()
		return e, err
	})(s.pool.Query(ctx, `SELECT id, kind, target_id, action, actor, at, before, after
		FROM audit_log WHERE kind = $1 AND target_id = $2 ORDER BY id`, kind, target))
	if err != nil {
		return nil, fmt.Errorf("%s history %q: %w", kind, target, err)
	}
	if len(es) == 0 {
		return nil, fmt.Errorf("%s history %q: %w", kind, target, rules.ErrNotFound)
	}
	return es, nil
}

// audit records one write in the transaction of the write itself. before
// and after are a Rule or Plan, or nil for SQL NULL.
func audit(ctx context.Context, tx pgx.Tx, kind, target, action, actor string, before, after any) error {
	b, err := auditJSON(before)
	if err != nil {
		return err
	}
	a, err := auditJSON(after)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO audit_log (kind, target_id, action, actor, before, after)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb)`, kind, target, action, actor, b, a); err != nil {
		return fmt.Errorf("write audit row: %w", err)
	}
	return nil
}

// auditJSON marshals a Rule or Plan; a nil interface or nil pointer is SQL
// NULL.
func auditJSON(v any) (*string, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("audit: marshal %T: %w", v, err)
	}
	str := string(b)
	return &str, nil
}

// ruleArgs are r's columns, $1 to $20 of the statements that write a rule:
// those statements store a plan of "" and a period of 0 as NULL.
func ruleArgs(r rules.Rule) []any {
	var anchor *time.Time
	if t, ok := r.AnchorTime(); ok {
		anchor = &t
	}
	return []any{r.API, r.Route, r.Subject, r.Plan, r.Limit, r.Period.Duration().Milliseconds(), r.Burst, r.Cost,
		string(r.FailureMode), string(r.Mode), *r.Enabled, r.Description,
		string(r.Kind), anchor, r.MinRemaining, r.Dimension, r.Durable, r.Set, r.ExpiresAt, r.Global}
}

func scanRule(row pgx.Row) (rules.Rule, error) {
	var (
		r        rules.Rule
		periodMS int64
		anchor   *time.Time
	)
	err := row.Scan(&r.ID, &r.API, &r.Route, &r.Subject, &r.Plan, &r.Limit, &periodMS, &r.Burst, &r.Cost,
		&r.FailureMode, &r.Mode, &r.Enabled, &r.Description, &r.Version, &r.CreatedAt, &r.UpdatedAt, &r.Kind, &anchor, &r.MinRemaining, &r.Dimension, &r.Durable,
		&r.Set, &r.ExpiresAt, &r.Global)
	if err != nil {
		return rules.Rule{}, err
	}
	if r.ExpiresAt != nil {
		t := r.ExpiresAt.UTC()
		r.ExpiresAt = &t
	}
	if anchor != nil {
		r.Anchor = anchor.UTC().Format(time.RFC3339Nano)
	}
	r.Period = rules.Period(time.Duration(periodMS) * time.Millisecond)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

func scanPlan(row pgx.Row) (rules.Plan, error) {
	var (
		p        rules.Plan
		periodMS int64
	)
	err := row.Scan(&p.Name, &p.Limit, &periodMS, &p.Burst, &p.Description, &p.Version, &p.CreatedAt, &p.UpdatedAt, &p.Kind, &p.Set, &p.Global)
	if err != nil {
		return rules.Plan{}, err
	}
	p.Period = rules.Period(time.Duration(periodMS) * time.Millisecond)
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, nil
}

// ruleWriteError maps the constraint violations of a rule insert or update
// to domain errors.
func ruleWriteError(err error, r rules.Rule) error {
	switch pgErr := pgError(err); pgErr.Code {
	case codeUniqueViolation:
		return scopeTaken{r}
	case codeForeignKeyViolation:
		return input.FieldError("plan", fmt.Sprintf("unknown plan %q", r.Plan))
	case codeCheckViolation:
		return checkError(pgErr.ConstraintName, "rules_")
	}
	return err
}

func planWriteError(err error, name string) error {
	switch pgErr := pgError(err); pgErr.Code {
	case codeUniqueViolation:
		return fmt.Errorf("a plan named %q already exists: %w", name, rules.ErrConflict)
	case codeCheckViolation:
		return checkError(pgErr.ConstraintName, "plans_")
	}
	return err
}

// checkError turns a CHECK violation into input.Violation of the
// constraint: the migrations name them <table>_<name>_check.
func checkError(constraint, tablePrefix string) error {
	return input.Violation(strings.TrimSuffix(strings.TrimPrefix(constraint, tablePrefix), "_check"))
}

// pgError is the *pgconn.PgError err wraps, or an empty one (no Code).
func pgError(err error) *pgconn.PgError {
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
		return pgErr
	}
	return &pgconn.PgError{}
}

// Apply makes every write of b in one transaction (store.Store.Apply):
// one rules version bump, the ops in order, the rule count once at the
// end. An update that changes nothing runs in a savepoint that is rolled
// back, so it writes no version and no audit entry, as UpdateRule.
func (s *Store) Apply(ctx context.Context, b store.Batch, actor string) ([]store.Result, error) {
	if err := store.CheckBatch(b); err != nil {
		return nil, err
	}
	if len(b.Ops) == 0 {
		return []store.Result{}, nil // nothing to write: no transaction, no new version
	}
	out := make([]store.Result, len(b.Ops))
	creates := false
	err := s.write(ctx, func(tx pgx.Tx) error {
		for i, op := range b.Ops {
			err := ready(&op, b.Set)
			apply := func(tx pgx.Tx) (err error) {
				out[i], err = applyOp(ctx, tx, op, b.Set, actor)
				return err
			}
			switch {
			case err != nil: // not readied: the op fails below
			case op.Action == rules.ActionUpdate: // in a savepoint
				if err = pgx.BeginFunc(ctx, tx, apply); errors.Is(err, errUnchanged) {
					err = nil
				}
			default:
				err = apply(tx)
			}
			if err != nil {
				return &store.BatchError{Index: i, Op: b.Ops[i].Describe(), Err: s.nameHolder(ctx, err)}
			}
			creates = creates || (op.Action == rules.ActionCreate && op.Rule != nil)
		}
		if creates {
			return s.checkCount(ctx, tx, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("apply set %q: %w", b.Set, err)
	}
	return out, nil
}

// applyOp makes op, readied (ready), in tx for set (a batch's; "" for a
// single write). An update that changes nothing returns the stored rule
// or plan with errUnchanged.
func applyOp(ctx context.Context, tx pgx.Tx, op store.Op, set, actor string) (store.Result, error) {
	if r := op.Rule; r != nil {
		var (
			got rules.Rule
			err error
		)
		switch op.Action {
		case rules.ActionCreate:
			got, err = createRule(ctx, tx, *r, actor)
		case rules.ActionUpdate:
			got, err = updateRule(ctx, tx, *r, op.IfVersion, set, actor)
		default:
			return store.Result{}, deleteRule(ctx, tx, r.ID, op.IfVersion, set, actor)
		}
		return store.Result{Rule: &got}, err
	}
	var (
		got rules.Plan
		err error
	)
	switch op.Action {
	case rules.ActionCreate:
		got, err = createPlan(ctx, tx, *op.Plan, actor)
	case rules.ActionUpdate:
		got, err = updatePlan(ctx, tx, *op.Plan, op.IfVersion, set, actor)
	default:
		return store.Result{}, deletePlan(ctx, tx, op.Plan.Name, op.IfVersion, set, actor)
	}
	return store.Result{Plan: &got}, err
}
