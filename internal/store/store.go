// Package store holds Store, the contract of a rules store: what the admin
// API, the authorizer's snapshot loader and `sluice local` may ask of one.
//
// Its subpackages implement and check it: postgres is the store on
// PostgreSQL in production, memory the in-process store behind `make run`,
// storetest the contract suite both pass, input the checks of caller input
// both share. The copy of the rules the admin path publishes to Redis
// after every write lives with the cache that reads it, in
// internal/rulesync.
package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/rules"
)

// DefaultMaxRules is the most rules a store holds unless Options say
// otherwise. Every authorizer instance holds them all in memory and reads
// them all on a reload, and the admin path reads them all after every
// write to publish them; 10,000 rules make a published snapshot of about
// 0.4 MB (docs/authorizer.md).
const DefaultMaxRules = 10_000

// Options configure a Store implementation. The zero value is usable; each
// field's default is written on it.
type Options struct {
	// MaxRules is the most rules the store holds: CreateRule fails with
	// rules.ErrTooManyRules when that many exist. Default DefaultMaxRules.
	// Lowering it below the current count refuses creates and keeps every
	// rule.
	MaxRules int
}

// Store is a rules store: rules, plans and the audit log of every write to
// them. Implementations are safe for concurrent use.
//
// Every method takes a context and honours its deadline. Errors are wrapped
// with context: test them with errors.Is against rules.ErrNotFound,
// rules.ErrConflict and rules.ErrStale, and with errors.As for a
// *rules.ValidationError. Any other error is a failure of the store itself,
// never the caller's fault. Returned values are copies: changing them does
// not change the store.
//
// A write and its audit entry, recorded by actor, commit together or not at
// all. Writes that take ifVersion apply only when the stored Version equals
// it; 0 accepts any version.
type Store interface {
	// CreateRule stores r with a new UUID, Version 1 and timestamps, and
	// returns the stored rule. Errors: a *ScopeTakenError (rules.ErrConflict)
	// naming the rule that holds the scope (api, route, subject, kind,
	// dimension); rules.ErrTooManyRules when
	// the store already holds Options.MaxRules rules (checked in the same
	// transaction, so concurrent creates never exceed it);
	// *rules.ValidationError for an unknown plan, a rule that does not fit
	// its plan's numbers (rules.Rule.ValidateWithPlan: a cost above the
	// plan's burst or beyond rules.MaxHorizon), or a field out of range or
	// not storable as text. The plan is read in the write's transaction, so
	// no concurrent UpdatePlan slips between the check and the write.
	CreateRule(ctx context.Context, r rules.Rule, actor string) (rules.Rule, error)
	// GetRule returns the rule with that id. Errors: rules.ErrNotFound, also
	// for an id that is not a UUID.
	GetRule(ctx context.Context, id string) (rules.Rule, error)
	// UpdateRule replaces the rule r.ID with r when its version is
	// ifVersion, bumps Version and returns the stored rule. An update that
	// changes nothing as stored (a period of "1.5m" on a rule of "90s")
	// writes nothing: it returns the rule as it is, same version, no audit
	// entry, no new rules version. Errors: rules.ErrNotFound,
	// rules.ErrStale, a *ScopeTakenError (the new scope is taken),
	// *rules.ValidationError as for CreateRule.
	UpdateRule(ctx context.Context, r rules.Rule, ifVersion int64, actor string) (rules.Rule, error)
	// DeleteRule deletes the rule with that id when its version is
	// ifVersion. Errors: rules.ErrNotFound, rules.ErrStale.
	DeleteRule(ctx context.Context, id string, ifVersion int64, actor string) error
	// ListRules returns one page of the rules matching f, ordered by api,
	// then route, then subject, then id, each compared byte by byte
	// (input.Key);
	// Page.Rules is empty but not nil when none match, and Page.NextCursor
	// is "" on the last page. Errors: *rules.ValidationError on "limit" or
	// "cursor" for a bad page size or cursor, and on a filter field not
	// storable as text.
	ListRules(ctx context.Context, f rules.Filter) (rules.Page, error)
	// RuleHistory returns the audit entries of the rule with that id, oldest
	// first, also after it was deleted. Errors: rules.ErrNotFound when there
	// are none (the rule never existed).
	RuleHistory(ctx context.Context, id string) ([]rules.AuditEntry, error)

	// CreatePlan stores p with Version 1 and timestamps, and returns the
	// stored plan. Errors: rules.ErrConflict when a plan of that name exists;
	// *rules.ValidationError for a field out of range or not storable as
	// text.
	CreatePlan(ctx context.Context, p rules.Plan, actor string) (rules.Plan, error)
	// GetPlan returns the plan with that name. Errors: rules.ErrNotFound.
	GetPlan(ctx context.Context, name string) (rules.Plan, error)
	// UpdatePlan replaces the plan p.Name with p when its version is
	// ifVersion, bumps Version and returns the stored plan (an update that
	// changes nothing writes nothing, as for UpdateRule); rules naming the
	// plan get its new numbers from the next LoadAll on. Errors:
	// rules.ErrNotFound, rules.ErrStale, *rules.ValidationError as for
	// CreatePlan, and a *rules.PlanConflictError (rules.ErrConflict) listing
	// the rules naming the plan, disabled ones included, that would not fit
	// its new numbers (rules.CheckPlanRules); nothing is written then.
	UpdatePlan(ctx context.Context, p rules.Plan, ifVersion int64, actor string) (rules.Plan, error)
	// DeletePlan deletes the plan with that name when its version is
	// ifVersion. Errors: rules.ErrNotFound, rules.ErrStale, and a
	// *PlanInUseError (rules.ErrConflict) while rules name the plan.
	DeletePlan(ctx context.Context, name string, ifVersion int64, actor string) error
	// ListPlans returns every plan ordered by name; none is an empty result,
	// not an error.
	ListPlans(ctx context.Context) ([]rules.Plan, error)
	// PlanHistory returns the audit entries of the plan with that name,
	// oldest first, also after it was deleted. Errors: rules.ErrNotFound
	// when there are none (the plan never existed).
	PlanHistory(ctx context.Context, name string) ([]rules.AuditEntry, error)

	// LoadAll returns every rule, disabled ones too, ordered by id, and every
	// plan ordered by name, as of one moment, with the rules version of that
	// moment (rules.Set): the authorizer's snapshot. Every successful write
	// above moves the version up, in its own transaction; a failed one
	// leaves it. It returns none of the rules errors; any error is the
	// store's.
	LoadAll(ctx context.Context) (rules.Set, error)

	// Apply makes every write of b, in order, in one transaction: all
	// land, with one new rules version, or none does. Each op checks its
	// IfVersion as the single writes do, and an update or delete checks
	// that the stored row belongs to b.Set: a rule or plan of another set,
	// or of none, is a *NotOwnedError (rules.ErrConflict). The rule
	// count is checked once, after the last op. It returns the stored
	// result of each op, in order (the zero Result for a delete).
	// Errors: a *BatchError naming the op that failed, wrapping what
	// the single write returns (rules.ErrStale, rules.ErrNotFound, a
	// *ScopeTakenError, a *rules.ValidationError, ...);
	// rules.ErrTooManyRules; a *rules.ValidationError on "set" or "ops"
	// for a malformed batch. A batch of no ops writes nothing, not even a
	// new rules version.
	Apply(ctx context.Context, b Batch, actor string) ([]Result, error)
}

