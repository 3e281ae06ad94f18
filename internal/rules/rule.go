// Package rules holds Sluice's rate-limit rules: the Rule and Plan types, their
// validation, matching and precedence, and the immutable snapshot the
// authorizer consults on every request.
//
// The package is pure domain: it imports only the standard library and knows
// nothing of Lambda, HTTP, Redis or PostgreSQL.
package rules

import (
	"errors"
	"fmt"
	"time"
)

// Wildcard matches any API, any route or any subject. A rule whose Subject is
// Wildcard gives every subject its own bucket.
const Wildcard = "*"

// FailureMode says what happens to a request when Redis cannot answer.
type FailureMode string

const (
	// FailOpen allows the request and flags it (the default).
	FailOpen FailureMode = "open"
	// FailClosed denies the request.
	FailClosed FailureMode = "closed"
)

// Mode says whether a rule denies.
type Mode string

const (
	// Enforce denies requests over the limit (the default).
	Enforce Mode = "enforce"
	// Shadow charges and counts but never denies: for trying a limit out.
	Shadow Mode = "shadow"
)

// Kind says how a rule counts.
type Kind string

const (
	// Rate is a token bucket: Limit tokens per Period, refilled
	// continuously, up to Burst (the default).
	Rate Kind = "rate"
	// Quota counts against a calendar window: Limit per day, week, month
	// or year (Period 1d, 1w, 1mo or 1y), aligned to UTC or to Anchor, and
	// resets at the window's end.
	Quota Kind = "quota"
	// Concurrency bounds requests in flight: at most Limit at once per
	// subject. Each admitted request holds a slot until it is released or
	// its Period, the slot's lease TTL (1 s to MaxLeaseTTL), ends, so a
	// holder that crashes frees its slot by itself. Where nothing releases
	// (an API Gateway authorizer sees no response) a slot is held for the
	// whole TTL: at most Limit requests start per TTL (docs/concurrency.md).
	Concurrency Kind = "concurrency"
)

// MaxLeaseTTL is the longest a concurrency rule's slot may be held
// unreleased: its Period.
const MaxLeaseTTL = Period(24 * time.Hour)

