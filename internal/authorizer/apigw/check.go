package apigw

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/rules"
)

// MaxCheckBody is the largest check request body accepted, in bytes.
const MaxCheckBody = 8 << 10

// CheckRequest is the body of POST /check.
type CheckRequest struct {
	// Subject is who is limited (an API key, a user id); required.
	Subject string `json:"subject"`
	// API is the API id the rules name; required.
	API string `json:"api"`
	// Route is "METHOD /resource/{param}" as the rules name it, or "*"
	// for the API-wide rules only; required.
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

// Problem is an RFC 9457 problem detail, the body of every 4xx.
type Problem struct {
	Type   string             `json:"type"`
	Title  string             `json:"title"`
	Status int                `json:"status"`
	Detail string             `json:"detail,omitempty"`
	Errors []rules.FieldError `json:"errors,omitempty"`
}

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
		hdr, b := problem(http.StatusMethodNotAllowed, "method not allowed", "use POST", nil)
		hdr["Allow"] = http.MethodPost
		return http.StatusMethodNotAllowed, hdr, b
	}
	raw := []byte(body)
	if b64 {
		var err error
		if raw, err = base64.StdEncoding.DecodeString(body); err != nil {
			hdr, b := problem(http.StatusBadRequest, "bad request body", "the body is not valid base64", nil)
			return http.StatusBadRequest, hdr, b
		}
	}
	req, perr := ParseCheckRequest(raw)
	if perr != nil {
		hdr, b := problem(http.StatusBadRequest, "invalid check request", perr.detail, perr.fields)
		return http.StatusBadRequest, hdr, b
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
		hdr["RateLimit-Policy"] = res.Policy()
		hdr["RateLimit"] = string(res.AppendRateLimit(nil))
	}
	if !res.Allowed {
		hdr["Retry-After"] = strconv.FormatInt(authorizer.Seconds(res.RetryAfter), 10)
		return http.StatusTooManyRequests, hdr, out
	}
	return http.StatusOK, hdr, out
}

// checkError says what is wrong with a check request.
type checkError struct {
	detail string
	fields []rules.FieldError
}

func (e *checkError) Error() string { return e.detail }

// ParseCheckRequest decodes and validates a check body: a JSON object with
// subject, api and route (and optionally cost), nothing else, at most
// MaxCheckBody bytes. Every field problem is reported.
func ParseCheckRequest(body []byte) (CheckRequest, *checkError) {
	var r CheckRequest
	if len(body) > MaxCheckBody {
		return r, &checkError{detail: fmt.Sprintf("the body is larger than %d bytes", MaxCheckBody)}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, &checkError{detail: "the body is not a valid check request: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return r, &checkError{detail: "the body holds more than one JSON value"}
	}
	var fs []rules.FieldError
	switch {
	case strings.TrimSpace(r.Subject) == "":
		fs = append(fs, rules.FieldError{Field: "subject", Reason: "required"})
	case len(r.Subject) > 1024:
		fs = append(fs, rules.FieldError{Field: "subject", Reason: "at most 1024 bytes"})
	}
	switch {
	case r.API == "":
		fs = append(fs, rules.FieldError{Field: "api", Reason: "required"})
	case len(r.API) > 128 || strings.ContainsAny(r.API, " \t\r\n"):
		fs = append(fs, rules.FieldError{Field: "api", Reason: "at most 128 bytes, no spaces"})
	}
	if reason := rules.RouteProblem(r.Route); reason != "" {
		fs = append(fs, rules.FieldError{Field: "route", Reason: reason})
	}
	if r.Cost < 0 || r.Cost > rules.MaxCost {
		fs = append(fs, rules.FieldError{Field: "cost", Reason: fmt.Sprintf("must be between 1 and %d, or absent", rules.MaxCost)})
	}
	if len(fs) > 0 {
		return r, &checkError{detail: fs[0].Field + ": " + fs[0].Reason, fields: fs}
	}
	return r, nil
}

// problem returns the headers and body of a problem+json answer.
func problem(status int, title, detail string, fields []rules.FieldError) (map[string]string, []byte) {
	b, _ := json.Marshal(Problem{Type: "about:blank", Title: title, Status: status, Detail: detail, Errors: fields})
	return map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store"}, b
}
