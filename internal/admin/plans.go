package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
)

// ListPlansResponse is the body of GET /plans.
type ListPlansResponse struct {
	Plans []rules.Plan `json:"plans"`
}

// planRoutes serves POST /plans and the routes of /plans/{name}.
var planRoutes = entity[rules.Plan]{
	param: "name", location: "/plans/", fromBody: planFromBody,
	fields: func(p *rules.Plan) (string, int64, *string) { return p.Name, p.Version, &p.Set },
	create: store.Store.CreatePlan, get: store.Store.GetPlan, update: store.Store.UpdatePlan,
	remove: store.Store.DeletePlan, history: store.Store.PlanHistory,
}

func (s *Service) listPlans(ctx context.Context, c *call) (reply, error) {
	if err := onlyQuery(c.Query); err != nil {
		return reply{}, err
	}
	ps, err := s.store.ListPlans(ctx)
	if err != nil {
		return reply{}, err
	}
	if ps == nil {
		ps = []rules.Plan{}
	}
	return reply{status: http.StatusOK, body: ListPlansResponse{Plans: ps}}, nil
}

// planFromBody decodes and validates a plan. On PUT the name comes from the
// path; a name in the body must then be the same. The read-only fields are
// accepted and ignored, as for rules.
func planFromBody(body []byte, pathName string) (rules.Plan, error) {
	var p rules.Plan
	problems, err := httpapi.DecodeBody(body, &p, "limit", "period")
	if err != nil {
		return rules.Plan{}, err
	}
	p.Normalize()
	if pathName != "" {
		if p.Name != "" && p.Name != pathName {
			problems = append(problems, httpapi.FieldError("name", "must be the name in the path, or left out (a plan cannot be renamed)"))
		}
		p.Name = pathName
	}
	p.Version, p.CreatedAt, p.UpdatedAt = 0, time.Time{}, time.Time{}
	if err := httpapi.WithValidation(problems, p.Validate); err != nil {
		return rules.Plan{}, err
	}
	return p, nil
}