// Rule is one rate limit or quota on one scope (API, route, subject).
// A rate rule and a quota rule may claim the same scope: a scope is (api,
// route, subject, kind).
//
// A rule either names a Plan, whose numbers it then uses, or carries Limit,
// Period and Burst inline; not both.
type Rule struct {
	// ID is a UUID assigned by the store on create.
	ID string `json:"id"`
	// API is an API Gateway REST API id, or Wildcard for every API.
	API string `json:"api"`
	// Route is "METHOD /resource/{param}" as API Gateway names a resource
	// (METHOD may be ANY), or Wildcard for the whole API (the API-wide scope).
	Route string `json:"route"`
	// Subject is an exact subject (user or API key) or Wildcard, meaning every
	// subject gets its own bucket.
	Subject string `json:"subject"`
	// Kind is Rate (a token bucket) or Quota (a calendar window); empty
	// means Rate. A rule naming a plan must have the plan's kind.
	Kind Kind `json:"kind,omitempty"`
	// Plan names a Plan whose Limit, Period and Burst this rule uses. Empty
	// for inline numbers.
	Plan string `json:"plan,omitempty"`
	// Limit is the number of tokens refilled per Period. 0 blocks the scope.
	// Nil only when Plan is set.
	Limit *int64 `json:"limit,omitempty"`
	// Period is the refill period, 1 s to 1 year, of a rate rule; the
	// window of a quota rule: Day, Week, Month or Year (JSON "1d", "1w",
	// "1mo", "1y"). Zero only when Plan is set.
	Period Period `json:"period,omitempty"`
	// Burst is the bucket capacity; nil means Limit. A quota has none: its
	// Limit is the window's capacity.
	Burst *int64 `json:"burst,omitempty"`
	// Anchor, for a quota only, is an RFC 3339 time (whole seconds, 1970
	// to 2100) its windows repeat from: every day or week from it, or
	// every calendar month or year (a day 31 clamped to the month's end,
	// Feb 29 to Feb 28). Empty means UTC calendar alignment: midnight, the
	// Monday, the 1st, January 1st. Stored in UTC.
	Anchor string `json:"anchor,omitempty"`
	// MinRemaining is the admission floor: a request passes only when the
	// bucket holds at least Cost + MinRemaining tokens, so that at least
	// MinRemaining are left after it (an estimate for a request whose real
	// cost is charged later through the usage API). Nil means 0; it must
	// leave room for the cost: Cost + MinRemaining <= Burst (Limit for a
	// quota).
	MinRemaining *int64 `json:"min_remaining,omitempty"`
	// Cost is the number of tokens one request matched by this rule spends;
	// nil means 1. Route rules' cost wins over API-wide rules'.
	Cost *int64 `json:"cost,omitempty"`
	// FailureMode applies when Redis cannot answer; empty means FailOpen.
	FailureMode FailureMode `json:"failure_mode,omitempty"`
	// Durable, for a quota only, acknowledges a charge only once a Redis
	// replica has it (WAIT 1 after the script), so a failover or a split
	// brain cannot lose it and re-admit the subject: for quotas that bill.
	// An admission no replica acknowledges in time is a Redis failure,
	// decided by FailureMode (use closed). It costs a replica's
	// acknowledgement per request (one round trip carries both), and such
	// requests are never leased. False by default.
	Durable bool `json:"durable,omitempty"`
	// Mode is Enforce or Shadow; empty means Enforce.
	Mode Mode `json:"mode,omitempty"`
	// Enabled rules take part in matching. Nil means true on create.
	Enabled *bool `json:"enabled,omitempty"`
	// Description is free text for people, at most 1024 bytes.
	Description string `json:"description,omitempty"`
	// Dimension names the subject the rule limits, one of the authorizer's
	// DIMENSIONS (such as "ip" or "tenant"); empty (or "default") is the
	// default dimension, the subject SUBJECT_SOURCES finds. A rule of a
	// dimension the authorizer does not have never applies.
	Dimension string `json:"dimension,omitempty"`
	// ExpiresAt, when set, is the instant the rule stops applying: from it
	// on every authorizer matches as if the rule were absent (a less
	// specific rule, or the default, takes over) with no write needed.
	// Whole seconds, 1970 to 2100, stored in UTC. Nil never expires.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Set names the rules-as-code set that owns the rule (`sluice apply`):
	// an apply of set S creates, changes and deletes only rules of S.
	// Empty (the default) is owned by no set: no apply ever touches it.
	// A plan name's form: 1-64 of [a-z0-9_-], starting with a letter.
	Set string `json:"set,omitempty"`
	// Global shares the rule's budget between every Region of one
	// deployment family: each Region leases blocks of it from a ledger
	// (DynamoDB, strongly consistent across Regions) and decides locally
	// from what it holds, so the sum admitted in all Regions never passes
	// Limit per window (docs/global.md). A rule naming a global plan is
	// global too. False (the default): each Region counts its own.
	Global bool `json:"global,omitempty"`
	// Version starts at 1 and grows by one on every update; it is the ETag.
	Version int64 `json:"version"`
	// CreatedAt and UpdatedAt are set by the store.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Expired reports whether r has expired at now.
func (r Rule) Expired(now time.Time) bool {
	return r.ExpiresAt != nil && !now.Before(*r.ExpiresAt)
}

// Plan is a named tier of numbers that rules can refer to, such as
// "gold: 1000 per minute, burst 2000" or, as a quota, "gold-monthly:
// 100000 per calendar month". Changing a plan re-limits every rule that
// names it; a rule naming a plan has its kind.
type Plan struct {
	// Name is the plan's key: 1-64 of [a-z0-9_-], starting with a letter.
	Name string `json:"name"`
	// Kind is Rate or Quota; empty means Rate. A plan's anchor is its
	// rules' (a billing cycle belongs to the subject, not to the tier).
	Kind Kind `json:"kind,omitempty"`
	// Limit is the number of tokens refilled per Period (per window for a
	// quota); 0 blocks.
	Limit int64 `json:"limit"`
	// Period is the refill period, 1 s to 1 year; for a quota 1d, 1w, 1mo
	// or 1y.
	Period Period `json:"period"`
	// Burst is the bucket capacity; nil means Limit. None for a quota.
	Burst       *int64 `json:"burst,omitempty"`
	Description string `json:"description,omitempty"`
	// Set names the rules-as-code set that owns the plan, as Rule.Set.
	Set string `json:"set,omitempty"`
	// Global makes every rule naming the plan global (Rule.Global).
	Global    bool      `json:"global,omitempty"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Period is a refill period. In JSON it is a string: a number and a unit
// among s, m, h, d (24 h), w (7 d) and y (365 d), such as "1s", "15m",
// "1h", "1d"; Go durations such as "1h30m" are accepted on input. "1mo" is
// Month, the calendar month of quotas.
type Period time.Duration

// Limits of a Period.
const (
	MinPeriod = Period(time.Second)
	MaxPeriod = Period(365 * 24 * time.Hour)
)

// Month is a quota's calendar month ("1mo"). As a duration it is the mean
// Gregorian month, 30.436875 days (what RateLimit-Policy's w= says); a
// quota's windows are calendar months all the same. A rate rule cannot use
// it.
const Month = Period(2629746 * time.Second)

// Calendar reports whether p is one of a quota's windows: Day, Week, Month
// or Year.
func (p Period) Calendar() bool {
	switch p {
	case Period(Day), Period(Week), Month, Period(Year):
		return true
	}
	return false
}

// Duration returns p as a time.Duration.
func (p Period) Duration() time.Duration { return time.Duration(p) }

// Errors a Store returns, wrapped with context. Callers test with errors.Is.
var (
	// ErrNotFound: no rule or plan with that id or name.
	ErrNotFound = errors.New("not found")
	// ErrConflict: another rule already holds the scope (api, route,
	// subject), a plan with that name exists, or a plan is still in use.
	ErrConflict = errors.New("conflict")
	// ErrStale: the version given (If-Match) is not the current one.
	ErrStale = errors.New("version mismatch")
	// ErrTooManyRules: the store already holds the most rules it may
	// (store.Options.MaxRules); a create is refused until rules are
	// deleted. It is not an ErrConflict: nothing about the rule itself is
	// wrong, and retrying the same create later may succeed.
	ErrTooManyRules = errors.New("too many rules")
)

// StaleError is the rules.ErrStale of a write whose If-Match version is
// not the stored one: Want was asked, Current is stored. A Want above
// Current never existed (a typo, or another deployment's version), which
// is not the same as a write someone else made since.
type StaleError struct {
	Want, Current int64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("at version %d (current %d): %v", e.Want, e.Current, ErrStale)
}

func (e *StaleError) Unwrap() error { return ErrStale }

// ValidationError lists what is wrong with a rule or plan, field by field.
type ValidationError struct {
	Fields []FieldError
}

// FieldError is one problem with one field. Field is the JSON name.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e *ValidationError) Error() string {
	if len(e.Fields) == 1 {
		return fmt.Sprintf("invalid %s: %s", e.Fields[0].Field, e.Fields[0].Reason)
	}
	return fmt.Sprintf("invalid input: %d field errors, first %s: %s", len(e.Fields), e.Fields[0].Field, e.Fields[0].Reason)
}
