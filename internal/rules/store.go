package rules

import (
	"encoding/json"
	"time"
)

// Set is every rule and plan of a store as of one moment, with the rules
// version of that moment: what LoadAll returns, what the admin path
// publishes to Redis and what a Cache compiles into a Snapshot.
type Set struct {
	// Version identifies the moment: every write to the store's rules or
	// plans gives a larger one, and two sets of one store with the same
	// Version hold the same rules and plans. Stores make it the time of the
	// last write in microseconds since 1970, and at least one more than the
	// version before, so it keeps growing across a restarted memory store
	// or a restored database. Always >= 1 from a store; 0 means unknown.
	Version int64
	// Rules are ordered by id, disabled ones included.
	Rules []Rule
	// Plans are ordered by name.
	Plans []Plan
}

// Filter selects rules in a list. Empty fields match everything.
type Filter struct {
	API     string
	Subject string
	Route   string
	Plan    string
	// Limit is the page size: 1-1000; 0 means 100.
	Limit int
	// Cursor is the opaque NextCursor of the previous page, or empty.
	Cursor string
}

// Page is one page of a rule list, ordered by id.
type Page struct {
	Rules []Rule `json:"rules"`
	// NextCursor fetches the next page; empty on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

// Audit actions.
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionDelete = "delete"
)

// Audit entry kinds.
const (
	KindRule = "rule"
	KindPlan = "plan"
)

// AuditEntry records one write: who did what to which rule or plan, and the
// JSON before and after (null on create and delete respectively).
type AuditEntry struct {
	ID       int64           `json:"id"`
	Kind     string          `json:"kind"`      // KindRule or KindPlan
	TargetID string          `json:"target_id"` // rule id or plan name
	Action   string          `json:"action"`    // ActionCreate, ActionUpdate or ActionDelete
	Actor    string          `json:"actor"`     // IAM ARN or caller of the admin request
	At       time.Time       `json:"at"`
	Before   json.RawMessage `json:"before"`
	After    json.RawMessage `json:"after"`
}