// Single makes the single writes of a Store, each as one Op (for no set,
// IfVersion 0 accepting any version) made alone by the function it is, so
// that a write and the same op of a batch take one path. Implementations
// embed it; an error is wrapped with the write's name and target.
type Single func(ctx context.Context, op Op, actor string) (Result, error)

// CreateRule is Store.CreateRule.
func (w Single) CreateRule(ctx context.Context, r rules.Rule, actor string) (rules.Rule, error) {
	res, err := w(ctx, Op{Action: rules.ActionCreate, Rule: &r}, actor)
	if err != nil {
		return rules.Rule{}, fmt.Errorf("create rule: %w", err)
	}
	return *res.Rule, nil
}

// UpdateRule is Store.UpdateRule.
func (w Single) UpdateRule(ctx context.Context, r rules.Rule, ifVersion int64, actor string) (rules.Rule, error) {
	res, err := w(ctx, Op{Action: rules.ActionUpdate, Rule: &r, IfVersion: ifVersion}, actor)
	if err != nil {
		return rules.Rule{}, fmt.Errorf("update rule %q: %w", r.ID, err)
	}
	return *res.Rule, nil
}

// DeleteRule is Store.DeleteRule.
func (w Single) DeleteRule(ctx context.Context, id string, ifVersion int64, actor string) error {
	if _, err := w(ctx, Op{Action: rules.ActionDelete, Rule: &rules.Rule{ID: id}, IfVersion: ifVersion}, actor); err != nil {
		return fmt.Errorf("delete rule %q: %w", id, err)
	}
	return nil
}

