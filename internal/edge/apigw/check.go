package apigw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/lambdahttp"
	"github.com/sluicehq/sluice/internal/rules"
)

// MaxCheckBody is the largest check request body accepted, in bytes.
const MaxCheckBody = 8 << 10

// CheckRequest is the body of POST /check: a check, or a release of the
// in-flight slots a check took.
type CheckRequest struct {
	// Release, when set, is the slot token of an earlier check's answer
	// (CheckResponse.Slot), alone in the body: its in-flight slots are
	// freed, and the answer is 204.
	Release string `json:"release,omitempty"`
	// Subject is who is limited (an API key, a user id); required, white
	// space around it trimmed, as the authorizer trims a header (see
	// rules.NormalizeTarget for these three fields).
	Subject string `json:"subject"`
	// API is the API id the rules name; required.
	API string `json:"api"`
	// Route is "METHOD /resource/{param}" as the rules name it, or "*"
	// for the API-wide rules only; required. The method is one of API
	// Gateway's (ANY included).
	Route string `json:"route"`
	// Cost is the number of tokens to spend; 0 or absent means the rules'
	// cost (1 unless a rule says otherwise).
	Cost int64 `json:"cost,omitempty"`
}

// CheckResponse is the body of a check answer (200 and 429).
type CheckResponse struct {
	Allowed bool `json:"allowed"`
	// Limit is the limiting rule's tokens per period; 0 when no rule applied.
	Limit int64 `json:"limit"`
	// Remaining is the tokens left in the limiting bucket.
	Remaining int64 `json:"remaining"`
	// Reset is the seconds until the limiting bucket is full, rounded up.
	// Deprecated: read ResetMs, in the admin API's unit and spelling.
	Reset int64 `json:"reset"`
	// RetryAfter is the seconds until the request could pass, rounded up;
	// 0 when allowed. Deprecated: read RetryAfterMs.
	RetryAfter int64 `json:"retryAfter"`
	// ResetMs and RetryAfterMs are Reset and RetryAfter in milliseconds,
	// rounded up, named as the admin API names its times (reset_ms).
	ResetMs      int64 `json:"reset_ms"`
	RetryAfterMs int64 `json:"retry_after_ms"`
	// Rule is the limiting rule's id; empty when no rule applied.
	Rule string `json:"rule,omitempty"`
	// FailOpen is set when Redis failed and the request was allowed.
	FailOpen bool `json:"failOpen,omitempty"`
	// Slot is set when an allowed check holds in-flight slots (concurrency
	// rules): send it back as {"release": slot} when the work ends. A slot
	// never released frees itself at its rule's period.
	Slot string `json:"slot,omitempty"`
}

// millis is d in whole milliseconds, rounded up; 0 for d <= 0.
func millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// CheckProblemTypeBase prefixes the type URI of the check API's problem
// documents (httpapi.Problem, the body of every 4xx); the fragment names
// the section of docs/authorizer.md that explains it.
const CheckProblemTypeBase = httpapi.DocsBase + "authorizer.md#"

// Check answers POST /check for services that are not behind API Gateway,
// with the same decision code as the authorizer. It is an http.Handler,
// which sluice local mounts; its Lambda entry (Invoke, Proxy, URL) runs
// that same handler through internal/lambdahttp. It answers whatever the
// path: the check function serves one route.
type Check struct {
	answerer
	lambda *lambdahttp.Adapter
}

// NewCheck returns the check handler around a.
func NewCheck(a *authorizer.Authorizer, o Options) *Check {
	c := &Check{answerer: newAnswerer(a, o)}
	c.lambda = lambdahttp.New(c, lambdahttp.Options{ProblemType: CheckProblemTypeBase})
	return c
}

// Proxy answers a REST API (or HTTP API payload 1.0) proxy event.
func (h *Check) Proxy(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return h.lambda.Proxy(ctx, ev)
}

// URL answers a Lambda Function URL event (also the shape of an HTTP API
// payload 2.0 event).
func (h *Check) URL(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	return h.lambda.URL(ctx, ev)
}

// Invoke makes Check a lambda.Handler taking either event: "version": "2.0"
// is a Function URL (or HTTP API) event, anything else a proxy event.
func (h *Check) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return h.lambda.Invoke(ctx, payload)
}

