package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
)

// UsageRequest is the body of POST /usage: cost known only after the
// response (LLM tokens, bytes, rows), charged to the subject's buckets of
// the request's api and route.
type UsageRequest struct {
	// API is the API Gateway REST API id of the request.
	API string `json:"api"`
	// Route is the request's route, "METHOD /resource" as API Gateway
	// names it (the rules the authorizer charged for it), or "*" for the
	// API-wide rules only.
	Route string `json:"route"`
	// Subject is who made the request, as the authorizer saw it.
	Subject string `json:"subject"`
	// Cost is the tokens to charge, not 0, at most MaxUsageCost either
	// way; negative refunds.
	Cost int64 `json:"cost"`
	// Dimension names the dimension whose rules Subject is charged on
	// (rules.Rule.Dimension): absent, "" or "default" is the default one;
	// "tenant" charges a tenant's shared quota by the tenant's id.
	Dimension string `json:"dimension,omitempty"`
}

// MaxUsageCost bounds a usage report's cost, either way.
const MaxUsageCost = rules.MaxBurst

// UsageResponse is the answer to POST /usage.
type UsageResponse struct {
	Subject string `json:"subject"`
	API     string `json:"api"`
	Route   string `json:"route"`
	Cost    int64  `json:"cost"`
	// Duplicate is set when the Idempotency-Key was seen in the last 24 h:
	// nothing was charged, and Buckets are the states now.
	Duplicate bool `json:"duplicate"`
	// Buckets are the buckets charged, each after the report.
	Buckets []UsageBucket `json:"buckets"`
}

// UsageBucket is one bucket after a usage report.
type UsageBucket struct {
	Rule  string     `json:"rule"`
	Kind  rules.Kind `json:"kind"`
	Limit int64      `json:"limit"`
	// Remaining is the whole tokens left, negative in debt (at most one
	// burst, or a quota's limit, below zero): requests are denied until it
	// is back to their cost.
	Remaining int64 `json:"remaining"`
	// ResetMs is the time until the bucket is full again (a quota: until
	// its window ends), in milliseconds.
	ResetMs int64 `json:"reset_ms"`
}

// MaxUsageSubjectLen bounds a usage report's subject, in bytes: the
// authorizer's bound (identity.MaxSubjectLen).
const MaxUsageSubjectLen = rules.MaxSubjectLen

// usage charges (or refunds) a report's cost to the subject's buckets,
// with no admission decision: see limiter.Charge.
func (s *Service) usage(ctx context.Context, c *call) (reply, error) {
	var in UsageRequest
	problems, err := httpapi.DecodeBody(c.Body, &in, "api", "route", "subject", "cost")
	if err != nil {
		return reply{}, err
	}
	in.Dimension = rules.NormalizeDimension(in.Dimension)
	key := c.Header.Get("Idempotency-Key")
	if err := httpapi.WithValidation(problems, func() error { return validateUsage(&in, c.Header) }); err != nil {
		return reply{}, err
	}
	es, err := s.applicable(ctx, in.Subject, in.API, in.Route, in.Dimension)
	if err != nil {
		return reply{}, err
	}
	var bs []limiter.Bucket
	var charged []*rules.Effective
	for _, e := range es {
		if !e.Blocked() { // a blocked bucket has nothing to charge
			bs, charged = append(bs, limiter.BucketFor(e)), append(charged, e)
		}
	}
	out := UsageResponse{Subject: in.Subject, API: in.API, Route: in.Route, Cost: in.Cost, Buckets: []UsageBucket{}}
	if len(bs) == 0 {
		return reply{status: http.StatusOK, body: out}, nil
	}
	if len(bs) > limiter.MaxBuckets {
		return reply{}, httpapi.BadRequest(httpapi.FieldError("route", "applies to more than "+strconv.Itoa(limiter.MaxBuckets)+" rules: name one route"))
	}
	u, err := s.buckets.Charge(ctx, in.Subject, bs, in.Cost, in.Dimension+" "+in.API+" "+in.Route, key)
	if err != nil {
		return reply{}, fmt.Errorf("charge usage: %w", err)
	}
	out.Duplicate = u.Duplicate
	for i, st := range u.Buckets {
		e := charged[i]
		out.Buckets = append(out.Buckets, UsageBucket{Rule: e.ID, Kind: e.Kind, Limit: e.Limit, Remaining: st.Remaining, ResetMs: st.Reset.Milliseconds()})
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// validateUsage normalizes the report's subject, api and route as every
// entry does (rules.NormalizeTarget) and reports every problem of it, the
// Idempotency-Key header included, as a *rules.ValidationError.
func validateUsage(in *UsageRequest, h http.Header) error {
	t, err := rules.NormalizeTarget(rules.Target{Subject: in.Subject, API: in.API, Route: in.Route}, rules.PartSubject|rules.PartAPI|rules.PartRoute)
	in.Subject, in.API, in.Route = t.Subject, t.API, t.Route
	var fields []rules.FieldError
	if ve := (*rules.ValidationError)(nil); errors.As(err, &ve) {
		fields = ve.Fields
	}
	add := func(field, reason string) { fields = append(fields, rules.FieldError{Field: field, Reason: reason}) }
	if in.Dimension != "" && !rules.ValidDimension(in.Dimension) {
		add("dimension", "must be 1 to 32 lower-case letters, digits, '_' or '-', starting with a letter")
	}
	if in.Cost == 0 || in.Cost > MaxUsageCost || in.Cost < -MaxUsageCost {
		add("cost", "must be between -"+strconv.Itoa(MaxUsageCost)+" and "+strconv.Itoa(MaxUsageCost)+", not 0 (negative refunds)")
	}
	if vs, ok := h["Idempotency-Key"]; ok && (len(vs) != 1 || !limiter.ValidIdempotencyKey(vs[0])) {
		add("Idempotency-Key", "must be one header of 1-"+strconv.Itoa(limiter.MaxIdempotencyKeyLen)+" printable ASCII characters without spaces")
	}
	if fields == nil {
		return nil
	}
	return &rules.ValidationError{Fields: fields}
}
