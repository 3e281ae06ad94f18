// Package store is a placeholder replaced by the store contract branch.
package store

import (
	"context"

	"github.com/sluicehq/sluice/internal/rules"
)

// Store is the rules store contract.
type Store interface {
	CreateRule(ctx context.Context, r rules.Rule, actor string) (rules.Rule, error)
	GetRule(ctx context.Context, id string) (rules.Rule, error)
	UpdateRule(ctx context.Context, r rules.Rule, ifVersion int64, actor string) (rules.Rule, error)
	DeleteRule(ctx context.Context, id string, ifVersion int64, actor string) error
	ListRules(ctx context.Context, f rules.Filter) (rules.Page, error)
	RuleHistory(ctx context.Context, id string) ([]rules.AuditEntry, error)
	CreatePlan(ctx context.Context, p rules.Plan, actor string) (rules.Plan, error)
	GetPlan(ctx context.Context, name string) (rules.Plan, error)
	UpdatePlan(ctx context.Context, p rules.Plan, ifVersion int64, actor string) (rules.Plan, error)
	DeletePlan(ctx context.Context, name string, ifVersion int64, actor string) error
	ListPlans(ctx context.Context) ([]rules.Plan, error)
	PlanHistory(ctx context.Context, name string) ([]rules.AuditEntry, error)
	LoadAll(ctx context.Context) ([]rules.Rule, []rules.Plan, error)
}
