// Package httpapi holds what Sluice's JSON HTTP APIs, the admin API
// (internal/admin) and the check API (internal/edge/apigw), share:
// the RFC 9457 problem document every error answers with, the Error type
// that keeps what the client reads apart from what only the log reads, the
// one function that turns an error into a problem response, and a strict
// JSON body decoder that reports every field problem at once.
//
// Which domain errors become which status is not decided here: each API
// maps its own errors to an *Error at its edge (admin's classify), and
// anything that is not an *Error is a 500.
package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/internal/rules"
)

// DocsBase is where Sluice's documentation lives; problem type URIs are
// under it.
const DocsBase = "https://github.com/sluicehq/sluice/blob/main/docs/"

// TypeBase prefixes the admin API's problem type URIs; the fragment (a slug
// from the status, such as "invalid-request") names the section of
// docs/admin-api.md that explains it. Another API passes its own base to
// Render.
const TypeBase = DocsBase + "admin-api.md#"

// Problem is an RFC 9457 problem document, the body of every error response
// (Content-Type application/problem+json).
type Problem struct {
	// Type is a URI naming the kind of problem: a type base (TypeBase for
	// the admin API) and the slug of the status, or "about:blank" for a
	// status without one.
	Type string `json:"type"`
	// Title is the HTTP status text.
	Title string `json:"title"`
	// Status repeats the HTTP status code.
	Status int `json:"status"`
	// Detail says, for a person, what went wrong with this request.
	Detail string `json:"detail,omitempty"`
	// Errors lists field problems (400 only): the JSON field, query or path
	// parameter or header, and what is wrong with it.
	Errors []rules.FieldError `json:"errors,omitempty"`
}

// Error is a failure that knows its HTTP status. It keeps what the client
// may read (Detail, Fields) apart from what only the log may read (Err), as
// tailscale's tsweb.HTTPError does.
type Error struct {
	// Status is the HTTP status code, 400 to 599.
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

// FieldError returns the field problem "field: reason", for BadRequest.
func FieldError(field, reason string) rules.FieldError {
	return rules.FieldError{Field: field, Reason: reason}
}

// BadRequest returns a 400 listing the field problems.
func BadRequest(fields ...rules.FieldError) *Error {
	return &Error{Status: http.StatusBadRequest, Detail: "The request is invalid; see errors.", Fields: fields}
}

// Internal returns the 500 for a server failure: the client learns nothing
// of err, which goes to the log.
func Internal(err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Detail: "An internal error occurred.", Err: err}
}

// slugs name, for each status, the section of an API's documentation that
// explains it (the fragment of the problem type URI).
var slugs = map[int]string{
	http.StatusBadRequest:            "invalid-request",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not-found",
	http.StatusMethodNotAllowed:      "method-not-allowed",
	http.StatusConflict:              "conflict",
	http.StatusPreconditionFailed:    "precondition-failed",
	http.StatusRequestEntityTooLarge: "body-too-large",
	http.StatusUnsupportedMediaType:  "unsupported-media-type",
	http.StatusPreconditionRequired:  "precondition-required",
	http.StatusInternalServerError:   "internal-error",
	http.StatusServiceUnavailable:    "unavailable",
}

// Render returns the problem response for err: its status, its headers and
// its body, a Problem document whose type is typeBase followed by the
// status's slug. err is (or wraps) an *Error, which chooses the status, the
// detail, the field problems and extra headers; any other error, nil
// included, and an *Error whose Status is not 400 to 599 render as
// Internal(err). A status without a slug gets the type "about:blank". The
// headers are the Error's plus Content-Type application/problem+json,
// Cache-Control no-store and X-Content-Type-Options nosniff; the body ends
// with a newline.
//
// Render neither logs nor reads Err: logging is the caller's, which knows
// the request.
func Render(typeBase string, err error) (status int, header http.Header, body []byte) {
	var e *Error
	if !errors.As(err, &e) || e.Status < 400 || e.Status > 599 {
		e = Internal(err)
	}
	typ := "about:blank"
	if slug, ok := slugs[e.Status]; ok {
		typ = typeBase + slug
	}
	header = make(http.Header, len(e.Header)+3)
	for k, v := range e.Header {
		header[k] = append([]string(nil), v...)
	}
	header.Set("Content-Type", "application/problem+json")
	header.Set("Cache-Control", "no-store")
	header.Set("X-Content-Type-Options", "nosniff")
	b, _ := json.Marshal(Problem{Type: typ, Title: http.StatusText(e.Status), Status: e.Status,
		Detail: e.Detail, Errors: e.Fields}) // strings, ints and FieldErrors always encode
	return e.Status, header, append(b, '\n')
}
