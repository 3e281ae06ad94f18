package rules

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds that Validate enforces. They keep every number well inside what the
// limiter's Lua arithmetic (doubles, exact to 2^53) and PostgreSQL's bigint
// hold, and every string short enough to index and to log.
const (
	// MaxLimit bounds Limit: tokens refilled per period.
	MaxLimit = 1_000_000_000
	// MaxBurst bounds Burst: the bucket capacity.
	MaxBurst = 1_000_000_000
	// MaxCost bounds Cost: the tokens one request spends. Cost is also at
	// most the rule's burst, or no request could ever pass.
	MaxCost = 1_000_000
	// MaxAPILen bounds API: an API Gateway id is 10 characters; 128 leaves
	// room for other gateways' names.
	MaxAPILen = 128
	// MaxRouteLen bounds Route, method and path together, in bytes.
	MaxRouteLen = 1024
	// MaxSubjectLen bounds Subject in bytes: room for API keys, JWT
	// subjects, ARNs and IPv6 addresses.
	MaxSubjectLen = 256
	// MaxPlanNameLen bounds a plan's Name.
	MaxPlanNameLen = 64
	// MaxDescriptionLen bounds Description in bytes.
	MaxDescriptionLen = 1024
)

// AnyMethod in a route matches every HTTP method, as in API Gateway.
const AnyMethod = "ANY"

// methods are the route methods API Gateway knows.
var methods = map[string]bool{
	"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true,
	"HEAD": true, "OPTIONS": true, AnyMethod: true,
}

// Normalize puts r in canonical form before validation and storage: it trims
// white space around every string field, upper-cases the route's method and
// separates it from the path by one space, drops a trailing slash from the
// path (not from "/"), lower-cases FailureMode and Mode, and fills the
// defaults FailureMode FailOpen, Mode Enforce and Enabled true. Burst and
// Cost stay nil when unset: nil already means Limit and 1.
func (r *Rule) Normalize() {
	r.API = strings.TrimSpace(r.API)
	r.Route = normalizeRoute(r.Route)
	r.Subject = strings.TrimSpace(r.Subject)
	r.Plan = strings.TrimSpace(r.Plan)
	r.Description = strings.TrimSpace(r.Description)
	r.FailureMode = FailureMode(strings.ToLower(strings.TrimSpace(string(r.FailureMode))))
	if r.FailureMode == "" {
		r.FailureMode = FailOpen
	}
	r.Mode = Mode(strings.ToLower(strings.TrimSpace(string(r.Mode))))
	if r.Mode == "" {
		r.Mode = Enforce
	}
	if r.Enabled == nil {
		t := true
		r.Enabled = &t
	}
}

func normalizeRoute(route string) string {
	route = strings.TrimSpace(route)
	method, path, ok := strings.Cut(route, " ")
	if !ok {
		return route
	}
	path = strings.TrimSpace(path)
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	return strings.ToUpper(method) + " " + path
}

// Normalize trims white space around p's Name and Description.
func (p *Plan) Normalize() {
	p.Name = strings.TrimSpace(p.Name)
	p.Description = strings.TrimSpace(p.Description)
}

