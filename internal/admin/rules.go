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

func (s *Service) createRule(ctx context.Context, c *call) (reply, error) {
	r, err := ruleFromBody(c.Body, "")
	if err != nil {
		return reply{}, err
	}
	created, err := s.store.CreateRule(ctx, r, c.actor())
	if err != nil {
		return reply{}, err
	}
	s.publish(ctx, c.route)
	h := http.Header{"Location": {"/rules/" + url.PathEscape(created.ID)}}
	return reply{status: http.StatusCreated, header: h, version: created.Version, body: created}, nil
}

func (s *Service) getRule(ctx context.Context, c *call) (reply, error) {
	r, err := s.store.GetRule(ctx, c.param("id"))
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, version: r.Version, body: r}, nil
}

func (s *Service) updateRule(ctx context.Context, c *call) (reply, error) {
	id := c.param("id")
	version, err := ifMatch(c.Header, true)
	if err != nil {
		return reply{}, err
	}
	r, err := ruleFromBody(c.Body, id)
	if err != nil {
		return reply{}, err
	}
	r.ID = id
	if !hasKey(c.Body, "set") {
		// A client that predates sets (issue 38) keeps the rule in its
		// set rather than dropping it by leaving the field out.
		cur, err := s.store.GetRule(ctx, id)
		if err != nil {
			return reply{}, err
		}
		r.Set = cur.Set
	}
	updated, err := s.store.UpdateRule(ctx, r, version, c.actor())
	if err != nil {
		return reply{}, err
	}
	if updated.Version != version { // the same version: nothing changed, nothing to publish
		s.publish(ctx, c.route)
	}
	return reply{status: http.StatusOK, version: updated.Version, body: updated}, nil
}

func (s *Service) deleteRule(ctx context.Context, c *call) (reply, error) {
	version, err := ifMatch(c.Header, false)
	if err != nil {
		return reply{}, err
	}
	if err := s.store.DeleteRule(ctx, c.param("id"), version, c.actor()); err != nil {
		return reply{}, err
	}
	s.publish(ctx, c.route)
	return reply{status: http.StatusNoContent}, nil
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

func (s *Service) ruleHistory(ctx context.Context, c *call) (reply, error) {
	es, err := s.store.RuleHistory(ctx, c.param("id")) // ErrNotFound when there is none
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: HistoryResponse{Entries: es}}, nil
}

// ruleFromBody decodes, normalizes and validates a rule. The read-only
// fields (id, version, created_at, updated_at) are accepted, so a client may
// send back what it read, and ignored, except that an id must name the rule
// in the path.
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
	r.ID, r.Version, r.CreatedAt, r.UpdatedAt = "", 0, time.Time{}, time.Time{}
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
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known {
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