// CreatePlan is Store.CreatePlan.
func (w Single) CreatePlan(ctx context.Context, p rules.Plan, actor string) (rules.Plan, error) {
	res, err := w(ctx, Op{Action: rules.ActionCreate, Plan: &p}, actor)
	if err != nil {
		return rules.Plan{}, fmt.Errorf("create plan: %w", err)
	}
	return *res.Plan, nil
}

// UpdatePlan is Store.UpdatePlan.
func (w Single) UpdatePlan(ctx context.Context, p rules.Plan, ifVersion int64, actor string) (rules.Plan, error) {
	res, err := w(ctx, Op{Action: rules.ActionUpdate, Plan: &p, IfVersion: ifVersion}, actor)
	if err != nil {
		return rules.Plan{}, fmt.Errorf("update plan %q: %w", p.Name, err)
	}
	return *res.Plan, nil
}

// DeletePlan is Store.DeletePlan.
func (w Single) DeletePlan(ctx context.Context, name string, ifVersion int64, actor string) error {
	if _, err := w(ctx, Op{Action: rules.ActionDelete, Plan: &rules.Plan{Name: name}, IfVersion: ifVersion}, actor); err != nil {
		return fmt.Errorf("delete plan %q: %w", name, err)
	}
	return nil
}

// Batch is a list of writes Store.Apply makes all or none of: what
// `sluice apply` sends to converge a set to a file.
type Batch struct {
	// Set is the set every op writes: each rule or plan written carries
	// it, and each one updated or deleted must already belong to it.
	// Required.
	Set string `json:"set"`
	// Ops are the writes, applied in order; at most MaxBatchOps.
	Ops []Op `json:"ops"`
}

// MaxBatchOps bounds a Batch: a set of DefaultMaxRules rules and as many
// plans can be replaced in one.
const MaxBatchOps = 2 * DefaultMaxRules

// Op is one write of a Batch.
type Op struct {
	// Action is rules.ActionCreate, rules.ActionUpdate or
	// rules.ActionDelete.
	Action string `json:"action"`
	// Rule is the rule to create or update (ID names it), or to delete
	// (only ID is read); nil for a plan op.
	Rule *rules.Rule `json:"rule,omitempty"`
	// Plan is the plan to create, update or delete (only Name is read);
	// nil for a rule op.
	Plan *rules.Plan `json:"plan,omitempty"`
	// IfVersion is the version an update or delete expects; required for
	// them (>= 1), so that a batch never overwrites a write it has not
	// seen. Ignored on create.
	IfVersion int64 `json:"if_version,omitempty"`
}

