package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
)

// classify maps any error to the Error the client gets. It is the one place
// where domain errors become HTTP statuses.
func classify(route string, err error) *httpapi.Error {
	var ae *httpapi.Error
	if errors.As(err, &ae) {
		return ae
	}
	var be *store.BatchError
	if errors.As(err, &be) {
		return batchError(be)
	}
	var ve *rules.ValidationError
	if errors.As(err, &ve) {
		e := httpapi.BadRequest(ve.Fields...)
		e.Err = err
		return e
	}
	var pc *rules.PlanConflictError
	if errors.As(err, &pc) {
		return &httpapi.Error{Status: http.StatusConflict, Detail: planConflictDetail(pc), Err: err}
	}
	var st *store.ScopeTakenError
	if errors.As(err, &st) {
		return &httpapi.Error{Status: http.StatusConflict, Detail: scopeTakenDetail(st), Err: err}
	}
	var pu *store.PlanInUseError
	if errors.As(err, &pu) {
		return &httpapi.Error{Status: http.StatusConflict, Detail: planInUseDetail(pu), Err: err}
	}
	var stale *rules.StaleError
	noun := "rule"
	if strings.Contains(route, "/plans") {
		noun = "plan"
	}
	switch {
	case errors.Is(err, rules.ErrNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, Detail: "No such " + noun + ".", Err: err}
	case errors.As(err, &stale) && stale.Want > stale.Current:
		return &httpapi.Error{Status: http.StatusPreconditionFailed,
			Detail: fmt.Sprintf("The %s is at version %d; version %d in If-Match never existed, so nobody changed it since: GET it and use its ETag (or leave the version out).", noun, stale.Current, stale.Want), Err: err}
	case errors.Is(err, rules.ErrStale):
		return &httpapi.Error{Status: http.StatusPreconditionFailed,
			Detail: "The " + noun + " has changed since the version in If-Match; GET it again and retry with its ETag.", Err: err}
	case errors.Is(err, rules.ErrConflict):
		return &httpapi.Error{Status: http.StatusConflict, Detail: conflictDetail(route), Err: err}
	case errors.Is(err, rules.ErrTooManyRules):
		// 409, not 400 or 422: the rule is valid, the store is full. The
		// same request succeeds once rules are deleted (or MAX_RULES is
		// raised); nothing in it is for the client to fix.
		return &httpapi.Error{Status: http.StatusConflict,
			Detail: "The store already holds the most rules it may (MAX_RULES, 10,000 by default): every authorizer holds every rule. Delete rules no longer needed, or raise MAX_RULES, then retry.", Err: err}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.As(err, &ne) ||
		errors.Is(err, io.ErrUnexpectedEOF) || unavailableSQL(err) || errors.Is(err, limiter.ErrLedger) {
		return &httpapi.Error{Status: http.StatusServiceUnavailable,
			Detail: "A backend is unavailable or slow; retry shortly.",
			Header: http.Header{"Retry-After": {"1"}}, Err: err}
	}
	return httpapi.Internal(err)
}

// planConflictDetail tells the client which rules a plan update would
// break and why (at most maxListed of them), and what to do.
func planConflictDetail(pc *rules.PlanConflictError) string {
	const maxListed = 5
	var b strings.Builder
	b.WriteString("The new numbers would break ")
	b.WriteString(strconv.Itoa(len(pc.Rules)))
	b.WriteString(" rule(s) that name this plan: ")
	for i, r := range pc.Rules {
		if i == maxListed {
			b.WriteString("; and " + strconv.Itoa(len(pc.Rules)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString("rule " + r.ID + ", " + r.Reason)
	}
	// What is in the way decides the way out: a kind no rule can change
	// to in place, or numbers their cost does not fit.
	kind := false
	for _, r := range pc.Rules {
		kind = kind || strings.Contains(r.Reason, "must be the kind")
	}
	if kind {
		b.WriteString(". A plan's rules have its kind, and a rule's kind cannot follow a plan's change: move those rules to another plan of the new kind (or delete them) first, or create a new plan of that kind.")
	} else {
		b.WriteString(". Lower those rules' cost or move them to another plan first.")
	}
	return b.String()
}

// scopeTakenDetail names the rule in the way of a create or update: its
// id, api and route (never the subject, which may be an API key).
func scopeTakenDetail(st *store.ScopeTakenError) string {
	scope := fmt.Sprintf("api %q, route %q", st.API, st.Route)
	if st.Wildcard {
		scope += `, subject "*"`
	} else {
		scope += ", this subject"
	}
	if st.Dimension != "" {
		scope += fmt.Sprintf(", dimension %q", st.Dimension)
	}
	if st.Kind == rules.Quota {
		scope += ", kind quota"
	}
	if st.ID == "" {
		return "Another rule holds this scope (" + scope + "); list the rules of this api and route to find it."
	}
	return "Rule " + st.ID + " already holds this scope (" + scope + "): change that rule (GET /rules/" + st.ID + "), or give this one another scope."
}

// planInUseDetail names the rules that keep a plan from being deleted
// (the first few, and how many), and how to list them all.
func planInUseDetail(pu *store.PlanInUseError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan %q is used by %d rule(s)", pu.Plan, pu.Count)
	if len(pu.Rules) > 0 {
		b.WriteString(": " + strings.Join(pu.Rules, ", "))
		if more := pu.Count - len(pu.Rules); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
	}
	fmt.Fprintf(&b, ". Move them to another plan or delete them first; list them with GET /rules?plan=%s (sluice rules ls --plan %s).",
		url.QueryEscape(pu.Plan), pu.Plan)
	return b.String()
}

// unavailableSQL reports a database that cannot serve for now rather than
// a bad request or a bug: PostgreSQL shutting down (a stop or a failover
// terminates every session with 57P01), starting up or in recovery, out of
// connections, read-only (a writer demoted by a failover), or a broken
// connection (class 08). The driver's errors carry the SQLSTATE through a
// SQLState method, read here without importing the driver.
func unavailableSQL(err error) bool {
	var se interface{ SQLState() string }
	if !errors.As(err, &se) {
		return false
	}
	switch code := se.SQLState(); code {
	case "57P01", "57P02", "57P03", "53300", "25006":
		return true
	default:
		return strings.HasPrefix(code, "08")
	}
}

func conflictDetail(route string) string {
	switch route {
	case RouteCreatePlan:
		return "A plan with this name already exists."
	case RouteDeletePlan:
		return "The plan is still used by at least one rule; move those rules to another plan first."
	}
	return "Another rule already holds this scope (api, route, subject)."
}

// problem turns err into a problem response (httpapi.Render) and logs it:
// server failures at error level with the cause, client errors at info.
func (s *Service) problem(ctx context.Context, w http.ResponseWriter, c *call, err error) {
	e := classify(c.route, err)
	status, h, body := httpapi.Render(httpapi.TypeBase, e)
	attrs := []slog.Attr{
		slog.String("route", c.route),
		slog.String("method", c.Method),
		slog.Int("status", status),
		slog.String("requestId", c.RequestID),
		slog.String("actor", c.actor()),
		slog.String("detail", e.Detail),
	}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("error", e.Err))
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	s.o.Logger.LogAttrs(ctx, level, "admin request failed", attrs...)
	writeProblem(w, status, h, body)
}
