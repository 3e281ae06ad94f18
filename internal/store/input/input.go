// Package input checks what callers hand a rules store, the same way in
// every implementation (internal/store/postgres, internal/store/memory):
// rule ids, text PostgreSQL can hold, and the page size and cursor of
// ListRules. Sharing it keeps the stores' answers to bad input identical,
// which the contract suite in internal/store/storetest relies on.
//
// Problems are *rules.ValidationError, so the admin API answers 400.
package input

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
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

// cursorPrefix versions the cursor format: "r2:" and the JSON array of
// the last listed rule's api, route, subject and id. ("r1:" and an id was
// the format of lists ordered by id alone.)
const cursorPrefix = "r2:"

// ID returns id in the canonical UUID form and whether it is a UUID at all.
// A store answers rules.ErrNotFound for a non-UUID id, never a server error.
func ID(id string) (string, bool) {
	u, err := uuid.Parse(id)
	if err != nil {
		return id, false
	}
	return u.String(), true
}

// Key is where a rule sits in a list: lists are ordered by api, then
// route, then subject, then id, each compared byte by byte (PostgreSQL's
// COLLATE "C", Go's strings.Compare), so every store orders them the same
// whatever the database's locale. The id makes the order total.
type Key struct {
	API, Route, Subject, ID string
}

// KeyOf returns r's place in a list.
func KeyOf(r rules.Rule) Key { return Key{r.API, r.Route, r.Subject, r.ID} }

// Compare orders keys as lists are: -1, 0 or +1.
func (k Key) Compare(o Key) int {
	return cmp.Or(strings.Compare(k.API, o.API), strings.Compare(k.Route, o.Route),
		strings.Compare(k.Subject, o.Subject), strings.Compare(k.ID, o.ID))
}

// Cursor returns the opaque cursor (rules.Page.NextCursor) that continues a
// list after the rule r. It holds r's scope, so a list continues where it
// was also when r is deleted meanwhile.
func Cursor(r rules.Rule) string {
	b, _ := json.Marshal([]string{r.API, r.Route, r.Subject, r.ID}) // strings always marshal
	return base64.RawURLEncoding.EncodeToString(append([]byte(cursorPrefix), b...))
}

// Page validates f's page size, cursor and filter text (Text) and returns
// the size and the key to continue after (nil for the first page). Every
// problem is reported at once.
func Page(f rules.Filter) (size int, after *Key, err error) {
	var fields []rules.FieldError
	size = f.Limit
	switch {
	case size == 0:
		size = DefaultPageSize
	case size < 1 || size > MaxPageSize:
		fields = append(fields, rules.FieldError{Field: "limit", Reason: fmt.Sprintf("must be between 1 and %d", MaxPageSize)})
	}
	if f.Cursor != "" {
		var ok bool
		if after, ok = parseCursor(f.Cursor); !ok {
			fields = append(fields, rules.FieldError{Field: "cursor", Reason: "malformed cursor; pass the next_cursor of the previous page as it is"})
		}
	}
	fields = append(fields, textFields("api", f.API, "subject", f.Subject, "route", f.Route, "plan", f.Plan)...)
	if fields != nil {
		return 0, nil, &rules.ValidationError{Fields: fields}
	}
	return size, after, nil
}

// PageOf returns the page of rs, the rules after the cursor in list order
// (size+1 of them when more follow): the first size, and the cursor of the
// next page when there is one.
func PageOf(rs []rules.Rule, size int) rules.Page {
	if len(rs) <= size {
		return rules.Page{Rules: rs}
	}
	return rules.Page{Rules: rs[:size], NextCursor: Cursor(rs[size-1])}
}

func parseCursor(c string) (*Key, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, false
	}
	rest, ok := strings.CutPrefix(string(b), cursorPrefix)
	var parts []string
	if !ok || json.Unmarshal([]byte(rest), &parts) != nil || len(parts) != 4 {
		return nil, false
	}
	k := Key{API: parts[0], Route: parts[1], Subject: parts[2], ID: parts[3]}
	u, err := uuid.Parse(k.ID)
	if err != nil || u.String() != k.ID || Text("api", k.API, "route", k.Route, "subject", k.Subject) != nil {
		return nil, false
	}
	return &k, true
}

