// Package lambdahttp serves an http.Handler to Lambda: an API Gateway REST
// API proxy event (or HTTP API payload 1.0) or a Function URL event (the
// shape of HTTP API payload 2.0) becomes an *http.Request, and what the
// handler writes becomes the proxy response. The admin and check Lambdas
// run their http.Handler through it, and sluice local mounts the same
// handlers on its net/http server, so both run one path.
//
// It is the idea of awslabs/aws-lambda-go-api-proxy's httpadapter and
// aws-lambda-go's lambdaurl, written small for what Sluice needs: the
// path is built from the resource template and the raw path parameters
// (so a custom domain's base path never reaches the router), a base64 body
// is decoded as the handler reads it (so an oversized one costs only what
// the handler's limit reads), and a malformed event answers a problem+json
// 400 rather than a Lambda error the gateway turns into a bare 502.
package lambdahttp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/httpapi"
)

// Options configure an Adapter. The zero value is usable.
type Options struct {
	// Resource, when set, is the resource template ("/plans/{name}") the
	// request path is built from, with the event's path parameters,
	// whatever resource the event names: a function that serves one route
	// so answers it under any base path or resource name. Default: the
	// event's resource, else its path.
	Resource string
	// ProblemType is the problem type base of the 400 a malformed event
	// gets (httpapi.Render); default httpapi.TypeBase.
	ProblemType string
}

// Adapter runs an http.Handler for Lambda events. It is safe for
// concurrent use.
type Adapter struct {
	h           http.Handler
	resource    string
	problemType string
}

// New returns the Adapter serving h.
func New(h http.Handler, o Options) *Adapter {
	if o.ProblemType == "" {
		o.ProblemType = httpapi.TypeBase
	}
	return &Adapter{h: h, resource: o.Resource, problemType: o.ProblemType}
}

type ctxKey struct{}

// Caller names the IAM caller of a request that came through Proxy: the
// identity's user ARN, else its caller, else "" (also for a request that
// did not come through Proxy).
func Caller(r *http.Request) string {
	rc, ok := r.Context().Value(ctxKey{}).(*events.APIGatewayProxyRequestContext)
	if !ok {
		return ""
	}
	if rc.Identity.UserArn != "" {
		return rc.Identity.UserArn
	}
	return rc.Identity.Caller
}

// RequestID is the gateway's request id of a request that came through
// Proxy, else its X-Request-Id header.
func RequestID(r *http.Request) string {
	if rc, ok := r.Context().Value(ctxKey{}).(*events.APIGatewayProxyRequestContext); ok && rc.RequestID != "" {
		return rc.RequestID
	}
	return r.Header.Get("X-Request-Id")
}

// Proxy answers a REST API (or HTTP API payload 1.0) proxy event. It never
// returns an error: a malformed event is a 400 problem.
func (a *Adapter) Proxy(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	w := a.serve(a.proxyRequest(ctx, &ev))
	body, b64 := w.body()
	return events.APIGatewayProxyResponse{StatusCode: w.status, Headers: flatHeader(w.header), Body: body, IsBase64Encoded: b64}, nil
}

// URL answers a Lambda Function URL event (the shape of an HTTP API
// payload 2.0 event). It never returns an error.
func (a *Adapter) URL(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	w := a.serve(a.urlRequest(ctx, &ev))
	var cookies []string
	if c := w.header.Values("Set-Cookie"); len(c) > 0 {
		cookies = c
		w.header.Del("Set-Cookie")
	}
	body, b64 := w.body()
	return events.LambdaFunctionURLResponse{StatusCode: w.status, Headers: flatHeader(w.header), Body: body, IsBase64Encoded: b64, Cookies: cookies}, nil
}

// serve runs the handler on r, or answers err's problem when the event
// did not make a request.
func (a *Adapter) serve(r *http.Request, err error) *responseWriter {
	w := &responseWriter{header: http.Header{}, status: http.StatusOK}
	if err != nil {
		w.problem(a.problemType, err)
	} else {
		a.h.ServeHTTP(w, r)
	}
	return w
}

// Invoke makes the Adapter a lambda.Handler taking either event: a payload
// with "version": "2.0" is a Function URL (or HTTP API 2.0) event,
// anything else a proxy event. Only a payload that is not an event's JSON
// fails.
func (a *Adapter) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var probe struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(payload, &probe); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	if probe.Version == "2.0" {
		var ev events.LambdaFunctionURLRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("decode Function URL event: %w", err)
		}
		resp, _ := a.URL(ctx, ev)
		return json.Marshal(resp)
	}
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("decode proxy event: %w", err)
	}
	resp, _ := a.Proxy(ctx, ev)
	return json.Marshal(resp)
}

