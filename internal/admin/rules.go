package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
)

// ListRulesResponse is the body of GET /rules.
type ListRulesResponse struct {
	Rules []rules.Rule `json:"rules"`
	// NextCursor fetches the next page (?cursor=); empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// HistoryResponse is the body of GET /rules/{id}/history.
type HistoryResponse struct {
	Entries []rules.AuditEntry `json:"entries"`
}

// entity is what the rule routes and the plan routes differ in: the path
// parameter naming one, its collection's path, how a body becomes one, and
// the store's calls. Its methods are the create, get, update, delete and
// history handlers of both.
type entity[T any] struct {
	param    string // "id", "name"
	location string // a created one's Location, before its escaped key
	fromBody func(body []byte, key string) (T, error)
	fields   func(*T) (key string, version int64, set *string) // of one
	create   func(store.Store, context.Context, T, string) (T, error)
	get      func(store.Store, context.Context, string) (T, error)
	update   func(store.Store, context.Context, T, int64, string) (T, error)
	remove   func(store.Store, context.Context, string, int64, string) error
	history  func(store.Store, context.Context, string) ([]rules.AuditEntry, error)
}

// ruleRoutes serves POST /rules and the routes of /rules/{id}.
var ruleRoutes = entity[rules.Rule]{
	param: "id", location: "/rules/", fromBody: ruleFromBody,
	fields: func(r *rules.Rule) (string, int64, *string) { return r.ID, r.Version, &r.Set },
	create: store.Store.CreateRule, get: store.Store.GetRule, update: store.Store.UpdateRule,
	remove: store.Store.DeleteRule, history: store.Store.RuleHistory,
}

func (e entity[T]) createOne(s *Service, ctx context.Context, c *call) (reply, error) {
	v, err := e.fromBody(c.Body, "")
	if err != nil {
		return reply{}, err
	}
	created, err := e.create(s.store, ctx, v, c.actor())
	if err != nil {
		return reply{}, err
	}
	s.publish(ctx, c.route)
	key, version, _ := e.fields(&created)
	h := http.Header{"Location": {e.location + url.PathEscape(key)}}
	return reply{status: http.StatusCreated, header: h, version: version, body: created}, nil
}

func (e entity[T]) getOne(s *Service, ctx context.Context, c *call) (reply, error) {
	v, err := e.get(s.store, ctx, c.param(e.param))
	if err != nil {
		return reply{}, err
	}
	_, version, _ := e.fields(&v)
	return reply{status: http.StatusOK, version: version, body: v}, nil
}

// updateOne replaces a rule or a plan; every rule naming a plan takes its
// new numbers at the authorizers' next reload (the publish after the
// write triggers it).
func (e entity[T]) updateOne(s *Service, ctx context.Context, c *call) (reply, error) {
	key := c.param(e.param)
	version, err := ifMatch(c.Header, true)
	if err != nil {
		return reply{}, err
	}
	v, err := e.fromBody(c.Body, key)
	if err != nil {
		return reply{}, err
	}
	if !hasKey(c.Body, "set") {
		// A client that predates sets (issue 38) keeps the rule or plan
		// in its set rather than dropping it by leaving the field out.
		cur, err := e.get(s.store, ctx, key)
		if err != nil {
			return reply{}, err
		}
		_, _, set := e.fields(&v)
		_, _, curSet := e.fields(&cur)
		*set = *curSet
	}
	updated, err := e.update(s.store, ctx, v, version, c.actor())
	if err != nil {
		return reply{}, err
	}
	_, newVersion, _ := e.fields(&updated)
	if newVersion != version { // the same version: nothing changed, nothing to publish
		s.publish(ctx, c.route)
	}
	return reply{status: http.StatusOK, version: newVersion, body: updated}, nil
}

func (e entity[T]) deleteOne(s *Service, ctx context.Context, c *call) (reply, error) {
	version, err := ifMatch(c.Header, false)
	if err != nil {
		return reply{}, err
	}
	if err := e.remove(s.store, ctx, c.param(e.param), version, c.actor()); err != nil {
		return reply{}, err
	}
	s.publish(ctx, c.route)
	return reply{status: http.StatusNoContent}, nil
}

// historyOf answers the audit entries of a rule or a plan, oldest first;
// those of a deleted one remain readable.
func (e entity[T]) historyOf(s *Service, ctx context.Context, c *call) (reply, error) {
	es, err := e.history(s.store, ctx, c.param(e.param)) // ErrNotFound when there is none
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: HistoryResponse{Entries: es}}, nil
}

