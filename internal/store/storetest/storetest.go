// Package storetest is the contract suite every rules store passes: the
// PostgreSQL store in production and the memory store behind `make run`.
// Both stores run the same Run, so the admin API behaves the same on a
// laptop as on AWS.
package storetest

import (
	"context"

	"github.com/sluicehq/sluice/internal/rules"
)

// Store is the method set the admin API and the authorizer use. Every method
// takes a context; errors wrap rules.ErrNotFound, rules.ErrConflict,
// rules.ErrStale or are a *rules.ValidationError.
type Store interface {
	// CreateRule stores r with a new UUID, Version 1 and timestamps, and
	// records an audit row by actor. ErrConflict when another rule holds the
	// scope (api, route, subject); *ValidationError{plan} for an unknown plan.
	CreateRule(ctx context.Context, r rules.Rule, actor string) (rules.Rule, error)
	// GetRule returns the rule with that id; ErrNotFound, also for an id
	// that is not a UUID.
	GetRule(ctx context.Context, id string) (rules.Rule, error)
	// UpdateRule replaces the rule r.ID when its version is ifVersion (0:
	// any version) and bumps Version. ErrNotFound, ErrStale, ErrConflict,
	// *ValidationError{plan}.
	UpdateRule(ctx context.Context, r rules.Rule, ifVersion int64, actor string) (rules.Rule, error)
	// DeleteRule deletes the rule when its version is ifVersion (0: any).
	// ErrNotFound, ErrStale.
	DeleteRule(ctx context.Context, id string, ifVersion int64, actor string) error
	// ListRules returns one page of the rules matching f, ordered by id.
	// *ValidationError{limit} or {cursor} for a bad page size or cursor.
	ListRules(ctx context.Context, f rules.Filter) (rules.Page, error)
	// RuleHistory returns the audit entries of a rule, oldest first, also
	// after it was deleted. ErrNotFound when there are none.
	RuleHistory(ctx context.Context, id string) ([]rules.AuditEntry, error)

	// CreatePlan stores p with Version 1. ErrConflict when the name exists.
	CreatePlan(ctx context.Context, p rules.Plan, actor string) (rules.Plan, error)
	// GetPlan returns the plan with that name; ErrNotFound.
	GetPlan(ctx context.Context, name string) (rules.Plan, error)
	// UpdatePlan replaces plan p.Name when its version is ifVersion (0:
	// any). ErrNotFound, ErrStale.
	UpdatePlan(ctx context.Context, p rules.Plan, ifVersion int64, actor string) (rules.Plan, error)
	// DeletePlan deletes the plan when its version is ifVersion (0: any).
	// ErrNotFound, ErrStale, ErrConflict while a rule names it.
	DeletePlan(ctx context.Context, name string, ifVersion int64, actor string) error
	// ListPlans returns every plan ordered by name.
	ListPlans(ctx context.Context) ([]rules.Plan, error)
	// PlanHistory returns the audit entries of a plan, oldest first.
	// ErrNotFound when there are none.
	PlanHistory(ctx context.Context, name string) ([]rules.AuditEntry, error)

	// LoadAll returns every rule (disabled ones too) ordered by id and every
	// plan ordered by name: the authorizer's snapshot source.
	LoadAll(ctx context.Context) ([]rules.Rule, []rules.Plan, error)
}
