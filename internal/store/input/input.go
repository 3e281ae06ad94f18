// Package input checks what callers hand a rules store, the same way in
// every implementation (internal/store/postgres, internal/store/memory):
// rule ids, text PostgreSQL can hold, and the page size and cursor of
// ListRules. Sharing it keeps the stores' answers to bad input identical,
// which the contract suite in internal/store/storetest relies on.
//
// Problems are *rules.ValidationError, so the admin API answers 400.
package input

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/internal/rules"
)

// Page sizes of ListRules (rules.Filter.Limit).
const (
	DefaultPageSize = 100  // when Filter.Limit is 0
	MaxPageSize     = 1000 // larger is a ValidationError on "limit"
)

// cursorPrefix versions the cursor format.
const cursorPrefix = "r1:"

// ID returns id in the canonical UUID form and whether it is a UUID at all.
// A store answers rules.ErrNotFound for a non-UUID id, never a server error.
func ID(id string) (string, bool) {
	u, err := uuid.Parse(id)
	if err != nil {
		return id, false
	}
	return u.String(), true
}

// Cursor returns the opaque cursor (rules.Page.NextCursor) that continues a
// list after the rule id.
func Cursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + id))
}

// Page validates f's page size and cursor and returns the size and the id
// to continue after ("" for the first page). Both problems are reported at
// once.
func Page(f rules.Filter) (size int, after string, err error) {
	var fields []rules.FieldError
	size = f.Limit
	switch {
	case size == 0:
		size = DefaultPageSize
	case size < 1 || size > MaxPageSize:
		fields = append(fields, rules.FieldError{Field: "limit", Reason: fmt.Sprintf("must be between 1 and %d", MaxPageSize)})
	}
	if f.Cursor != "" {
		b, decErr := base64.RawURLEncoding.DecodeString(f.Cursor)
		id, hasPrefix := strings.CutPrefix(string(b), cursorPrefix)
		u, parseErr := uuid.Parse(id)
		if decErr != nil || !hasPrefix || parseErr != nil || u.String() != id {
			fields = append(fields, rules.FieldError{Field: "cursor", Reason: "malformed cursor"})
		}
		after = id
	}
	if fields != nil {
		return 0, "", &rules.ValidationError{Fields: fields}
	}
	return size, after, nil
}

// Storable reports whether PostgreSQL can hold s as text: valid UTF-8
// without NUL bytes. Anything else would fail a query with a server error
// rather than a client one.
func Storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// Text checks field/value pairs with Storable and names every field that
// fails; nil when all pass.
func Text(pairs ...string) error {
	var fields []rules.FieldError
	for i := 0; i+1 < len(pairs); i += 2 {
		if !Storable(pairs[i+1]) {
			fields = append(fields, rules.FieldError{Field: pairs[i], Reason: "must be valid UTF-8 without NUL bytes"})
		}
	}
	if fields != nil {
		return &rules.ValidationError{Fields: fields}
	}
	return nil
}

// RuleText is Text over a rule's text fields.
func RuleText(r rules.Rule) error {
	return Text("api", r.API, "route", r.Route, "subject", r.Subject, "plan", r.Plan, "description", r.Description)
}

// PlanText is Text over a plan's text fields.
func PlanText(p rules.Plan) error {
	return Text("name", p.Name, "description", p.Description)
}

// FilterText is Text over a list filter's fields.
func FilterText(f rules.Filter) error {
	return Text("api", f.API, "subject", f.Subject, "route", f.Route, "plan", f.Plan)
}

// FieldError is a *rules.ValidationError with one field.
func FieldError(field, reason string) error {
	return &rules.ValidationError{Fields: []rules.FieldError{{Field: field, Reason: reason}}}
}

// SubjectRef names a rule's subject in an error message without quoting
// it: an exact subject is often an API key, and a conflict error reaches
// logs. The wildcard is not a secret.
func SubjectRef(subject string) string {
	if subject == "*" {
		return `subject "*"`
	}
	return fmt.Sprintf("this exact subject (%d bytes)", len(subject))
}

// DimensionRef is ", dimension <name>" for a rule of a named dimension, for
// a conflict message; "" for the default dimension.
func DimensionRef(dimension string) string {
	if dimension == "" {
		return ""
	}
	return fmt.Sprintf(", dimension %q", dimension)
}
