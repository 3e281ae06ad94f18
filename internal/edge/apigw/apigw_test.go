package apigw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/stats"
)

// fixture is the adapters over real Redis with two rules on API a1b2c3: 100
// a minute API-wide, 2 a minute on GET /orders/{id}.
type fixture struct {
	auth  *apigw.Handler
	check *apigw.Check
	logs  *bytes.Buffer
	emf   *bytes.Buffer
	m     *metrics.Metrics
	stats *stats.Stats
	a     *authorizer.Authorizer // the decision auth and check share
	lim   *limiter.Limiter
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	return newFixtureWith(t, authorizer.Options{})
}

// newFixtureWith is newFixture with the decision's options ao (its subject
// sources).
func newFixtureWith(t *testing.T, ao authorizer.Options) fixture {
	t.Helper()
	f := fixture{logs: &bytes.Buffer{}, emf: &bytes.Buffer{}, lim: redisLimiter(t, "apigw")}
	f.m = metrics.New(metrics.Options{W: f.emf, Function: "test", Interval: time.Hour})
	f.stats = newStats()
	ao.Logger, ao.Metrics, ao.Stats = jsonLog(f.logs), f.m, f.stats
	a := decision(f.lim, ao, shopRules(100, 2, time.Minute)...)
	f.a = a
	o := apigw.Options{Logger: ao.Logger, Metrics: f.m}
	f.auth = apigw.NewHandler(a, o)
	f.check = apigw.NewCheck(a, o)
	return f
}

const methodARN = "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3/prod/GET/orders/42"

func restEvent(key string) events.APIGatewayCustomAuthorizerRequestTypeRequest {
	return events.APIGatewayCustomAuthorizerRequestTypeRequest{
		Type: "REQUEST", MethodArn: methodARN, Resource: "/orders/{id}", Path: "/orders/42", HTTPMethod: "GET",
		Headers: map[string]string{"X-Api-Key": key},
		RequestContext: events.APIGatewayCustomAuthorizerRequestTypeRequestContext{
			APIID: "a1b2c3", HTTPMethod: "GET", ResourcePath: "/orders/{id}",
			Identity: events.APIGatewayCustomAuthorizerRequestTypeRequestIdentity{SourceIP: "203.0.113.9"},
		},
	}
}

func TestREST(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	wantPolicy := func(effect string) events.APIGatewayCustomAuthorizerPolicy {
		return events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
			{Action: []string{"execute-api:Invoke"}, Effect: effect, Resource: []string{methodARN}},
		}}
	}
	var got []events.APIGatewayCustomAuthorizerResponse
	for range 3 {
		resp, err := f.auth.REST(ctx, restEvent("key-1"))
		if err != nil {
			t.Fatalf("REST() error: %v", err)
		}
		got = append(got, resp)
	}
	want := []events.APIGatewayCustomAuthorizerResponse{
		{PrincipalID: limiter.SubjectHash("key-1"), PolicyDocument: wantPolicy("Allow"), Context: map[string]any{
			"limit": int64(2), "remaining": int64(1), "reset": int64(30), "retryAfter": int64(0),
			"rateLimitPolicy": `"r-api";q=100;w=60, "r-order";q=2;w=60`, "rateLimit": `"r-order";r=1;t=30`, "rule": "r-order", "failOpen": false}},
		{PrincipalID: limiter.SubjectHash("key-1"), PolicyDocument: wantPolicy("Allow"), Context: map[string]any{
			"limit": int64(2), "remaining": int64(0), "reset": int64(60), "retryAfter": int64(0),
			"rateLimitPolicy": `"r-api";q=100;w=60, "r-order";q=2;w=60`, "rateLimit": `"r-order";r=0;t=60`, "rule": "r-order", "failOpen": false}},
		{PrincipalID: limiter.SubjectHash("key-1"), PolicyDocument: wantPolicy("Deny"), Context: map[string]any{
			"limit": int64(2), "remaining": int64(0), "reset": int64(60), "retryAfter": int64(30),
			"rateLimitPolicy": `"r-api";q=100;w=60, "r-order";q=2;w=60`, "rateLimit": `"r-order";r=0;t=60`, "rule": "r-order", "failOpen": false}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("REST() x3 mismatch (-want +got):\n%s", diff)
	}
	for i, allowed := range []bool{true, true, false} {
		if e := apigw.Evaluate(got[i].PolicyDocument, methodARN); e != allowed {
			t.Errorf("Evaluate(response %d) = %v, want %v", i, e, allowed)
		}
	}

	// No subject: the exact error API Gateway turns into 401.
	ev := restEvent("")
	delete(ev.Headers, "X-Api-Key")
	if _, err := f.auth.REST(ctx, ev); err == nil || err.Error() != "Unauthorized" {
		t.Errorf("REST(no subject) error = %v, want Unauthorized", err)
	}

	// The metrics saw two allows, a deny and an unauthorized.
	f.m.Flush()
	var outcomes []string
	for _, l := range emfLines[struct {
		Outcome   string
		Decisions int
	}](t, f.emf) {
		if l.v.Outcome != "" {
			outcomes = append(outcomes, l.v.Outcome+"="+strings.Repeat("i", l.v.Decisions))
		}
	}
	if diff := cmp.Diff([]string{"allow=ii", "deny=i", "unauthorized=i"}, outcomes); diff != "" {
		t.Errorf("EMF decisions mismatch (-want +got):\n%s", diff)
	}
}

