package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/internal/bucket"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
)

// SubjectLimitsResponse is the body of GET /subjects/{subject}/limits.
type SubjectLimitsResponse struct {
	Subject string `json:"subject"`
	// API and Route repeat the query ("" when not given: every api, every
	// route).
	API   string `json:"api,omitempty"`
	Route string `json:"route,omitempty"`
	// Limits are the rules that would charge the subject's requests, each
	// with its bucket's live state.
	Limits []BucketLimit `json:"limits"`
}

// BucketLimit is one rule as applied to a subject, and its bucket now.
type BucketLimit struct {
	// Rule is the rule's id, or "default" for the configured default.
	Rule        string            `json:"rule"`
	API         string            `json:"api"`
	Route       string            `json:"route"`
	Subject     string            `json:"subject"`
	Plan        string            `json:"plan,omitempty"`
	Limit       int64             `json:"limit"`
	Period      rules.Period      `json:"period"`
	Burst       int64             `json:"burst"`
	Cost        int64             `json:"cost"`
	FailureMode rules.FailureMode `json:"failure_mode"`
	Mode        rules.Mode        `json:"mode"`
	// Remaining is the number of whole tokens in the bucket now (Burst for
	// a bucket never used or refilled; 0 for a blocked rule).
	Remaining int64 `json:"remaining"`
	// ResetMs is the time until the bucket is full again, in milliseconds.
	ResetMs int64 `json:"reset_ms"`
}

// subjectLimits peeks (charges nothing) at the buckets of the rules that
// apply to a subject.
func (s *Service) subjectLimits(ctx context.Context, c *call) (reply, error) {
	subject := c.params["subject"]
	api, route, err := subjectQuery(c, true)
	if err != nil {
		return reply{}, err
	}
	es, err := s.applicable(ctx, subject, api, route)
	if err != nil {
		return reply{}, err
	}
	out := SubjectLimitsResponse{Subject: subject, API: api, Route: route, Limits: make([]BucketLimit, len(es))}
	var peek []limiter.Bucket
	var at []int // index in out.Limits of each peeked bucket
	for i, e := range es {
		out.Limits[i] = BucketLimit{
			Rule: e.ID, API: e.API, Route: e.Route, Subject: e.Subject, Plan: e.Plan,
			Limit: e.Limit, Period: rules.Period(e.Period), Burst: e.Burst, Cost: e.Cost,
			FailureMode: e.FailureMode, Mode: e.Mode,
		}
		if !e.Blocked() { // a blocked bucket has nothing in Redis
			peek, at = append(peek, bucket.For(e)), append(at, i)
		}
	}
	for start := 0; start < len(peek); start += limiter.MaxBuckets {
		end := min(start+limiter.MaxBuckets, len(peek))
		states, err := s.buckets.Peek(ctx, subject, peek[start:end])
		if err != nil {
			return reply{}, fmt.Errorf("peek buckets: %w", err)
		}
		for j, st := range states {
			l := &out.Limits[at[start+j]]
			l.Remaining, l.ResetMs = st.Remaining, st.Reset.Milliseconds()
		}
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// resetSubject deletes the subject's buckets (an admin unblock): they start
// full again. It is idempotent: 204 also when no rule applies.
func (s *Service) resetSubject(ctx context.Context, c *call) (reply, error) {
	subject := c.params["subject"]
	api, _, err := subjectQuery(c, false)
	if err != nil {
		return reply{}, err
	}
	es, err := s.applicable(ctx, subject, api, "")
	if err != nil {
		return reply{}, err
	}
	bs := make([]limiter.Bucket, 0, len(es))
	for _, e := range es {
		if !e.Blocked() {
			bs = append(bs, bucket.For(e))
		}
	}
	for start := 0; start < len(bs); start += limiter.MaxBuckets {
		end := min(start+limiter.MaxBuckets, len(bs))
		if err := s.buckets.Reset(ctx, subject, bs[start:end]); err != nil {
			return reply{}, fmt.Errorf("reset buckets: %w", err)
		}
	}
	s.log.InfoContext(ctx, "subject buckets reset", slog.String("subjectHash", limiter.SubjectHash(subject)),
		slog.String("api", api), slog.Int("buckets", len(bs)), slog.String("actor", c.actor()),
		slog.String("requestId", c.RequestID))
	return reply{status: http.StatusNoContent}, nil
}

// subjectQuery reads ?api= and, when allowed, ?route=.
func subjectQuery(c *call, withRoute bool) (api, route string, err error) {
	names := []string{"api"}
	if withRoute {
		names = append(names, "route")
	}
	if err := onlyQuery(c.Query, names...); err != nil {
		return "", "", err
	}
	api, route = strings.TrimSpace(c.Query.Get("api")), strings.TrimSpace(c.Query.Get("route"))
	if route != "" && route != rules.Wildcard {
		method, path, ok := strings.Cut(route, " ")
		if !ok || method == "" || !strings.HasPrefix(strings.TrimSpace(path), "/") {
			return "", "", httpapi.BadRequest(httpapi.FieldError("route", `must be "*" or "METHOD /resource", such as "GET /pets/{id}"`))
		}
	}
	if s := c.params["subject"]; s != rules.Wildcard && strings.TrimSpace(s) != s {
		return "", "", httpapi.BadRequest(httpapi.FieldError("subject", "must not start or end with white space"))
	}
	return api, route, nil
}

// applicable returns the rules (and the default) that charge subject's
// requests on api and route, from a fresh snapshot of the store.
func (s *Service) applicable(ctx context.Context, subject, api, route string) ([]*rules.Effective, error) {
	if s.buckets == nil {
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Detail: "Bucket inspection is not configured.",
			Err: fmt.Errorf("admin service built without a limiter")}
	}
	set, err := s.store.LoadAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("load rules: %w", err)
	}
	snap := rules.NewSnapshot(set.Rules, set.Plans, rules.SnapshotOptions{Default: s.def})
	return snap.ForSubject(subject, api, route), nil
}