// MarshalJSON writes op as POST /batch reads it. A delete's rule or plan
// holds only what names it (id, name): a delete reads nothing else, and a
// zero plan's other fields ("period": "0s") are not valid input. A create
// or update's holds what its writer sets, without the server's fields it
// does not yet have (a create's id; version and times, which the server
// ignores): a saved plan shows no "0001-01-01" time nor empty id.
func (op Op) MarshalJSON() ([]byte, error) {
	out := struct {
		Action    string `json:"action"`
		Rule      any    `json:"rule,omitempty"`
		Plan      any    `json:"plan,omitempty"`
		IfVersion int64  `json:"if_version,omitempty"`
	}{Action: op.Action, IfVersion: op.IfVersion}
	switch {
	case op.Rule != nil && op.Action == rules.ActionDelete:
		out.Rule = map[string]string{"id": op.Rule.ID}
	case op.Rule != nil:
		out.Rule = ruleFields{ID: op.Rule.ID, Rule: op.Rule}
	}
	switch {
	case op.Plan != nil && op.Action == rules.ActionDelete:
		out.Plan = map[string]string{"name": op.Plan.Name}
	case op.Plan != nil:
		out.Plan = planFields{Plan: op.Plan}
	}
	return json.Marshal(out)
}

// ruleFields and planFields are a rule and a plan as their writer sets
// them: no empty id, and none of the server's version, created_at and
// updated_at, each hidden by a field of the same JSON name at a shallower
// depth (encoding/json writes the shallowest) that omitzero never writes.
type ruleFields struct {
	ID string `json:"id,omitempty"`
	*rules.Rule
	Version   struct{} `json:"version,omitzero"`
	CreatedAt struct{} `json:"created_at,omitzero"`
	UpdatedAt struct{} `json:"updated_at,omitzero"`
}

type planFields struct {
	*rules.Plan
	Version   struct{} `json:"version,omitzero"`
	CreatedAt struct{} `json:"created_at,omitzero"`
	UpdatedAt struct{} `json:"updated_at,omitzero"`
}

// Result is what one Op stored: the rule or the plan after the write,
// both nil after a delete.
type Result struct {
	Rule *rules.Rule `json:"rule,omitempty"`
	Plan *rules.Plan `json:"plan,omitempty"`
}