func TestHTTPAndInvoke(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ev := events.APIGatewayV2CustomAuthorizerV2Request{
		Version: "2.0", Type: "REQUEST", RouteArn: "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3/$default/GET/orders/42",
		RouteKey: "ANY /orders/{id}", RawPath: "/orders/42",
		Headers: map[string]string{"x-api-key": "key-2"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{APIID: "a1b2c3",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/orders/42", SourceIP: "203.0.113.9"}},
	}
	payload, _ := json.Marshal(ev)
	var got []bool
	for range 3 {
		out, err := f.auth.Invoke(context.Background(), payload)
		if err != nil {
			t.Fatalf("Invoke(HTTP API event) error: %v", err)
		}
		var resp events.APIGatewayV2CustomAuthorizerSimpleResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("Invoke reply %s: %v", out, err)
		}
		if resp.Context["rule"] != "r-order" {
			t.Errorf("Invoke reply context rule = %v, want r-order (the route key's ANY resolved to GET)", resp.Context["rule"])
		}
		got = append(got, resp.IsAuthorized)
	}
	if diff := cmp.Diff([]bool{true, true, false}, got); diff != "" {
		t.Errorf("isAuthorized x3 mismatch (-want +got):\n%s", diff)
	}

	// A REST event through Invoke.
	payload, _ = json.Marshal(restEvent("key-3"))
	out, err := f.auth.Invoke(context.Background(), payload)
	if err != nil {
		t.Fatalf("Invoke(REST event) error: %v", err)
	}
	var resp events.APIGatewayCustomAuthorizerResponse
	if err := json.Unmarshal(out, &resp); err != nil || !apigw.Evaluate(resp.PolicyDocument, methodARN) {
		t.Errorf("Invoke(REST event) = %s, %v; want an Allow policy", out, err)
	}
	if _, err := f.auth.Invoke(context.Background(), []byte(`{"type":"TOKEN","authorizationToken":"x"}`)); err == nil {
		t.Error("Invoke(TOKEN event) = no error, want unsupported")
	}
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	st := func(effect string, actions, resources []string) events.IAMPolicyStatement {
		return events.IAMPolicyStatement{Effect: effect, Action: actions, Resource: resources}
	}
	invoke := []string{"execute-api:Invoke"}
	tests := []struct {
		name string
		p    []events.IAMPolicyStatement
		want bool
	}{
		{"exact allow", []events.IAMPolicyStatement{st("Allow", invoke, []string{methodARN})}, true},
		{"exact deny", []events.IAMPolicyStatement{st("Deny", invoke, []string{methodARN})}, false},
		{"no statement", nil, false},
		{"other resource", []events.IAMPolicyStatement{st("Allow", invoke, []string{methodARN + "/x"})}, false},
		{"wildcard stage", []events.IAMPolicyStatement{st("Allow", invoke, []string{"arn:aws:execute-api:eu-west-1:123456789012:a1b2c3/*/GET/*"})}, true},
		{"question mark", []events.IAMPolicyStatement{st("Allow", invoke, []string{"arn:aws:execute-api:eu-west-1:123456789012:a1b2c3/prod/GET/orders/4?"})}, true},
		{"action wildcard, any case", []events.IAMPolicyStatement{st("Allow", []string{"Execute-API:*"}, []string{"*"})}, true},
		{"other action", []events.IAMPolicyStatement{st("Allow", []string{"s3:GetObject"}, []string{"*"})}, false},
		{"deny wins", []events.IAMPolicyStatement{st("Allow", invoke, []string{"*"}), st("Deny", invoke, []string{"arn:aws:execute-api:*:*:a1b2c3/*"})}, false},
		{"case-sensitive resource", []events.IAMPolicyStatement{st("Allow", invoke, []string{strings.ToUpper(methodARN)})}, false},
	}
	for _, tc := range tests {
		got := apigw.Evaluate(events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: tc.p}, methodARN)
		if got != tc.want {
			t.Errorf("Evaluate(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	body := `{"subject":"svc-1","api":"a1b2c3","route":"GET /orders/{id}"}`
	type answer struct {
		Status  int
		Headers map[string]string
		Body    map[string]any
	}
	call := func(method, body string) answer {
		resp, err := f.check.Proxy(ctx, events.APIGatewayProxyRequest{HTTPMethod: method, Body: body, Resource: "/check", Path: "/check"})
		if err != nil {
			t.Fatalf("Proxy() error: %v", err)
		}
		var b map[string]any
		if err := json.Unmarshal([]byte(resp.Body), &b); err != nil {
			t.Fatalf("Proxy() body %q: %v", resp.Body, err)
		}
		return answer{resp.StatusCode, resp.Headers, b}
	}
	// millis checks reset_ms and retry_after_ms are within the second
	// before reset and retryAfter (Redis's clock moved meanwhile), then
	// sets them to those seconds, for the comparisons below.
	millis := func(a answer) answer {
		t.Helper()
		for ms, s := range map[string]string{"reset_ms": "reset", "retry_after_ms": "retryAfter"} {
			v, ok := a.Body[ms].(float64)
			sec, _ := a.Body[s].(float64)
			if !ok || v > sec*1000 || v <= (sec-1)*1000 {
				t.Errorf("%s = %v, want within the second before %s %v", ms, v, s, sec)
			}
			a.Body[ms] = sec * 1000
		}
		return a
	}
	json200 := map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store",
		"RateLimit-Policy": `"r-api";q=100;w=60, "r-order";q=2;w=60`, "RateLimit": `"r-order";r=1;t=30`}
	if diff := cmp.Diff(answer{200, json200, map[string]any{
		"allowed": true, "limit": 2.0, "remaining": 1.0, "reset": 30.0, "retryAfter": 0.0, "rule": "r-order",
		"reset_ms": 30000.0, "retry_after_ms": 0.0,
	}}, millis(call("POST", body))); diff != "" {
		t.Errorf("check 1 mismatch (-want +got):\n%s", diff)
	}
	call("POST", body)
	if diff := cmp.Diff(answer{429, map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store",
		"RateLimit-Policy": `"r-api";q=100;w=60, "r-order";q=2;w=60`, "RateLimit": `"r-order";r=0;t=60`, "Retry-After": "30"}, map[string]any{
		"allowed": false, "limit": 2.0, "remaining": 0.0, "reset": 60.0, "retryAfter": 30.0, "rule": "r-order",
		"reset_ms": 60000.0, "retry_after_ms": 30000.0,
	}}, millis(call("POST", body))); diff != "" {
		t.Errorf("check 3 mismatch (-want +got):\n%s", diff)
	}

	bad := []struct {
		name, body string
		b64        bool
		fields     []string // the field problems, in order; nil for a body-wide problem
	}{
		{"not json", "{", false, nil},
		{"empty", "", false, nil},
		{"null", "null", false, nil},
		{"array", `[{"subject":"s","api":"a","route":"*"}]`, false, nil},
		{"unknown field", `{"subject":"s","api":"a","route":"*","extra":1}`, false, []string{"extra"}},
		{"field in another case", `{"Subject":"s","api":"a","route":"*"}`, false, []string{"Subject", "subject"}},
		{"duplicate key", `{"subject":"s","api":"a","route":"*","subject":"t"}`, false, []string{"subject"}},
		{"wrong type", `{"subject":"s","api":"a","route":"*","cost":"2"}`, false, []string{"cost"}},
		{"fractional cost", `{"subject":"s","api":"a","route":"*","cost":1.5}`, false, []string{"cost"}},
		{"invalid UTF-8", "{\"subject\":\"\xff\",\"api\":\"a\",\"route\":\"*\"}", false, nil},
		{"missing subject", `{"api":"a","route":"*"}`, false, []string{"subject"}},
		{"blank subject", `{"subject":" ","api":"a","route":"*"}`, false, []string{"subject"}},
		{"missing api", `{"subject":"s","route":"*"}`, false, []string{"api"}},
		{"api with a space", `{"subject":"s","api":"a b","route":"*"}`, false, []string{"api"}},
		{"bad route", `{"subject":"s","api":"a","route":"get orders"}`, false, []string{"route"}},
		{"route no rule can name", `{"subject":"s","api":"a","route":"GET /orders//{id"}`, false, []string{"route"}},
		{"negative cost", `{"subject":"s","api":"a","route":"*","cost":-1}`, false, []string{"cost"}},
		{"everything wrong", `{"api":"","route":"x","cost":-1,"extra":true}`, false, []string{"extra", "subject", "api", "route", "cost"}},
		{"two values", `{"subject":"s","api":"a","route":"*"} {}`, false, nil},
		{"huge", `{"subject":"` + strings.Repeat("x", apigw.MaxCheckBody) + `","api":"a","route":"*"}`, false, nil},
		{"bad base64", "not base64!", true, nil},
	}
	for _, tc := range bad {
		resp, err := f.check.Proxy(ctx, events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: tc.body, IsBase64Encoded: tc.b64})
		if err != nil {
			t.Fatalf("Proxy(%s) error: %v", tc.name, err)
		}
		p := wantCheckProblem(t, tc.name, resp, 400)
		var fields []string
		for _, fe := range p.Errors {
			fields = append(fields, fe.Field)
		}
		if diff := cmp.Diff(tc.fields, fields); diff != "" {
			t.Errorf("check(%s) field problems mismatch (-want +got):\n%s\nproblem: %+v", tc.name, diff, p)
		}
	}
	get, _ := f.check.Proxy(ctx, events.APIGatewayProxyRequest{HTTPMethod: "GET"})
	if p := wantCheckProblem(t, "GET", get, 405); get.Headers["Allow"] != "POST" {
		t.Errorf("check(GET) = %d %v %+v, want 405 with Allow: POST", get.StatusCode, get.Headers, p)
	}

	// A Function URL event through Invoke.
	payload, _ := json.Marshal(events.LambdaFunctionURLRequest{Version: "2.0", Body: `{"subject":"svc-2","api":"a1b2c3","route":"*","cost":5}`,
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST"}}})
	out, err := f.check.Invoke(ctx, payload)
	if err != nil {
		t.Fatalf("Invoke(Function URL event) error: %v", err)
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, `"remaining":95`) {
		t.Errorf("Invoke(Function URL event, cost 5) = %s, %v; want 200 with remaining 95", out, err)
	}
}

// wantCheckProblem checks that resp is a status problem+json answer whose
// type names a section of docs/authorizer.md, and returns the problem.
func wantCheckProblem(t *testing.T, what string, resp events.APIGatewayProxyResponse, status int) httpapi.Problem {
	t.Helper()
	wantHeader := map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store",
		"X-Content-Type-Options": "nosniff"}
	for k, v := range wantHeader {
		if resp.Headers[k] != v {
			t.Errorf("check(%s) %s = %q, want %q", what, k, resp.Headers[k], v)
		}
	}
	var p httpapi.Problem
	dec := json.NewDecoder(strings.NewReader(resp.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("check(%s) body %q: %v", what, resp.Body, err)
	}
	if resp.StatusCode != status || p.Status != status || p.Title != http.StatusText(status) || p.Detail == "" {
		t.Errorf("check(%s) = %d %+v, want %d with its title and a detail", what, resp.StatusCode, p, status)
	}
	slug, ok := strings.CutPrefix(p.Type, apigw.CheckProblemTypeBase)
	if !ok {
		t.Errorf("check(%s) type = %q, want one under %s", what, p.Type, apigw.CheckProblemTypeBase)
	}
	if !strings.Contains(authorizerDoc(t), `<a id="`+slug+`"></a>`) {
		t.Errorf("check(%s) type = %q: docs/authorizer.md has no anchor %q", what, p.Type, slug)
	}
	return p
}

func authorizerDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "authorizer.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseCheckRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body    string
		want    apigw.CheckRequest
		wantErr *httpapi.Error
	}{
		{body: `{"subject":"svc","api":"a1b2c3","route":"GET /orders/{id}","cost":3}`,
			want: apigw.CheckRequest{Subject: "svc", API: "a1b2c3", Route: "GET /orders/{id}", Cost: 3}},
		{body: ` {"route":"*","api":"a","subject":"s","cost":0} `, want: apigw.CheckRequest{Subject: "s", API: "a", Route: "*"}},
		{body: `{"route":"*","api":"a","subject":"s","cost":null}`, want: apigw.CheckRequest{Subject: "s", API: "a", Route: "*"}},
		{body: `{"Subject":"billing-service","api":"a","route":"*"}`, wantErr: httpapi.BadRequest(
			rules.FieldError{Field: "Subject", Reason: "unknown field"},
			rules.FieldError{Field: "subject", Reason: "is required"})},
		{body: `{"subject":5,"api":"a","route":"*","cost":1000001}`, wantErr: httpapi.BadRequest(
			rules.FieldError{Field: "subject", Reason: "must be a string, not number"},
			rules.FieldError{Field: "cost", Reason: "must be between 1 and 1000000, or absent"})},
		{body: `{"subject":"` + strings.Repeat("s", identity.MaxSubjectLen+1) + `","api":"` + strings.Repeat("a", 129) + `","route":"*"}`,
			wantErr: httpapi.BadRequest(
				rules.FieldError{Field: "subject", Reason: "must be at most 256 bytes"},
				rules.FieldError{Field: "api", Reason: "must be an API id of at most 128 letters, digits, '-' and '_'"})},
		// The same normalization as every entry (rules.NormalizeTarget).
		{body: `{"subject":" svc ","api":" a1b2c3 ","route":"get /orders/{id}/"}`,
			want: apigw.CheckRequest{Subject: "svc", API: "a1b2c3", Route: "GET /orders/{id}"}},
		{body: `{"subject":"s\u0000","api":"*","route":"FROB /x"}`, wantErr: httpapi.BadRequest(
			rules.FieldError{Field: "subject", Reason: "must not contain control characters"},
			rules.FieldError{Field: "api", Reason: `must name one API: "*" (every API) is for rules`},
			rules.FieldError{Field: "route", Reason: "method must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, ANY"})},
		{body: `{"subject":"s","api":"a","route":"*"}x`,
			wantErr: &httpapi.Error{Status: 400, Detail: "The request body has data after the JSON object."}},
		{body: strings.Repeat(" ", apigw.MaxCheckBody+1),
			wantErr: &httpapi.Error{Status: 400, Detail: "The request body is larger than 8192 bytes."}},
	}
	for _, tc := range tests {
		got, err := apigw.ParseCheckRequest([]byte(tc.body))
		if tc.wantErr == nil {
			if err != nil || got != tc.want {
				t.Errorf("ParseCheckRequest(%.60q) = %+v, %v; want %+v", tc.body, got, err, tc.want)
			}
			continue
		}
		var e *httpapi.Error
		if !errors.As(err, &e) {
			t.Errorf("ParseCheckRequest(%.60q) = %+v, %v; want %v", tc.body, got, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.wantErr, e, cmpopts.IgnoreFields(httpapi.Error{}, "Err")); diff != "" {
			t.Errorf("ParseCheckRequest(%.60q) error mismatch (-want +got):\n%s", tc.body, diff)
		}
	}
}

// FuzzParseCheckRequest: what ParseCheckRequest accepts is a valid request,
// and what it refuses is a 400 problem, never anything else.
func FuzzParseCheckRequest(f *testing.F) {
	for _, s := range []string{`{"subject":"s","api":"a","route":"GET /x","cost":2}`, `{}`, `{"route":"*"}`, `[]`, `{"subject":"s","api":"a","route":"ANY /x"}`,
		`{"Subject":"s","api":"a","route":"*"}`, `{"subject":"s","subject":"t"}`, `{"subject":"s","api":"a","route":"*"} {}`, "{\"subject\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := apigw.ParseCheckRequest(body)
		if err != nil {
			var e *httpapi.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Detail == "" {
				t.Fatalf("ParseCheckRequest(%q) error = %v, want a 400 *httpapi.Error", body, err)
			}
			return
		}
		if strings.TrimSpace(r.Subject) == "" || r.API == "" || r.Route == "" || r.Cost < 0 || r.Cost > rules.MaxCost {
			t.Fatalf("ParseCheckRequest(%q) accepted %+v", body, r)
		}
	})
}

