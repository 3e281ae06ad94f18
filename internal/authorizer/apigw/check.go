package apigw

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
)

// MaxCheckBody is the largest check request body accepted, in bytes.
const MaxCheckBody = 8 << 10

// CheckRequest is the body of POST /check.
type CheckRequest struct {
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
	Reset int64 `json:"reset"`
	// RetryAfter is the seconds until the request could pass, rounded up;
	// 0 when allowed.
	RetryAfter int64 `json:"retryAfter"`
	// Rule is the limiting rule's id; empty when no rule applied.
	Rule string `json:"rule,omitempty"`
	// FailOpen is set when Redis failed and the request was allowed.
	FailOpen bool `json:"failOpen,omitempty"`
}

// CheckProblemTypeBase prefixes the type URI of the check API's problem
// documents (httpapi.Problem, the body of every 4xx); the fragment names
// the section of docs/authorizer.md that explains it.
const CheckProblemTypeBase = httpapi.DocsBase + "authorizer.md#"

// Check answers POST /check for services that are not behind API Gateway,
// with the same decision code as the authorizer.
type Check struct{ handler }

// NewCheck returns the check handler around a.
func NewCheck(a *authorizer.Authorizer, o Options) *Check {
	return &Check{newHandler(a, o)}
}

// Proxy answers a REST API (or HTTP API payload 1.0) proxy event.
func (h *Check) Proxy(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	status, hdr, body := h.Serve(ctx, ev.HTTPMethod, ev.Body, ev.IsBase64Encoded)
	return events.APIGatewayProxyResponse{StatusCode: status, Headers: hdr, Body: string(body)}, nil
}

// URL answers a Lambda Function URL event (also the shape of an HTTP API
// payload 2.0 event).
func (h *Check) URL(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	status, hdr, body := h.Serve(ctx, ev.RequestContext.HTTP.Method, ev.Body, ev.IsBase64Encoded)
	return events.LambdaFunctionURLResponse{StatusCode: status, Headers: hdr, Body: string(body)}, nil
}

// Invoke makes Check a lambda.Handler taking either event: "version": "2.0"
// is a Function URL (or HTTP API) event, anything else a proxy event.
func (h *Check) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var probe struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(payload, &probe); err != nil {
		return nil, fmt.Errorf("decode check event: %w", err)
	}
	if probe.Version == "2.0" {
		var ev events.LambdaFunctionURLRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("decode Function URL event: %w", err)
		}
		resp, _ := h.URL(ctx, ev)
		return json.Marshal(resp)
	}
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("decode proxy event: %w", err)
	}
	resp, _ := h.Proxy(ctx, ev)
	return json.Marshal(resp)
}

// Serve answers one check request given its method and body (base64 when
// b64): the status, the headers and the JSON body. The local gateway calls
// it directly.
func (h *Check) Serve(ctx context.Context, method, body string, b64 bool) (int, map[string]string, []byte) {
	if method != http.MethodPost {
		return problem(&httpapi.Error{Status: http.StatusMethodNotAllowed, Detail: "This resource accepts only POST.",
			Header: http.Header{"Allow": {http.MethodPost}}})
	}
	raw := []byte(body)
	if b64 {
		var err error
		if raw, err = base64.StdEncoding.DecodeString(body); err != nil {
			return problem(&httpapi.Error{Status: http.StatusBadRequest,
				Detail: "The request body is marked base64-encoded but is not valid base64.", Err: err})
		}
	}
	req, err := ParseCheckRequest(raw)
	if err != nil {
		return problem(err)
	}
	ar := authorizer.Request{API: req.API, Subject: req.Subject, Cost: req.Cost}
	if req.Route != rules.Wildcard {
		ar.Method, ar.Resource, _ = strings.Cut(req.Route, " ")
	}
	// The subject is given, so decide never reports a missing one.
	res, _ := h.decide(ctx, &ar)

	out, _ := json.Marshal(CheckResponse{
		Allowed:    res.Allowed,
		Limit:      res.Limit,
		Remaining:  res.Remaining,
		Reset:      authorizer.Seconds(res.Reset),
		RetryAfter: authorizer.Seconds(res.RetryAfter),
		Rule:       res.Rule,
		FailOpen:   res.FailOpen,
	})
	hdr := map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"}
	if res.Effective != nil {
		// The fields of the chosen dialects, from the values an authorizer
		// puts in its context, so that both say the same.
		ctxv := h.contextValues(&res)
		for _, f := range h.headers.Fields() {
			hdr[f.Name] = fmt.Sprint(ctxv[f.Key])
		}
	}
	if !res.Allowed {
		hdr["Retry-After"] = strconv.FormatInt(authorizer.Seconds(res.RetryAfter), 10)
		return http.StatusTooManyRequests, hdr, out
	}
	return http.StatusOK, hdr, out
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

// problem answers err (an *httpapi.Error, else a 500) with a problem+json
// document, headers flattened for API Gateway.
func problem(err error) (int, map[string]string, []byte) {
	status, h, body := httpapi.Render(CheckProblemTypeBase, err)
	hdr := make(map[string]string, len(h))
	for k, v := range h {
		hdr[k] = strings.Join(v, ", ")
	}
	return status, hdr, body
}