// BatchError is the failure of one op of a Batch; nothing of the batch
// was written.
type BatchError struct {
	// Index is the op's position in Batch.Ops, from 0.
	Index int
	// Op describes it, such as `update rule 5f0c…` or `create plan "gold"`.
	Op  string
	Err error
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("op %d (%s): %v", e.Index, e.Op, e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }

// Describe names op for a BatchError: its action and target.
func (op Op) Describe() string {
	switch {
	case op.Rule != nil && op.Rule.ID != "":
		return op.Action + " rule " + op.Rule.ID
	case op.Rule != nil:
		return fmt.Sprintf("%s rule api %q route %q", op.Action, op.Rule.API, op.Rule.Route)
	case op.Plan != nil:
		return fmt.Sprintf("%s plan %q", op.Action, op.Plan.Name)
	}
	return op.Action
}

// CheckBatch reports a malformed batch as a *rules.ValidationError: no
// set, too many ops, an op with no or two targets, an unknown action, or
// an update or delete without IfVersion. It does not validate the rules
// and plans themselves; the writes do.
func CheckBatch(b Batch) error {
	var fields []rules.FieldError
	if b.Set == "" {
		fields = append(fields, rules.FieldError{Field: "set", Reason: "is required: the set the batch converges"})
	} else if err := (rules.Plan{Name: b.Set, Limit: 1, Period: rules.MinPeriod}).Validate(); err != nil {
		fields = append(fields, rules.FieldError{Field: "set", Reason: "must start with a lower-case letter and hold only a-z, 0-9, '-' and '_', at most 64"})
	}
	if len(b.Ops) > MaxBatchOps {
		fields = append(fields, rules.FieldError{Field: "ops", Reason: fmt.Sprintf("at most %d ops per batch", MaxBatchOps)})
	}
	for i, op := range b.Ops {
		field := fmt.Sprintf("ops[%d]", i)
		switch {
		case (op.Rule == nil) == (op.Plan == nil):
			fields = append(fields, rules.FieldError{Field: field, Reason: "needs exactly one of rule and plan"})
		case op.Action != rules.ActionCreate && op.Action != rules.ActionUpdate && op.Action != rules.ActionDelete:
			fields = append(fields, rules.FieldError{Field: field + ".action", Reason: `must be "create", "update" or "delete"`})
		case op.Action != rules.ActionCreate && op.IfVersion < 1:
			fields = append(fields, rules.FieldError{Field: field + ".if_version", Reason: "is required for an update or delete: the version the change was planned against"})
		}
		if len(fields) >= 20 {
			break
		}
	}
	if fields != nil {
		return &rules.ValidationError{Fields: fields}
	}
	return nil
}

// NotOwnedError is the rules.ErrConflict of a batch op that would update
// or delete a rule or plan another set (or none) owns: an apply never
// touches what it does not own.
type NotOwnedError struct {
	// What names the rule or plan, such as `rule 5f0c…`.
	What string
	// Set is the row's set ("" for none); Want the batch's.
	Set, Want string
}

func (e *NotOwnedError) Error() string {
	owner := "no set"
	if e.Set != "" {
		owner = fmt.Sprintf("set %q", e.Set)
	}
	return fmt.Sprintf("%s belongs to %s, not to set %q: %v", e.What, owner, e.Want, rules.ErrConflict)
}

func (e *NotOwnedError) Unwrap() error { return rules.ErrConflict }

// CheckRow reports whether a write expecting version ifVersion, for set
// (a batch's; "" outside one), may change the stored rule or plan what
// (such as `rule 5f0c…`), which is at version and belongs to set have: a
// *rules.StaleError when ifVersion is not 0 and not version, else a
// *NotOwnedError when set is not "" and not have, else nil.
func CheckRow(what string, version, ifVersion int64, have, set string) error {
	if ifVersion != 0 && version != ifVersion {
		return &rules.StaleError{Want: ifVersion, Current: version}
	}
	if set != "" && set != have {
		return &NotOwnedError{What: what, Set: have, Want: set}
	}
	return nil
}

// ScopeTakenError is the rules.ErrConflict of a rule write whose scope (api,
// route, subject, kind, dimension) another rule holds. It names that rule,
// so that whoever is refused can look at it. It carries no subject: an
// exact subject is often an API key, and this error reaches logs.
type ScopeTakenError struct {
	// ID, API and Route are the existing rule's. ID is "" when the rule
	// that held the scope was deleted before it could be read.
	ID, API, Route string
	// Kind and Dimension are the scope's.
	Kind      rules.Kind
	Dimension string
	// Wildcard reports whether the scope's subject is "*".
	Wildcard bool
}

func (e *ScopeTakenError) Error() string {
	subject := "an exact subject"
	if e.Wildcard {
		subject = `subject "*"`
	}
	dim := ""
	if e.Dimension != "" {
		dim = fmt.Sprintf(", dimension %q", e.Dimension)
	}
	holder := "another rule"
	if e.ID != "" {
		holder = "rule " + e.ID
	}
	return fmt.Sprintf("%s already holds the %s scope api %q, route %q, %s%s: %v", holder, e.Kind, e.API, e.Route, subject, dim, rules.ErrConflict)
}

func (e *ScopeTakenError) Unwrap() error { return rules.ErrConflict }

// PlanInUseError is the rules.ErrConflict of DeletePlan while rules name
// the plan.
type PlanInUseError struct {
	Plan string
	// Count is how many rules name the plan.
	Count int
	// Rules are the ids of the first of them (at most MaxListed), ordered
	// by id.
	Rules []string
}

// MaxListed bounds PlanInUseError.Rules: a plan may have thousands of rules,
// and an error names a few and says how to list the rest.
const MaxListed = 5

func (e *PlanInUseError) Error() string {
	return fmt.Sprintf("plan %q is used by %d rule(s) (%s): %v", e.Plan, e.Count, strings.Join(e.Rules, ", "), rules.ErrConflict)
}

func (e *PlanInUseError) Unwrap() error { return rules.ErrConflict }