// Validate reports every problem with r as a *ValidationError whose fields
// carry the JSON names, in the order of the JSON document; it returns nil
// when r is valid. It checks r as given: call Normalize first to accept
// lower-case methods, stray spaces and empty defaults. ID, Version and the
// timestamps belong to the store and are not checked, nor is whether a named
// plan exists.
//
// A rule names a Plan or carries Limit and Period (and optionally Burst)
// inline, never both. Empty FailureMode and Mode are valid (they mean the
// defaults).
func (r Rule) Validate() error {
	var v validator
	v.check("api", apiProblem(r.API))
	v.check("route", routeProblem(r.Route))
	v.check("subject", subjectProblem(r.Subject))
	burst := int64(0) // the capacity cost must fit in; 0 when unknown here
	if r.Plan != "" {
		v.check("plan", planNameProblem(r.Plan))
		if r.Limit != nil {
			v.add("limit", "must be empty when plan is set")
		}
		if r.Period != 0 {
			v.add("period", "must be empty when plan is set")
		}
		if r.Burst != nil {
			v.add("burst", "must be empty when plan is set: the plan's burst applies")
		}
	} else {
		if r.Limit == nil {
			v.add("limit", "is required unless plan is set")
		} else {
			v.check("limit", limitProblem(*r.Limit))
		}
		if r.Period == 0 {
			v.add("period", "is required unless plan is set")
		} else {
			v.check("period", periodProblem(r.Period))
		}
		if r.Limit != nil {
			burst = *r.Limit
		}
		if r.Burst != nil {
			v.check("burst", burstProblem(*r.Burst, r.Limit))
			burst = *r.Burst
		}
	}
	if r.Cost != nil {
		v.check("cost", costProblem(*r.Cost, burst))
	}
	switch r.FailureMode {
	case "", FailOpen, FailClosed:
	default:
		v.add("failure_mode", `must be "open" or "closed"`)
	}
	switch r.Mode {
	case "", Enforce, Shadow:
	default:
		v.add("mode", `must be "enforce" or "shadow"`)
	}
	v.check("description", descriptionProblem(r.Description))
	return v.err()
}

// Validate reports every problem with p as a *ValidationError with JSON
// field names, or returns nil. Version and the timestamps are not checked.
func (p Plan) Validate() error {
	var v validator
	v.check("name", planNameProblem(p.Name))
	v.check("limit", limitProblem(p.Limit))
	if p.Period == 0 {
		v.add("period", "is required")
	} else {
		v.check("period", periodProblem(p.Period))
	}
	if p.Burst != nil {
		v.check("burst", burstProblem(*p.Burst, &p.Limit))
	}
	v.check("description", descriptionProblem(p.Description))
	return v.err()
}

// validator collects field problems.
type validator struct{ fields []FieldError }

func (v *validator) add(field, reason string) {
	v.fields = append(v.fields, FieldError{Field: field, Reason: reason})
}

// check adds reason unless it is empty.
func (v *validator) check(field, reason string) {
	if reason != "" {
		v.add(field, reason)
	}
}

// err returns nil (an untyped nil error) when nothing was added.
func (v *validator) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.fields}
}

// Each xxxProblem function returns why a value is invalid, or "".

func apiProblem(api string) string {
	switch {
	case api == "":
		return `is required: an API Gateway REST API id or "*"`
	case api == Wildcard:
		return ""
	case len(api) > MaxAPILen:
		return "must be at most " + strconv.Itoa(MaxAPILen) + " characters"
	case !allBytes(api, isIDByte):
		return `must be "*" or an API id of letters, digits, '-' and '_'`
	}
	return ""
}

func isIDByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// isPathByte reports whether c may appear in a literal path part. API Gateway
// allows "a-zA-Z0-9._-" there.
func isPathByte(c byte) bool { return isIDByte(c) || c == '.' }