func (s *Service) listRules(ctx context.Context, c *call) (reply, error) {
	if err := onlyQuery(c.Query, "api", "subject", "route", "plan", "limit", "cursor"); err != nil {
		return reply{}, err
	}
	f := rules.Filter{
		API:     c.Query.Get("api"),
		Subject: c.Query.Get("subject"),
		Route:   c.Query.Get("route"),
		Plan:    c.Query.Get("plan"),
		Cursor:  c.Query.Get("cursor"),
	}
	if v := c.Query.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return reply{}, httpapi.BadRequest(httpapi.FieldError("limit", "must be an integer between 1 and 1000"))
		}
		f.Limit = n
	}
	page, err := s.store.ListRules(ctx, f)
	if err != nil {
		return reply{}, err
	}
	out := ListRulesResponse{Rules: page.Rules, NextCursor: page.NextCursor}
	if out.Rules == nil {
		out.Rules = []rules.Rule{}
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// ruleFromBody decodes, normalizes and validates a rule, whose id is
// pathID ("" for a create). The read-only fields (id, version, created_at,
// updated_at) are accepted, so a client may send back what it read, and
// ignored, except that an id must name the rule in the path.
func ruleFromBody(body []byte, pathID string) (rules.Rule, error) {
	var r rules.Rule
	problems, err := httpapi.DecodeBody(body, &r)
	if err != nil {
		return rules.Rule{}, err
	}
	if r.ID != "" && !strings.EqualFold(r.ID, pathID) {
		reason := "is assigned by the server; leave it out"
		if pathID != "" {
			reason = "must be the id in the path, or left out"
		}
		problems = append(problems, httpapi.FieldError("id", reason))
	}
	r.ID, r.Version, r.CreatedAt, r.UpdatedAt = pathID, 0, time.Time{}, time.Time{}
	r.Normalize()
	if err := httpapi.WithValidation(problems, r.Validate); err != nil {
		return rules.Rule{}, err
	}
	return r, nil
}

// hasKey reports whether the JSON object body has the top-level key k.
func hasKey(body []byte, k string) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return false
	}
	_, ok := obj[k]
	return ok
}

// actor returns who the audit log records for this call.
func (c *call) actor() string {
	if c.Actor == "" {
		return "unknown"
	}
	return c.Actor
}

// ifMatch reads the version in If-Match. "*" and an absent header (when not
// required) give 0, which the store reads as "any version". A tag that is not
// one of our ETags ("<version>": not weak, quoted, a version number) can
// never match: 412.
func ifMatch(h http.Header, required bool) (int64, error) {
	vs := h.Values("If-Match")
	if len(vs) == 0 {
		if required {
			return 0, &httpapi.Error{Status: http.StatusPreconditionRequired,
				Detail: "Send If-Match with the ETag you read (GET), so that a concurrent change is not overwritten."}
		}
		return 0, nil
	}
	v := strings.TrimSpace(strings.Join(vs, ","))
	if strings.Contains(v, ",") {
		return 0, httpapi.BadRequest(httpapi.FieldError("If-Match", "must hold exactly one ETag"))
	}
	if v == "*" {
		return 0, nil
	}
	tag, open := strings.CutPrefix(v, `"`)
	tag, closed := strings.CutSuffix(tag, `"`)
	n, err := strconv.ParseInt(tag, 10, 64)
	if !open || !closed || err != nil || n < 1 {
		return 0, &httpapi.Error{Status: http.StatusPreconditionFailed,
			Detail: "If-Match does not match the current version; GET the resource and use its ETag."}
	}
	return n, nil
}

// onlyQuery rejects query parameters other than those named, so that a typo
// (?subjet=) is an error rather than an unfiltered list.
func onlyQuery(q url.Values, names ...string) error {
	var fs []rules.FieldError
	for k := range q {
		if !slices.Contains(names, k) {
			fs = append(fs, httpapi.FieldError(httpapi.Truncate(k), "unknown query parameter; use "+strings.Join(names, ", ")))
		}
	}
	for k, v := range q {
		if len(v) > 1 {
			fs = append(fs, httpapi.FieldError(httpapi.Truncate(k), "must be given once"))
		}
	}
	if fs != nil {
		slices.SortFunc(fs, func(a, b rules.FieldError) int { return strings.Compare(a.Field, b.Field) })
		return httpapi.BadRequest(fs...)
	}
	return nil
}