func (a *Adapter) proxyRequest(ctx context.Context, ev *events.APIGatewayProxyRequest) (*http.Request, error) {
	u := &url.URL{}
	tmpl := a.resource
	if tmpl == "" {
		tmpl = ev.Resource
	}
	if raw, ok, err := fillTemplate(tmpl, ev.PathParameters); err != nil {
		return nil, err
	} else if ok {
		u.RawPath = raw
		u.Path, _ = url.PathUnescape(raw) // checked by fillTemplate
		if u.RawPath == u.Path {
			u.RawPath = ""
		}
	} else {
		u.Path = ev.Path
	}
	if !strings.HasPrefix(u.Path, "/") {
		u.Path, u.RawPath = "/"+u.Path, ""
	}
	if len(ev.QueryStringParameters) > 0 || len(ev.MultiValueQueryStringParameters) > 0 {
		q := url.Values{}
		for k, v := range ev.QueryStringParameters {
			q.Set(k, v)
		}
		maps.Copy(q, ev.MultiValueQueryStringParameters)
		u.RawQuery = q.Encode()
	}

	// API Gateway fills both maps, and the multi-value one is complete:
	// a single value is read only for a header it lacks. The event's
	// value slices become the request's as they are (handlers read
	// request headers, never write into them), so a header costs no
	// allocation of its own.
	h := make(http.Header, max(len(ev.MultiValueHeaders), len(ev.Headers)))
	for k, vs := range ev.MultiValueHeaders {
		h[http.CanonicalHeaderKey(k)] = vs
	}
	for k, v := range ev.Headers {
		if ck := http.CanonicalHeaderKey(k); h[ck] == nil {
			h[ck] = []string{v}
		}
	}
	rc := ev.RequestContext
	r := newRequest(context.WithValue(ctx, ctxKey{}, &rc), strings.ToUpper(ev.HTTPMethod), u, h, ev.Body, ev.IsBase64Encoded)
	r.RemoteAddr = ev.RequestContext.Identity.SourceIP
	return r, nil
}

func (a *Adapter) urlRequest(ctx context.Context, ev *events.LambdaFunctionURLRequest) (*http.Request, error) {
	raw := ev.RawPath
	if raw == "" {
		raw = "/"
	}
	p, err := url.PathUnescape(raw)
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusBadRequest, Detail: "The request path is not valid percent-encoding.", Err: err}
	}
	u := &url.URL{Path: p, RawPath: raw, RawQuery: ev.RawQueryString}
	if u.RawPath == u.Path {
		u.RawPath = ""
	}
	h := make(http.Header, len(ev.Headers)+1)
	for k, v := range ev.Headers {
		// Payload 2.0 joins repeated headers with commas.
		h.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		h.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	r := newRequest(ctx, strings.ToUpper(ev.RequestContext.HTTP.Method), u, h, ev.Body, ev.IsBase64Encoded)
	r.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	return r, nil
}

func newRequest(ctx context.Context, method string, u *url.URL, h http.Header, body string, b64 bool) *http.Request {
	r := &http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       h.Get("Host"),
		RequestURI: u.RequestURI(),
	}
	switch {
	case body == "":
		r.Body = http.NoBody
	case b64:
		// Decoded as it is read: the handler's own limit bounds the work,
		// and bad base64 surfaces as the read's error.
		r.Body = io.NopCloser(&base64Body{d: base64.NewDecoder(base64.RawStdEncoding, strings.NewReader(strings.TrimRight(body, "=")))})
		r.ContentLength = -1
	default:
		r.Body = io.NopCloser(strings.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	// The one way to set a request's context: ctx carries all it needs.
	return r.WithContext(ctx)
}

// ErrBadBase64 is the error reading a body gives when the event marks it
// base64-encoded and it is not: a 400 for the handler to answer.
var ErrBadBase64 = &httpapi.Error{Status: http.StatusBadRequest,
	Detail: "The request body is marked base64-encoded but is not valid base64."}

type base64Body struct{ d io.Reader }

func (b *base64Body) Read(p []byte) (int, error) {
	n, err := b.d.Read(p)
	if err != nil && err != io.EOF {
		e := *ErrBadBase64
		e.Err = err
		return n, &e
	}
	return n, err
}

// fillTemplate puts the raw (percent-encoded, as API Gateway passes them)
// path parameters into the resource template and returns the escaped
// path; ok is false when tmpl is empty or names a parameter params lacks.
// A greedy {name+} takes its value whole, slashes included.
func fillTemplate(tmpl string, params map[string]string) (string, bool, error) {
	if tmpl == "" {
		return "", false, nil
	}
	var b strings.Builder
	n := len(tmpl)
	for _, v := range params {
		n += len(v)
	}
	b.Grow(n) // one allocation, unless a value has a slash to escape
	first := true
	for seg := range strings.SplitSeq(tmpl, "/") {
		if !first {
			b.WriteByte('/')
		}
		first = false
		name, ok := strings.CutPrefix(seg, "{")
		if !ok || !strings.HasSuffix(name, "}") {
			b.WriteString(seg)
			continue
		}
		name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "+")
		v, ok := params[name]
		if !ok {
			return "", false, nil
		}
		if _, err := url.PathUnescape(v); err != nil {
			return "", false, httpapi.BadRequest(httpapi.FieldError(name, "is not valid percent-encoding"))
		}
		if !strings.HasSuffix(seg, "+}") {
			// One segment: a raw slash in it would split it.
			v = strings.ReplaceAll(v, "/", "%2F")
		}
		b.WriteString(v)
	}
	return b.String(), true, nil
}

// responseWriter collects what the handler writes.
type responseWriter struct {
	header http.Header
	status int
	buf    strings.Builder // its String is the response body without a copy
	wrote  bool
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.buf.Write(p)
}

func (w *responseWriter) problem(typeBase string, err error) {
	status, h, body := httpapi.Render(typeBase, err)
	maps.Copy(w.header, h)
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // a buffer
}

// flatHeader joins each header's values with ", ", as API Gateway's
// single-value headers map takes them.
func flatHeader(header http.Header) map[string]string {
	h := make(map[string]string, len(header))
	for k, v := range header {
		h[k] = strings.Join(v, ", ")
	}
	return h
}

// body is the response body, base64-encoded when it is not UTF-8 text.
func (w *responseWriter) body() (string, bool) {
	b := w.buf.String()
	if utf8.ValidString(b) {
		return b, false
	}
	return base64.StdEncoding.EncodeToString([]byte(b)), true
}