func TestUnauthorizedIsBare(t *testing.T) {
	t.Parallel()
	if errors.Is(apigw.ErrUnauthorized, authorizer.ErrNoSubject) {
		t.Error("ErrUnauthorized must not wrap the domain error: API Gateway needs the bare text")
	}
}

// TestFlood: after a subject is denied, its flood is denied by the local
// deny cache, not by Redis; at most 10% of it may reach Redis.
func TestFlood(t *testing.T) {
	t.Parallel()
	s := newBenchStack(t, 10, time.Minute, 1)
	ctx := context.Background()
	ev := restEvent("flood-test-key")
	for range 10 {
		if _, err := s.h.REST(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	before := s.lim.Stats().RedisCalls
	const flood = 10_000
	for i := range flood {
		resp, err := s.h.REST(ctx, ev)
		if err != nil || resp.PolicyDocument.Statement[0].Effect != "Deny" {
			t.Fatalf("flood request %d: REST() = %+v, %v; want Deny", i, resp, err)
		}
	}
	if reached := s.lim.Stats().RedisCalls - before; reached > flood/10 {
		t.Errorf("%d of %d flood requests reached Redis, want <= 10%%", reached, flood)
	} else {
		t.Logf("%d of %d flood requests reached Redis", reached, flood)
	}
}

// TestMetricsLatencySample: with more Redis calls in an interval than an
// EMF line can carry, the latencies reported are a sample of the whole
// interval, not its first calls.
func TestMetricsLatencySample(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	m := metrics.New(metrics.Options{W: &buf, Interval: time.Hour})
	for i := 1; i <= 1000; i++ {
		m.Record(metrics.Outcome{Allowed: true, LimiterTime: time.Duration(i) * time.Millisecond})
	}
	m.Flush()
	var lat []float64
	for _, l := range emfLines[struct{ RedisLatency []float64 }](t, &buf) {
		lat = append(lat, l.v.RedisLatency...)
	}
	if len(lat) != 100 {
		t.Fatalf("RedisLatency has %d values, want 100", len(lat))
	}
	// The first 100 calls took 1..100 ms. A uniform sample of 1000 has
	// about 90 values above 100 ms; fewer than 50 has odds below 1e-30.
	late := 0
	for _, v := range lat {
		if v > 100 {
			late++
		}
	}
	if late < 50 {
		t.Errorf("RedisLatency sample has %d of 100 values from after the first 100 calls, want about 90: %v", late, lat)
	}
}

// TestMetricsEMF checks every EMF line is valid: each declared metric and
// dimension is present at the root, in namespace Sluice.
func TestMetricsEMF(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	// The limiter's lease totals at each flush: each line reports growth.
	totals := []metrics.LeaseCounts{{Leased: 10, Taken: 2}, {Leased: 25, Taken: 3, Returned: 7}}
	m := metrics.New(metrics.Options{W: &buf, Function: "fn", Interval: time.Hour,
		Gauges: func() (bool, time.Duration) { return true, 3 * time.Second },
		Leases: func() metrics.LeaseCounts {
			c := totals[0]
			totals = totals[1:]
			return c
		}})
	m.Record(metrics.Outcome{Allowed: true, LimiterTime: 1500 * time.Microsecond})
	m.Record(metrics.Outcome{Allowed: true, ShadowDenied: true, FailOpen: true})
	m.Flush()
	m.Record(metrics.Outcome{Allowed: false, Cached: true})
	m.Flush()
	var got []string
	for _, l := range emfLines[map[string]any](t, &buf) {
		line, v := l.text, l.v
		var meta struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		}
		raw, _ := json.Marshal(v["_aws"])
		if err := json.Unmarshal(raw, &meta); err != nil || len(meta.CloudWatchMetrics) != 1 || meta.CloudWatchMetrics[0].Namespace != "Sluice" {
			t.Fatalf("EMF line %q: bad _aws %s (%v)", line, raw, err)
		}
		d := meta.CloudWatchMetrics[0]
		for _, dim := range d.Dimensions[0] {
			if _, ok := v[dim]; !ok {
				t.Errorf("EMF line %q: dimension %s missing", line, dim)
			}
		}
		for _, mt := range d.Metrics {
			if _, ok := v[mt.Name]; !ok {
				t.Errorf("EMF line %q: metric %s declared but missing", line, mt.Name)
			}
			got = append(got, fmt.Sprintf("%s%v=%v", mt.Name, v["Outcome"], v[mt.Name]))
		}
	}
	want := []string{
		"Decisionsallow=1", "DecisionsshadowDeny=1",
		"FailOpen<nil>=1", "DenyCacheHits<nil>=0", "RedisLatency<nil>=[1.5]", "BreakerOpen<nil>=1", "SnapshotAgeSeconds<nil>=3",
		"LeasedAdmissions<nil>=10", "LeasesTaken<nil>=2", "LeaseTokensReturned<nil>=0",
		"Decisionsdeny=1",
		"FailOpen<nil>=0", "DenyCacheHits<nil>=1", "BreakerOpen<nil>=1", "SnapshotAgeSeconds<nil>=3",
		"LeasedAdmissions<nil>=15", "LeasesTaken<nil>=1", "LeaseTokensReturned<nil>=7",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EMF metrics mismatch (-want +got):\n%s", diff)
	}
}

// TestDecisionLog checks the line each denial writes, at info: the fields
// the stack's Contributor Insights rules key on (decision, principalId as
// the subject's hash, ruleId, api), and never the subject itself; and that
// the same decisions reach the in-process stats.
func TestDecisionLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for range 3 {
		if _, err := f.auth.REST(ctx, restEvent("secret-key-7")); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(f.logs.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("logs = %q, want one line (the denial; allowed requests log nothing)", f.logs.String())
	}
	t.Logf("decision line: %d bytes: %s", len(lines[0]), lines[0])
	if strings.Contains(lines[0], "secret-key-7") {
		t.Errorf("decision line %s holds the raw subject", lines[0])
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &v); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"level": "INFO", "decision": authorizer.DecisionDeny, "api": "a1b2c3", "route": "GET /orders/{id}",
		"principalId": limiter.SubjectHash("secret-key-7"), "ruleId": "r-order", "dimension": "default", "allowed": false, "failOpen": false}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("decision line %s = %v, want %v", k, v[k], w)
		}
	}
	rep := f.stats.Report(time.Minute, 10)
	if len(rep.Rules) != 1 || rep.Rules[0].Rule != "r-order" || rep.Rules[0].Denied != 1 || *rep.Rules[0].Allowed != 2 {
		t.Errorf("stats rules = %+v, want r-order: 2 allowed, 1 denied", rep.Rules)
	}
	if len(rep.Subjects) != 1 || rep.Subjects[0].Subject != limiter.SubjectHash("secret-key-7") {
		t.Errorf("stats subjects = %+v, want the subject's hash", rep.Subjects)
	}
}

// newStats returns the in-process stats a test's adapter records into,
// on a clock that stands still: a test that reads the last minute's slot
// (Report(time.Minute, …)) would otherwise lose what it recorded before a
// minute turned (CI once saw 34 of 35 denials in the previous minute).
func newStats() *stats.Stats {
	at := time.Date(2027, 1, 15, 8, 0, 30, 0, time.UTC)
	return stats.New(stats.Options{Now: func() time.Time { return at }})
}
