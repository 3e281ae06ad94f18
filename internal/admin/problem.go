package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/internal/rules"
)

// ProblemTypeBase prefixes every problem type URI; the fragment names the
// section of docs/admin-api.md that explains it.
const ProblemTypeBase = "https://github.com/sluicehq/sluice/blob/main/docs/admin-api.md#"

// Problem is an RFC 9457 problem document, the body of every error response
// (Content-Type application/problem+json).
type Problem struct {
	// Type is a URI naming the kind of problem (ProblemTypeBase + a slug).
	Type string `json:"type"`
	// Title is the HTTP status text.
	Title string `json:"title"`
	// Status repeats the HTTP status code.
	Status int `json:"status"`
	// Detail says, for a person, what went wrong with this request.
	Detail string `json:"detail,omitempty"`
	// Errors lists field problems (400 only): the JSON field, query or path
	// parameter, and what is wrong with it.
	Errors []rules.FieldError `json:"errors,omitempty"`
}

// Error is an admin failure that knows its HTTP status. It keeps what the
// client may read (Detail, Fields) apart from what only the log may read
// (Err), as tailscale's tsweb.HTTPError does.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Detail is shown to the client.
	Detail string
	// Fields are shown to the client (400).
	Fields []rules.FieldError
	// Header is added to the response (Allow, Retry-After).
	Header http.Header
	// Err is the cause, logged and never shown; may be nil.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Detail, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

func fieldError(field, reason string) rules.FieldError {
	return rules.FieldError{Field: field, Reason: reason}
}

func badRequest(fields ...rules.FieldError) *Error {
	return &Error{Status: http.StatusBadRequest, Detail: "The request is invalid; see errors.", Fields: fields}
}

// classify maps any error to the Error the client gets. It is the one place
// where domain errors become HTTP statuses.
func classify(route string, err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var ve *rules.ValidationError
	if errors.As(err, &ve) {
		e := badRequest(ve.Fields...)
		e.Err = err
		return e
	}
	noun := "rule"
	if strings.Contains(route, "/plans") {
		noun = "plan"
	}
	switch {
	case errors.Is(err, rules.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Detail: "No such " + noun + ".", Err: err}
	case errors.Is(err, rules.ErrStale):
		return &Error{Status: http.StatusPreconditionFailed,
			Detail: "The " + noun + " has changed since the version in If-Match; GET it again and retry with its ETag.", Err: err}
	case errors.Is(err, rules.ErrConflict):
		return &Error{Status: http.StatusConflict, Detail: conflictDetail(route), Err: err}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.As(err, &ne) {
		return &Error{Status: http.StatusServiceUnavailable,
			Detail: "A backend is unavailable or slow; retry shortly.",
			Header: http.Header{"Retry-After": {"1"}}, Err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Detail: "An internal error occurred.", Err: err}
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

// problemSlugs name the section of docs/admin-api.md for each status.
var problemSlugs = map[int]string{
	http.StatusBadRequest:            "invalid-request",
	http.StatusNotFound:              "not-found",
	http.StatusMethodNotAllowed:      "method-not-allowed",
	http.StatusConflict:              "conflict",
	http.StatusPreconditionFailed:    "precondition-failed",
	http.StatusRequestEntityTooLarge: "body-too-large",
	http.StatusUnsupportedMediaType:  "unsupported-media-type",
	http.StatusPreconditionRequired:  "precondition-required",
	http.StatusServiceUnavailable:    "unavailable",
}

// Problem answers req with the problem response for err, logged like the
// Service's own failures: adapters use it for what goes wrong before Handle
// (an unreadable body, bad base64). Pass an *Error to choose the status and
// the client's detail; any other error is a 500 with a generic detail.
func (s *Service) Problem(ctx context.Context, req Request, err error) Response {
	return s.problem(ctx, &call{Request: &req}, err)
}

// MaxBody returns the largest request body the Service accepts, in bytes.
func (s *Service) MaxBody() int { return s.maxBody }

// problem turns err into a problem response and logs it: server failures
// at error level with the cause, client errors at info.
func (s *Service) problem(ctx context.Context, c *call, err error) Response {
	e := classify(c.route, err)
	attrs := []slog.Attr{
		slog.String("route", c.route),
		slog.String("method", c.Method),
		slog.Int("status", e.Status),
		slog.String("requestId", c.RequestID),
		slog.String("actor", c.actor()),
		slog.String("detail", e.Detail),
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	level := slog.LevelInfo
	if e.Status >= 500 {
		level = slog.LevelError
	}
	s.log.LogAttrs(ctx, level, "admin request failed", attrs...)

	slug, ok := problemSlugs[e.Status]
	if !ok {
		slug = "internal-error"
	}
	p := Problem{Type: ProblemTypeBase + slug, Title: http.StatusText(e.Status), Status: e.Status,
		Detail: e.Detail, Errors: e.Fields}
	h := http.Header{}
	for k, v := range e.Header {
		h[k] = v
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	b, _ := json.Marshal(p) // strings, ints and FieldErrors always encode
	return Response{Status: e.Status, Header: h, Body: append(b, '\n')}
}