// SameRule reports whether two rules hold the same settings, whatever their
// version and timestamps: an update to what is stored already changes
// nothing, and stores answer it without a write.
func SameRule(a, b rules.Rule) bool {
	a.Version, a.CreatedAt, a.UpdatedAt = b.Version, b.CreatedAt, b.UpdatedAt
	return reflect.DeepEqual(a, b)
}

// SamePlan is SameRule for plans.
func SamePlan(a, b rules.Plan) bool {
	a.Version, a.CreatedAt, a.UpdatedAt = b.Version, b.CreatedAt, b.UpdatedAt
	return reflect.DeepEqual(a, b)
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
	if fields := textFields(pairs...); fields != nil {
		return &rules.ValidationError{Fields: fields}
	}
	return nil
}

func textFields(pairs ...string) []rules.FieldError {
	var fields []rules.FieldError
	for i := 0; i+1 < len(pairs); i += 2 {
		if !Storable(pairs[i+1]) {
			fields = append(fields, rules.FieldError{Field: pairs[i], Reason: "must be valid UTF-8 without NUL bytes"})
		}
	}
	return fields
}

// RuleWrite readies r for a write of action (rules.ActionCreate,
// ActionUpdate or ActionDelete) for set (a batch's; "" outside one), the
// same way in every store: it normalises r unless it is deleted (a delete
// reads only the id), stamps set on it, puts the id of an update or
// delete in canonical form (rules.ErrNotFound when it is no UUID), and
// checks the text of a create or update (Text).
func RuleWrite(r *rules.Rule, action, set string) error {
	if action != rules.ActionDelete {
		r.Normalize()
	}
	if set != "" {
		r.Set = set
	}
	if action != rules.ActionCreate {
		id, ok := ID(r.ID)
		if !ok {
			return rules.ErrNotFound
		}
		r.ID = id
	}
	if action == rules.ActionDelete {
		return nil
	}
	return Text("api", r.API, "route", r.Route, "subject", r.Subject, "plan", r.Plan, "description", r.Description)
}

// PlanWrite is RuleWrite for plans: it normalises p unless it is deleted,
// stamps set on it, answers rules.ErrNotFound for an update or delete of a
// name not Storable (no such plan can exist), and checks the text
// (Text).
func PlanWrite(p *rules.Plan, action, set string) error {
	if action != rules.ActionDelete {
		p.Normalize()
	}
	if set != "" {
		p.Set = set
	}
	if action != rules.ActionCreate && !Storable(p.Name) {
		return rules.ErrNotFound
	}
	return Text("name", p.Name, "description", p.Description)
}

// Violation is the *rules.ValidationError of the schema's CHECK
// constraint <table>_<name>_check (package migrations): the field it
// guards, and why when "out of range" would not say. The PostgreSQL store
// answers a write its database refuses with it, and the memory store,
// which mirrors the constraints, the same; internal/rules validation
// normally catches these first, with better reasons.
func Violation(name string) error {
	if fe, ok := violations[name]; ok {
		return FieldError(fe.Field, fe.Reason)
	}
	return FieldError(name, "out of range")
}

// violations are the constraints whose field is not their name, or whose
// reason is not "out of range".
var violations = map[string]rules.FieldError{
	"period_kind":   {Field: "period", Reason: `a quota's period must be "1d", "1w", "1mo" or "1y", a concurrency rule's at most "1d", and neither has a burst`},
	"global_kind":   {Field: "global", Reason: "cannot be combined with kind concurrency"},
	"plan":          {Field: "plan", Reason: "a rule names a plan or carries limit and period, not both"},
	"global":        {Field: "global", Reason: "cannot be combined with mode shadow, min_remaining or durable"},
	"global_period": {Field: "period", Reason: "must be at least 1m for a global rate rule"},
}

// FieldError is a *rules.ValidationError with one field.
func FieldError(field, reason string) error {
	return &rules.ValidationError{Fields: []rules.FieldError{{Field: field, Reason: reason}}}
}
