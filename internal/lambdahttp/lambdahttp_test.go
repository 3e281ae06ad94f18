package lambdahttp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/lambdahttp"
)

// seen is what a recording handler saw of one request.
type seen struct {
	Method, Path, EscapedPath, Query, Host, RemoteAddr string
	Header                                             http.Header
	Body                                               string
	BodyErr                                            string
	Caller, RequestID                                  string
}

// recorder records the request and answers 201 with two headers and a
// body.
func recorder(got *seen, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, limit))
		*got = seen{Method: r.Method, Path: r.URL.Path, EscapedPath: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Host: r.Host, RemoteAddr: r.RemoteAddr, Header: r.Header, Body: string(b),
			Caller: lambdahttp.Caller(r), RequestID: lambdahttp.RequestID(r)}
		if err != nil {
			got.BodyErr = err.Error()
		}
		w.Header()["Etag"] = []string{`"1"`}
		w.Header()["Vary"] = []string{"A", "B"}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "{}") //nolint:errcheck // a buffer
	})
}

func readSample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// invokeSample plays the recorded event file through Invoke, the entry
// the Lambda runtime calls, and returns what the handler saw and the
// response's JSON.
func invokeSample(t *testing.T, file string) (seen, []byte) {
	t.Helper()
	var got seen
	out, err := lambdahttp.New(recorder(&got, 1<<20), lambdahttp.Options{}).Invoke(context.Background(), readSample(t, file))
	if err != nil {
		t.Fatalf("Invoke(%s) error = %v", file, err)
	}
	return got, out
}

// field is one thing the handler saw, and what it should be.
type field struct{ name, got, want string }

// checkRequest reports each field the handler did not see as it should.
func checkRequest(t *testing.T, fs []field) {
	t.Helper()
	for _, f := range fs {
		if f.got != f.want {
			t.Errorf("request %s = %q, want %q", f.name, f.got, f.want)
		}
	}
}