// ServeHTTP answers one check request: 200 or 429 with a CheckResponse,
// else a problem+json 4xx.
func (h *Check) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeProblem(w, &httpapi.Error{Status: http.StatusMethodNotAllowed, Detail: "This resource accepts only POST.",
			Header: http.Header{"Allow": {http.MethodPost}}})
		return
	}
	// One byte past the limit: ParseCheckRequest then says it is too long.
	raw, err := io.ReadAll(io.LimitReader(r.Body, MaxCheckBody+1))
	if err != nil {
		var he *httpapi.Error
		if !errors.As(err, &he) { // else a body the adapter could not decode
			he = &httpapi.Error{Status: http.StatusBadRequest, Detail: "The request body could not be read.", Err: err}
		}
		writeProblem(w, he)
		return
	}
	req, err := ParseCheckRequest(raw)
	if err != nil {
		writeProblem(w, err)
		return
	}
	if req.Release != "" {
		h.release(w, r, req.Release)
		return
	}
	ar := req.Request()
	// The subject is given, so decide never reports a missing one.
	res, _ := h.decide(r.Context(), &ar)

	out, _ := json.Marshal(CheckResponse{
		Allowed:      res.Allowed,
		Limit:        res.Limit,
		Remaining:    res.Remaining,
		Reset:        authorizer.Seconds(res.Reset),
		RetryAfter:   authorizer.Seconds(res.RetryAfter),
		ResetMs:      millis(res.Reset),
		RetryAfterMs: millis(res.RetryAfter),
		Rule:         res.Rule,
		FailOpen:     res.FailOpen,
		Slot:         res.Slots.Token(),
	})
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	edge.SetFields(hdr, &res, h.headers, time.Now())
	status := http.StatusOK
	if !res.Allowed {
		status = http.StatusTooManyRequests
	}
	w.WriteHeader(status)
	w.Write(out) //nolint:errcheck // the client has gone
}

// release frees the in-flight slots of token: 204, or 400 when the token
// is none of this deployment's.
func (h *Check) release(w http.ResponseWriter, r *http.Request, token string) {
	s, err := h.a.ParseSlots(token)
	if err != nil {
		writeProblem(w, httpapi.BadRequest(httpapi.FieldError("release", "must be the slot of a check answer of this deployment")))
		return
	}
	h.a.Release(r.Context(), s)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// Request is the core's request of a check body, already validated
// (ParseCheckRequest): the caller names the subject, the api and the route
// ("*" for the API-wide rules only) instead of a transport carrying them.
func (r *CheckRequest) Request() authorizer.Request {
	ar := authorizer.Request{API: r.API, Subject: r.Subject, Cost: r.Cost}
	if r.Route != rules.Wildcard {
		ar.Method, ar.Resource, _ = strings.Cut(r.Route, " ")
	}
	return ar
}

// ParseCheckRequest decodes and validates a check body: a JSON object with
// subject, api and route (and optionally cost), nothing else, at most
// MaxCheckBody bytes. The body is decoded as strictly as an admin body
// (httpapi.DecodeBody: names are case-sensitive, no key twice, valid UTF-8,
// nothing after the object). The error, a 400 *httpapi.Error, lists every
// field problem at once.
func ParseCheckRequest(body []byte) (CheckRequest, error) {
	if len(body) > MaxCheckBody {
		return CheckRequest{}, &httpapi.Error{Status: http.StatusBadRequest,
			Detail: fmt.Sprintf("The request body is larger than %d bytes.", MaxCheckBody)}
	}
	var r CheckRequest
	problems, err := httpapi.DecodeBody(body, &r)
	if err != nil {
		return CheckRequest{}, err
	}
	if err := httpapi.WithValidation(problems, r.validate); err != nil {
		return CheckRequest{}, err
	}
	return r, nil
}

// validate normalizes the subject, api and route as every entry does
// (rules.NormalizeTarget: " S " is the subject S, "get /x/" the route
// "GET /x") and says what is wrong with each field, as a
// *rules.ValidationError.
func (r *CheckRequest) validate() error {
	if r.Release != "" {
		if r.Subject != "" || r.API != "" || r.Route != "" || r.Cost != 0 {
			return &rules.ValidationError{Fields: []rules.FieldError{httpapi.FieldError("release", "must be alone in the body: a release checks nothing")}}
		}
		return nil
	}
	t, err := rules.NormalizeTarget(rules.Target{Subject: r.Subject, API: r.API, Route: r.Route}, rules.PartSubject|rules.PartAPI|rules.PartRoute)
	r.Subject, r.API, r.Route = t.Subject, t.API, t.Route
	var fs []rules.FieldError
	if ve := (*rules.ValidationError)(nil); errors.As(err, &ve) {
		fs = ve.Fields
	}
	if r.Cost < 0 || r.Cost > rules.MaxCost {
		fs = append(fs, httpapi.FieldError("cost", fmt.Sprintf("must be between 1 and %d, or absent", rules.MaxCost)))
	}
	if len(fs) > 0 {
		return &rules.ValidationError{Fields: fs}
	}
	return nil
}

// writeProblem answers err (an *httpapi.Error, else a 500) with a
// problem+json document.
func writeProblem(w http.ResponseWriter, err error) {
	status, h, body := httpapi.Render(CheckProblemTypeBase, err)
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client has gone
}
