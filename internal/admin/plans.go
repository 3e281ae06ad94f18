package admin

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
)

// ListPlansResponse is the body of GET /plans.
type ListPlansResponse struct {
	Plans []rules.Plan `json:"plans"`
}

func (s *Service) createPlan(ctx context.Context, c *call) (reply, error) {
	p, err := planFromBody(c.Body, "")
	if err != nil {
		return reply{}, err
	}
	created, err := s.store.CreatePlan(ctx, p, c.actor())
	if err != nil {
		return reply{}, err
	}
	s.publish(ctx, c.route)
	h := http.Header{"Location": {"/plans/" + url.PathEscape(created.Name)}}
	return reply{status: http.StatusCreated, header: h, version: created.Version, body: created}, nil
}

func (s *Service) getPlan(ctx context.Context, c *call) (reply, error) {
	p, err := s.store.GetPlan(ctx, c.param("name"))
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, version: p.Version, body: p}, nil
}

// planHistory answers the plan's audit entries, oldest first; those of a
// deleted plan remain readable.
func (s *Service) planHistory(ctx context.Context, c *call) (reply, error) {
	es, err := s.store.PlanHistory(ctx, c.param("name")) // ErrNotFound when there is none
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: HistoryResponse{Entries: es}}, nil
}

// updatePlan replaces a plan; every rule naming it takes the new numbers at
// the authorizers' next reload (the publish after the write triggers it).
func (s *Service) updatePlan(ctx context.Context, c *call) (reply, error) {
	name := c.param("name")
	version, err := ifMatch(c.Header, true)
	if err != nil {
		return reply{}, err
	}
	p, err := planFromBody(c.Body, name)
	if err != nil {
		return reply{}, err
	}
	if !hasKey(c.Body, "set") { // as for a rule: an older client keeps the set
		cur, err := s.store.GetPlan(ctx, name)
		if err != nil {
			return reply{}, err
		}
		p.Set = cur.Set
	}
	updated, err := s.store.UpdatePlan(ctx, p, version, c.actor())
	if err != nil {
		return reply{}, err
	}
	if updated.Version != version { // the same version: nothing changed, nothing to publish
		s.publish(ctx, c.route)
	}
	return reply{status: http.StatusOK, version: updated.Version, body: updated}, nil
}

func (s *Service) deletePlan(ctx context.Context, c *call) (reply, error) {
	version, err := ifMatch(c.Header, false)
	if err != nil {
		return reply{}, err
	}
	if err := s.store.DeletePlan(ctx, c.param("name"), version, c.actor()); err != nil {
		return reply{}, err
	}
	s.publish(ctx, c.route)
	return reply{status: http.StatusNoContent}, nil
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