func allBytes(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// routeProblem checks "*" or "METHOD /path", where the path is "/" or
// /part/part… with each part a literal of [A-Za-z0-9._-] or a parameter
// {name}, and {name+} (greedy) allowed as the last part only, as API Gateway
// names resources.
func routeProblem(route string) string {
	if route == "" {
		return `is required: "*" or "METHOD /resource", such as "GET /pets/{id}"`
	}
	if route == Wildcard {
		return ""
	}
	if len(route) > MaxRouteLen {
		return "must be at most " + strconv.Itoa(MaxRouteLen) + " bytes"
	}
	method, path, ok := strings.Cut(route, " ")
	if !ok {
		return `must be "*" or "METHOD /resource", such as "GET /pets/{id}"`
	}
	if !methods[method] {
		return "method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, ANY"
	}
	return pathProblem(path)
}

func pathProblem(path string) string {
	if path == "" || path[0] != '/' {
		return "path must start with '/'"
	}
	if path == "/" {
		return ""
	}
	parts := strings.Split(path[1:], "/")
	var params []string
	for i, part := range parts {
		last := i == len(parts)-1
		switch {
		case part == "":
			if last {
				return "path must not end with '/'"
			}
			return "path must not contain an empty part ('//')"
		case part == "." || part == "..":
			return "path must not contain '.' or '..' parts"
		case part[0] == '{' || part[len(part)-1] == '}':
			name, greedy, ok := param(part)
			if !ok {
				return "path parameter " + strconv.Quote(part) + ` must be "{name}" or "{name+}" with a name of letters, digits, '.', '-' and '_'`
			}
			if greedy && !last {
				return "greedy path parameter " + strconv.Quote(part) + " must be the last part"
			}
			for _, p := range params {
				if p == name {
					return "path parameter " + strconv.Quote(name) + " appears twice"
				}
			}
			params = append(params, name)
		case !allBytes(part, isPathByte):
			return "path part " + strconv.QuoteToASCII(part) + " may hold only letters, digits, '.', '-', '_' or be a {parameter}"
		}
	}
	return ""
}

// param parses "{name}" or "{name+}".
func param(part string) (name string, greedy, ok bool) {
	if len(part) < 3 || part[0] != '{' || part[len(part)-1] != '}' {
		return "", false, false
	}
	name = part[1 : len(part)-1]
	if strings.HasSuffix(name, "+") {
		name, greedy = name[:len(name)-1], true
	}
	if name == "" || !allBytes(name, isPathByte) {
		return "", false, false
	}
	return name, greedy, true
}

func subjectProblem(subject string) string {
	switch {
	case subject == "":
		return `is required: an exact subject or "*"`
	case len(subject) > MaxSubjectLen:
		return "must be at most " + strconv.Itoa(MaxSubjectLen) + " bytes"
	case !utf8.ValidString(subject):
		return "must be valid UTF-8"
	case strings.IndexFunc(subject, unicode.IsControl) >= 0:
		return "must not contain control characters"
	case strings.TrimSpace(subject) != subject:
		return "must not start or end with white space"
	}
	return ""
}

func planNameProblem(name string) string {
	switch {
	case name == "":
		return "is required"
	case len(name) > MaxPlanNameLen:
		return "must be at most " + strconv.Itoa(MaxPlanNameLen) + " characters"
	case name[0] < 'a' || name[0] > 'z' || !allBytes(name, isPlanByte):
		return "must start with a lower-case letter and hold only a-z, 0-9, '-' and '_'"
	}
	return ""
}

func isPlanByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

func limitProblem(limit int64) string {
	if limit < 0 || limit > MaxLimit {
		return "must be between 0 (block) and " + strconv.Itoa(MaxLimit)
	}
	return ""
}

func periodProblem(p Period) string {
	if err := p.check(); err != nil {
		return err.Error()
	}
	return ""
}

// burstProblem checks a burst against its limit (nil when the limit is
// missing, which is reported on its own).
func burstProblem(burst int64, limit *int64) string {
	switch {
	case limit != nil && *limit == 0:
		if burst != 0 {
			return "must be 0 or empty when limit is 0: the rule blocks"
		}
	case burst < 1 || burst > MaxBurst:
		return "must be between 1 and " + strconv.Itoa(MaxBurst)
	case limit != nil && burst < *limit:
		return "must be at least limit (" + strconv.FormatInt(*limit, 10) + ")"
	}
	return ""
}

// costProblem checks a cost against the rule's burst (0 when unknown: a
// plan's, or a blocking rule's).
func costProblem(cost, burst int64) string {
	switch {
	case cost < 1 || cost > MaxCost:
		return "must be between 1 and " + strconv.Itoa(MaxCost)
	case burst > 0 && burst <= MaxBurst && cost > burst:
		return "must be at most the burst (" + strconv.FormatInt(burst, 10) + "), or no request could pass"
	}
	return ""
}

func descriptionProblem(d string) string {
	switch {
	case len(d) > MaxDescriptionLen:
		return "must be at most " + strconv.Itoa(MaxDescriptionLen) + " bytes"
	case !utf8.ValidString(d):
		return "must be valid UTF-8"
	case strings.IndexByte(d, 0) >= 0:
		return "must not contain NUL characters"
	}
	return ""
}