// TestProxySample plays aws-lambda-go's recorded REST proxy event through
// Invoke, the entry the Lambda runtime calls.
func TestProxySample(t *testing.T) {
	t.Parallel()
	got, out := invokeSample(t, "apigw-request.json")
	checkRequest(t, []field{
		{"method", got.Method, "POST"},
		{"path (resource /{proxy+} filled)", got.Path, "/hello/world"},
		{"query", got.Query, "name=me"},
		{"host", got.Host, "gy415nuibc.execute-api.us-east-1.amazonaws.com"},
		{"remote addr", got.RemoteAddr, "192.168.196.186"},
		{"lower-case header", got.Header.Get("Cache-Control"), "no-cache"},
		{"header", got.Header.Get("Headername"), "headerValue"},
		{"body", got.Body, "{\r\n\t\"a\": 1\r\n}"},
		{"caller (userArn first)", got.Caller, "theUserArn"},
		{"request id", got.RequestID, "deef4878-7910-11e6-8f14-25afc3e9ae33"},
	})
	var resp events.APIGatewayProxyResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	want := events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Etag": `"1"`, "Vary": "A, B"}, Body: "{}"}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

// TestURLSample plays aws-lambda-go's recorded Function URL event.
func TestURLSample(t *testing.T) {
	t.Parallel()
	got, out := invokeSample(t, "lambda-urls-request.json")
	checkRequest(t, []field{
		{"method", got.Method, "POST"},
		{"path", got.Path, "/my/path"},
		{"query", got.Query, "parameter1=value1&parameter1=value2&parameter2=value"},
		{"header", got.Header.Get("Header2"), "value1,value2"},
		{"cookies", got.Header.Get("Cookie"), "cookie1; cookie2"},
		{"remote addr", got.RemoteAddr, "123.123.123.123"},
		{"body", got.Body, "Hello from client!"},
	})
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 201 || resp.Body != "{}" {
		t.Errorf("response = %+v, %v; want 201 {}", resp, err)
	}
}

// TestProxyRequest: what an admin event carries reaches the handler —
// multi-value headers and query, raw path parameters in the resource,
// base64 bodies decoded only as far as the handler reads, the IAM caller.
func TestProxyRequest(t *testing.T) {
	t.Parallel()
	ev := events.APIGatewayProxyRequest{
		Resource:   "/subjects/{subject}/limits",
		Path:       "/admin/subjects/x y/limits", // a custom domain's base path: not used
		HTTPMethod: "post",
		// A hand-built event may name a header in one map only.
		Headers: map[string]string{"content-type": "application/json", "if-match": `"1"`, "x-single": "only here", "x-multi": "b"},
		MultiValueHeaders: map[string][]string{
			"content-type": {"application/json"}, "if-match": {`"1"`}, "x-multi": {"a", "b"},
		},
		QueryStringParameters:           map[string]string{"api": "b"},
		MultiValueQueryStringParameters: map[string][]string{"api": {"a", "b"}},
		PathParameters:                  map[string]string{"subject": "x%20y%2Fz"},
		Body:                            base64.StdEncoding.EncodeToString([]byte(`{"a":1}`)),
		IsBase64Encoded:                 true,
		RequestContext: events.APIGatewayProxyRequestContext{
			RequestID: "r1",
			Identity:  events.APIGatewayRequestIdentity{Caller: "AIDACALLER"},
		},
	}
	var got seen
	a := lambdahttp.New(recorder(&got, 1025), lambdahttp.Options{})
	if resp, err := a.Proxy(context.Background(), ev); err != nil || resp.StatusCode != 201 {
		t.Fatalf("Proxy = %d %s, %v", resp.StatusCode, resp.Body, err)
	}
	checkRequest(t, []field{
		{"method", got.Method, "POST"},
		{"escaped path", got.EscapedPath, "/subjects/x%20y%2Fz/limits"},
		{"path", got.Path, "/subjects/x y/z/limits"},
		{"if-match", got.Header.Get("If-Match"), `"1"`},
		{"multi header", strings.Join(got.Header.Values("X-Multi"), ","), "a,b"},
		{"single-value-only header", strings.Join(got.Header.Values("X-Single"), ","), "only here"},
		{"multi query", got.Query, "api=a&api=b"},
		{"body", got.Body, `{"a":1}`},
		{"caller", got.Caller, "AIDACALLER"},
		{"request id", got.RequestID, "r1"},
	})

	// Options.Resource: a function pinned to one route builds the path
	// from its own template, whatever the event's resource is called.
	pinned := lambdahttp.New(recorder(&got, 1025), lambdahttp.Options{Resource: "/subjects/{subject}/buckets"})
	ev2 := ev
	ev2.Resource = "/v1/subjects/{subject}/limits"
	pinned.Proxy(context.Background(), ev2) //nolint:errcheck // never fails
	if got.EscapedPath != "/subjects/x%20y%2Fz/buckets" {
		t.Errorf("pinned path = %q, want the route's template filled", got.EscapedPath)
	}

	// An oversized base64 body is decoded only as far as the handler reads.
	ev.Body = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 10<<20))
	a.Proxy(context.Background(), ev) //nolint:errcheck // never fails
	if len(got.Body) != 1025 || got.BodyErr != "" {
		t.Errorf("10 MB base64 body read to 1025 bytes = %d bytes, %q", len(got.Body), got.BodyErr)
	}
	// Bad base64 is the read's error, a 400 the handler can answer.
	ev.Body = "%%%"
	a.Proxy(context.Background(), ev) //nolint:errcheck // never fails
	if !strings.Contains(got.BodyErr, "not valid base64") {
		t.Errorf("bad base64 read error = %q, want it to say so", got.BodyErr)
	}
	// No identity: no caller (the admin API records "unknown").
	ev.RequestContext.Identity = events.APIGatewayRequestIdentity{}
	a.Proxy(context.Background(), ev) //nolint:errcheck // never fails
	if got.Caller != "" {
		t.Errorf("Caller(no identity) = %q, want \"\"", got.Caller)
	}
}

// TestMalformed: what no handler can be given is a 400 problem, never a
// Lambda error (which API Gateway turns into a bare 502).
func TestMalformed(t *testing.T) {
	t.Parallel()
	var got seen
	a := lambdahttp.New(recorder(&got, 1<<10), lambdahttp.Options{ProblemType: "https://example.com/doc#"})
	resp, err := a.Proxy(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "GET", Resource: "/subjects/{subject}",
		PathParameters: map[string]string{"subject": "%zz"}})
	if err != nil || resp.StatusCode != 400 || resp.Headers["Content-Type"] != "application/problem+json" ||
		!strings.Contains(resp.Body, `"field":"subject"`) || !strings.Contains(resp.Body, "https://example.com/doc#") {
		t.Errorf("bad percent-encoding in a path parameter = %d %v %s, %v; want a 400 problem naming subject", resp.StatusCode, resp.Headers, resp.Body, err)
	}
	if _, err := a.Invoke(context.Background(), []byte("not JSON")); err == nil {
		t.Error("Invoke(not JSON) error = nil, want one")
	}
}

// TestBinaryBody: a body that is not UTF-8 text goes back base64-encoded.
func TestBinaryBody(t *testing.T) {
	t.Parallel()
	bin := []byte{0xff, 0x00, 0xfe}
	a := lambdahttp.New(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(bin) }), lambdahttp.Options{}) //nolint:errcheck // a buffer
	resp, _ := a.Proxy(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/"})
	if b, err := base64.StdEncoding.DecodeString(resp.Body); !resp.IsBase64Encoded || err != nil || !bytes.Equal(b, bin) || resp.StatusCode != 200 {
		t.Errorf("binary body = %d %q base64 %v, want 200 and the bytes base64-encoded", resp.StatusCode, resp.Body, resp.IsBase64Encoded)
	}
}
