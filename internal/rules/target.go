package rules

import (
	"strconv"
	"strings"
)

// Target is what a request names when it is decided, charged or looked
// at: whose buckets (Subject), on which API and which route. Where a rule
// may name "*" for every subject or every API, a Target names one.
type Target struct {
	// Subject is the subject as the caller names it: an API key, a user
	// id, an IP address. "*" is a subject like any other.
	Subject string
	// API is an API Gateway API id.
	API string
	// Route is "METHOD /resource/{param}" as a rule names it, or "*" for
	// the API-wide rules only.
	Route string
}

// Part names parts of a Target, for NormalizeTarget.
type Part uint8

// The parts of a Target.
const (
	PartSubject Part = 1 << iota
	PartAPI
	PartRoute
)

// NormalizeTarget validates and normalizes the parts of t that are given,
// the one check every entry puts what it is told through: the authorizer
// and the ratelimit package (the subject their sources find; API Gateway
// names the API and the route), POST /check and POST /usage (all three)
// and the subjects routes (the subject, and the API and route when the
// query names them). The parts not given are returned as they are. So a
// subject, an API or a route means the same buckets whichever entry
// names it:
//
//   - Subject: white space around it is trimmed (as the authorizer trims
//     a header or query value: " S " is S); then it must not be empty, be
//     at most MaxSubjectLen bytes of valid UTF-8, without control
//     characters (a subject no rule could name is hostile input, not a
//     new bucket).
//   - API: trimmed; one API id of at most MaxAPILen letters, digits, '-'
//     and '_' ("*", every API, is for rules).
//   - Route: NormalizeRoute ("get /x/" is "GET /x"), then a route a rule
//     can name: "*", or one of API Gateway's methods (ANY included) and a
//     resource path; "FROB /x" is refused, not charged to the API-wide
//     buckets.
//
// The error is a *ValidationError naming every part that is wrong. It
// allocates only to report a problem.
func NormalizeTarget(t Target, given Part) (Target, error) {
	var v validator
	if given&PartSubject != 0 {
		t.Subject = strings.TrimSpace(t.Subject)
		v.check("subject", requestSubjectProblem(t.Subject))
	}
	if given&PartAPI != 0 {
		t.API = strings.TrimSpace(t.API)
		v.check("api", requestAPIProblem(t.API))
	}
	if given&PartRoute != 0 {
		t.Route = NormalizeRoute(t.Route)
		v.check("route", routeProblem(t.Route))
	}
	return t, v.err()
}

// requestSubjectProblem is subjectProblem for a subject a request names,
// already trimmed. Printable ASCII, what nearly every API key and user id
// is, is checked in one pass over the bytes: the authorizer calls this for
// every request.
func requestSubjectProblem(subject string) string {
	if subject == "" {
		return "is required"
	}
	if len(subject) <= MaxSubjectLen {
		i := 0
		for i < len(subject) && subject[i] >= ' ' && subject[i] < 0x7f {
			i++
		}
		if i == len(subject) {
			return ""
		}
	}
	return subjectProblem(subject)
}

// requestAPIProblem is apiProblem for the one API a request names.
func requestAPIProblem(api string) string {
	switch api {
	case "":
		return "is required: an API Gateway API id"
	case Wildcard:
		return `must name one API: "*" (every API) is for rules`
	}
	if p := apiProblem(api); p != "" {
		return "must be an API id of at most " + strconv.Itoa(MaxAPILen) + " letters, digits, '-' and '_'"
	}
	return ""
}
