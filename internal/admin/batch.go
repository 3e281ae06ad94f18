package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
)

// MaxBatchBody is the largest body POST /batch accepts: 5 MiB, under
// Lambda's 6 MB payload limit, room for a set of 10,000 rules.
const MaxBatchBody = 5 << 20

// BatchResponse is the body of a successful POST /batch.
type BatchResponse struct {
	// Results are the stored rule or plan of each op, in order; both nil
	// for a delete.
	Results []store.Result `json:"results"`
}

// batch applies a store.Batch all or nothing: the body is decoded as
// strictly as every admin body (httpapi.DecodeBody, at every depth), and
// every op's rule or plan is validated as POST /rules and POST /plans
// validate them (checkBatch; all problems at once, named
// "ops[i].rule.limit"), then store.Apply writes them in one transaction, checking each update's and delete's if_version and set.
// A stale version is 412, a rule outside the set or a taken scope 409;
// either way nothing is written, and the detail names the op.
func (s *Service) batch(ctx context.Context, c *call) (reply, error) {
	var b store.Batch
	problems, err := httpapi.DecodeBody(c.Body, &b)
	if err != nil {
		return reply{}, err
	}
	if err := httpapi.WithValidation(problems, func() error { return checkBatch(b) }); err != nil {
		return reply{}, err
	}
	res, err := s.store.Apply(ctx, b, c.actor())
	if err != nil {
		return reply{}, err
	}
	if len(b.Ops) > 0 {
		s.publish(ctx, c.route)
	}
	return reply{status: http.StatusOK, body: BatchResponse{Results: res}}, nil
}

// checkBatch validates b's shape (store.CheckBatch) and each rule or plan
// it creates or updates, as a *rules.ValidationError naming each problem
// by its path ("ops[1].rule.limit"), at most 100.
func checkBatch(b store.Batch) error {
	var problems []rules.FieldError
	var ve *rules.ValidationError
	if err := store.CheckBatch(b); errors.As(err, &ve) {
		problems = ve.Fields
	} else if err != nil {
		return err
	}
	for i, op := range b.Ops {
		if op.Action == rules.ActionDelete || (op.Rule == nil) == (op.Plan == nil) || len(problems) > 100 {
			continue
		}
		var err error
		prefix := fmt.Sprintf("ops[%d].", i)
		if op.Rule != nil {
			r := *op.Rule
			r.Normalize()
			err = r.Validate()
			prefix += "rule."
		} else {
			p := *op.Plan
			p.Normalize()
			err = p.Validate()
			prefix += "plan."
		}
		if errors.As(err, &ve) {
			for _, f := range ve.Fields {
				problems = append(problems, rules.FieldError{Field: prefix + f.Field, Reason: f.Reason})
			}
		}
	}
	if problems != nil {
		return &rules.ValidationError{Fields: problems}
	}
	return nil
}

// batchError is the problem of a failed op of a batch: the single write's
// problem, its detail prefixed by the op and followed by what to do.
func batchError(be *store.BatchError) *httpapi.Error {
	route := RouteUpdateRule
	switch {
	case strings.HasPrefix(be.Op, rules.ActionCreate+" plan "):
		route = RouteCreatePlan // a conflict is the name taken
	case strings.Contains(be.Op, " plan "):
		route = RouteUpdatePlan
	}
	e := *classify(route, be.Err)
	var no *store.NotOwnedError
	switch {
	case errors.As(be.Err, &no):
		e = httpapi.Error{Status: http.StatusConflict,
			Detail: capitalize(no.Error()) + "; an apply changes only what its set owns."}
	case errors.Is(be.Err, rules.ErrStale):
		e.Detail = "It was changed by someone else after the plan was made; run the diff again to see the change, then apply."
	}
	e.Detail = fmt.Sprintf("Nothing was applied: op %d (%s) failed. %s", be.Index, be.Op, e.Detail)
	e.Err = be
	return &e
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
