// Package denial defines the responses API Gateway sends in front of the
// Sluice authorizer when it does not let a request through: 429 Too Many
// Requests on a Deny and 401 Unauthorized when no subject was found. Each is
// written once, as a [Response] whose values are literals or $context
// variables, and rendered two ways: as the gateway response the CDK
// construct installs ([Response.Template], [Response.Parameters]) and, with
// concrete values, as the bytes `sluice local` answers ([Response.Render]).
// Its test holds the two renderings equal.
package denial

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/internal/headers"
)

// Value is one header or body value: a literal, or a $context variable
// that API Gateway fills in from the request. The zero Value is the empty
// literal.
type Value struct {
	literal string
	vr      string // $context variable without "$context.", such as "requestId"; "" for a literal
	number  bool   // a number: written into the body unquoted
}

// Literal is the value s as it is. s is written into the body as a JSON
// string and into a header as '<s>', so it must not hold a single quote.
func Literal(s string) Value { return Value{literal: s} }

// Authorizer is the authorizer context's value of key:
// $context.authorizer.<key>.
func Authorizer(key string) Value { return Value{vr: "authorizer." + key} }

// Number is the authorizer context's number of key, written into the body
// unquoted so that the member is a JSON number. Sluice's authorizer puts
// every number key in the context of each answer (edge.Context), so every
// Deny fills it in.
func Number(key string) Value { return Value{vr: "authorizer." + key, number: true} }

// Number reports whether v is written into a body as a JSON number
// (unquoted), not a string.
func (v Value) Number() bool { return v.number }

// Var is v's $context variable without "$context." (such as
// "authorizer.limit" or "requestId"); "" for a literal. The edge's
// function (internal/cdn) fills the same variables in.
func (v Value) Var() string { return v.vr }

// Text is v's literal text; "" for a variable.
func (v Value) Text() string { return v.literal }

// RequestID is API Gateway's id of the request: $context.requestId.
var RequestID = Value{vr: "requestId"}

// Field is one named value: a header field or a member of the JSON body.
type Field struct {
	Name  string
	Value Value
}

// Response is one gateway response.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Headers are the header fields, names as they are written.
	Headers []Field
	// Body is a JSON object of string and number members, in this order.
	Body []Field
}

// TooManyRequests is the response to an authorizer's Deny: 429, with
// Retry-After and the fields of the dialects d (0 is [headers.Default]),
// and a body carrying retryAfter, limit, remaining and reset as JSON
// numbers (the check API's types) and the rule id as a string.
//
// Gateway response templates are not run through VTL, only simple
// $context substitution: no value can be escaped, and none has a
// default. A number is placed unquoted ([Number]); Sluice's Deny always
// carries it. An ACCESS_DENIED that is not Sluice's (an API resource
// policy's) carries none, and its body is not JSON then, as its 429 is no
// rate limit. The body leaves out rateLimitPolicy and rateLimit: their
// IETF syntax quotes the policy name ("<rule>";q=10;w=60), which would
// break the JSON. They reach the client as the RateLimit-Policy and
// RateLimit header fields.
func TooManyRequests(d headers.Dialects) Response {
	d = cmp.Or(d, headers.Default)
	h := []Field{{"Content-Type", Literal("application/json")}}
	for _, f := range append(d.Fields(), headers.RetryAfter) {
		h = append(h, Field{f.Name, Authorizer(f.Key)})
	}
	return Response{
		Status:  http.StatusTooManyRequests,
		Headers: h,
		Body: []Field{
			{"message", Literal("Too Many Requests")},
			{"retryAfter", Number(headers.KeyRetryAfter)},
			{"limit", Number(headers.KeyLimit)},
			{"remaining", Number(headers.KeyRemaining)},
			{"reset", Number(headers.KeyReset)},
			{"rule", Authorizer(headers.KeyRule)},
			{"requestId", RequestID},
		},
	}
}

// Unauthorized is the response when the authorizer finds no subject (or
// an upstream authorizer does not allow): 401 with no rate-limit field, so
// that a client never reads an authorization failure as a rate limit.
func Unauthorized() Response {
	return Response{
		Status:  http.StatusUnauthorized,
		Headers: []Field{{"Content-Type", Literal("application/json")}},
		Body:    []Field{{"message", Literal("Unauthorized")}, {"requestId", RequestID}},
	}
}

// Template is r's body as an API Gateway gateway response template, each
// variable written $context.<variable>.
func (r Response) Template() string {
	return r.body(func(v Value) string { return "$context." + v.vr })
}

// Parameters maps r's header names to gateway response parameter values:
// context.<variable>, or '<literal>'.
func (r Response) Parameters() map[string]string {
	m := make(map[string]string, len(r.Headers))
	for _, f := range r.Headers {
		if f.Value.vr != "" {
			m[f.Name] = "context." + f.Value.vr
		} else {
			m[f.Name] = "'" + f.Value.literal + "'"
		}
	}
	return m
}

// Context holds the values of a request's $context variables.
type Context struct {
	// RequestID is $context.requestId.
	RequestID string
	// Authorizer holds $context.authorizer.<key> by key, each written as
	// API Gateway writes it (a number in decimal); an absent key is "".
	Authorizer map[string]string
}

func (c Context) lookup(v Value) string {
	if key, ok := strings.CutPrefix(v.vr, "authorizer."); ok {
		return c.Authorizer[key]
	}
	if v == RequestID {
		return c.RequestID
	}
	return v.literal
}

// Render is r as API Gateway sends it for a request with context c: the
// header fields (names as written, not canonicalised; a field whose value
// is empty is left out) and the body, the template with each variable
// replaced by its value, unescaped.
func (r Response) Render(c Context) (http.Header, []byte) {
	h := make(http.Header, len(r.Headers))
	for _, f := range r.Headers {
		if v := c.lookup(f.Value); v != "" {
			h[f.Name] = []string{v}
		}
	}
	return h, []byte(r.body(c.lookup))
}

// body writes r.Body as a JSON object, each variable's value given by
// subst, unescaped: API Gateway substitutes, it does not encode.
func (r Response) body(subst func(Value) string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range r.Body {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quote(f.Name))
		b.WriteByte(':')
		switch {
		case f.Value.vr == "":
			b.WriteString(quote(f.Value.literal))
		case f.Value.number:
			b.WriteString(subst(f.Value))
		default:
			b.WriteString(`"` + subst(f.Value) + `"`)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}
