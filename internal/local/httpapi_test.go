package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// stack is a local stack Run in process on the embedded Redis and store,
// with the seed rules and admin token "tok".
type stack struct{ base string }

func startStack(t *testing.T) stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	env := map[string]string{"LOG_LEVEL": "warn", "REDIS_TIMEOUT": "1s"} // a loaded make test fails 25 ms calls open
	go func() {
		done <- Run(ctx, Config{Addr: "127.0.0.1:0", API: "demo", Stage: "local", Seed: "../../examples/rules.json", SeedSet: true,
			Token: "tok", StateDir: t.TempDir(), Getenv: func(k string) string { return env[k] }}, w, io.Discard)
		w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run after its context ended = %v, want nil", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Run did not return within 15s of its context ending")
		}
	})
	var s stack
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if m := regexp.MustCompile(`demo API\s+(http://\S+)/`).FindStringSubmatch(sc.Text()); m != nil {
			s.base = m[1]
		}
		if strings.HasPrefix(sc.Text(), "Ctrl-C stops") {
			break
		}
	}
	go io.Copy(io.Discard, r) //nolint:errcheck // the rest of the banner
	if s.base == "" {
		t.Fatal("no banner")
	}
	return s
}

// do sends method path with the x-api-key key ("" none) and the admin
// token when path is under /admin/.
func (s stack) do(t *testing.T, method, path, key string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	if strings.HasPrefix(path, "/admin/") {
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// ruleIDs is the stored rules' ids by api and route ("demo GET /search"),
// for the metrics' labels.
func (s stack) ruleIDs(t *testing.T) map[string]string {
	t.Helper()
	_, b := s.do(t, "GET", "/admin/rules", "", nil)
	var list struct {
		Rules []struct{ ID, API, Route string } `json:"rules"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("GET /admin/rules: %v: %s", err, b)
	}
	ids := map[string]string{}
	for _, r := range list.Rules {
		ids[r.API+" "+r.Route] = r.ID
	}
	return ids
}

// TestLimitedRoutes takes the HTTP API (a Lambda handler behind
// ratelimit.LimitHTTPAPI, invoked with the payload 2.0 event's bytes) and
// the net/http service (behind ratelimit's middleware) of a running local
// stack to their seeded 3-a-minute search limit: the fourth request gets a
// real 429 with Retry-After, the RateLimit fields and a problem document;
// no subject is 401; /metrics counts each decision by api, rule and
// outcome; a rule written through the admin API applies to them as to the
// REST API.
func TestLimitedRoutes(t *testing.T) {
	t.Parallel()
	s := startStack(t)

	ruleID := s.ruleIDs(t)

	for _, tt := range []struct{ api, path, route string }{
		{HTTPAPIID, "/httpapi/search", "GET /httpapi/search"},
		{ServiceAPI, "/service/search", "GET /service/search"},
	} {
		var codes []int
		var last *http.Response
		var body []byte
		for i := range 4 {
			last, body = s.do(t, "GET", tt.path, "alice", nil)
			codes = append(codes, last.StatusCode)
			if i < 3 && last.Header.Get("RateLimit") == "" {
				t.Errorf("GET %s #%d: no RateLimit field on the allowed answer: %v", tt.path, i+1, last.Header)
			}
		}
		if fmt.Sprint(codes) != "[200 200 200 429]" {
			t.Fatalf("GET %s ×4 = %v, want [200 200 200 429]; last body %s", tt.path, codes, body)
		}
		if ra, err := strconv.Atoi(last.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
			t.Errorf("GET %s: 429 Retry-After = %q, want 1 to 60 seconds", tt.path, last.Header.Get("Retry-After"))
		}
		if v := last.Header.Values("RateLimit"); len(v) != 1 || !strings.Contains(v[0], "r=0") {
			t.Errorf("GET %s: 429 RateLimit = %q, want one with r=0", tt.path, v)
		}
		if v := last.Header.Values("RateLimit-Policy"); len(v) != 1 || !strings.Contains(v[0], "q=3;w=60") {
			t.Errorf("GET %s: 429 RateLimit-Policy = %q, want the 3-a-minute rule's q=3;w=60", tt.path, v)
		}
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		}
		if ct := last.Header.Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Status != 429 || !strings.HasSuffix(p.Type, "#too-many-requests") {
			t.Errorf("GET %s: 429 is %s %s, want a too-many-requests problem document", tt.path, ct, body)
		}
		if resp, b := s.do(t, "GET", tt.path, "", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a subject = %d %s, want 401", tt.path, resp.StatusCode, b)
		}

		_, metrics := s.do(t, "GET", "/metrics", "", nil)
		id := ruleID[tt.api+" "+tt.route]
		for outcome, want := range map[string]int{"allow": 3, "deny": 1} {
			line := fmt.Sprintf(`sluice_decisions_total{api=%q,kind="rate",outcome=%q,rule=%q} %d`, tt.api, outcome, id, want)
			if !strings.Contains(string(metrics), line+"\n") {
				t.Errorf("/metrics has no line %s:\n%s", line, grepLines(string(metrics), "sluice_decisions_total"))
			}
		}
		if line := fmt.Sprintf(`sluice_decisions_total{api=%q,kind="none",outcome="unauthorized",rule="none"} 1`, tt.api); !strings.Contains(string(metrics), line+"\n") {
			t.Errorf("/metrics has no line %s:\n%s", line, grepLines(string(metrics), "sluice_decisions_total"))
		}
	}
	_, metrics := s.do(t, "GET", "/metrics", "", nil)
	for _, name := range []string{"sluice_breaker_open 0", "sluice_redis_latency_seconds_count", "sluice_decision_duration_seconds_count", "sluice_rules_snapshot_age_seconds"} {
		if !strings.Contains(string(metrics), name) {
			t.Errorf("/metrics has no %s", name)
		}
	}

	// The event the HTTP API's Lambda handler got, as API Gateway builds
	// it: route key, path parameters, query (repeats joined), api id.
	resp, b := s.do(t, "POST", "/httpapi/items/42?tag=a&tag=b", "bob", nil)
	var echo map[string]any
	if err := json.Unmarshal(b, &echo); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /httpapi/items/42 = %d %s", resp.StatusCode, b)
	}
	if got := fmt.Sprint(echo["routeKey"], " ", echo["pathParameters"], " ", echo["query"], " ", echo["api"]); got != "ANY /httpapi/items/{id} map[id:42] map[tag:a,b] demo-http" {
		t.Errorf("the HTTP API's event: %s", got)
	}
	if resp, _ := s.do(t, "GET", "/httpapi/nope", "bob", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /httpapi/nope = %d, want the HTTP API's 404", resp.StatusCode)
	}

	// A rule written through the admin API applies to the service's route
	// template as to the REST API's, within the version poll.
	if resp, b := s.do(t, "POST", "/admin/rules", "", map[string]any{"api": ServiceAPI, "route": "GET /service/items/{id}", "subject": "*", "limit": 1, "period": "1m"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /admin/rules = %d %s", resp.StatusCode, b)
	}
	n := 0
	testenv.Await(t, 5*time.Second, 50*time.Millisecond, "GET /service/items/{id} is limited by the rule the admin API wrote", func() bool {
		n++
		resp, _ := s.do(t, "GET", "/service/items/"+strconv.Itoa(n), "carol", nil)
		return resp.StatusCode == http.StatusTooManyRequests
	})

	// GET /admin/resources lists the two APIs, so `rules put` does not
	// warn about their rules.
	_, b = s.do(t, "GET", "/admin/resources", "", nil)
	var rs Resources
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{HTTPAPIID, "GET /httpapi/search"}, {ServiceAPI, "GET /service/items/{id}"}} {
		if w := rs.Warnings(r[0], r[1]); len(w) != 0 {
			t.Errorf("Warnings(%q, %q) = %q, want none", r[0], r[1], w)
		}
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// fakeFn is a Lambda function's Invoke: it records the event bytes and
// answers out, or err.
type fakeFn struct {
	got []byte
	out string
	err error
}

func (f *fakeFn) Invoke(_ context.Context, payload []byte) ([]byte, error) {
	f.got = payload
	return []byte(f.out), f.err
}

// TestHTTPAPIGateway turns integration answers into HTTP answers as API
// Gateway does, and refuses what it cannot pass: a body over the payload
// quota is 413 before any invoke, a failed or malformed integration 500.
func TestHTTPAPIGateway(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		out        string
		err        error
		body       string
		wantStatus int
		wantHeader map[string]string
		wantBody   string
	}{
		{name: "structured", out: `{"statusCode":201,"headers":{"RateLimit":"\"r\";r=1;t=2","X-A":"b"},"cookies":["c=1"],"body":"hi"}`,
			wantStatus: 201, wantHeader: map[string]string{"RateLimit": `"r";r=1;t=2`, "X-A": "b", "Set-Cookie": "c=1"}, wantBody: "hi"},
		{name: "base64 body", out: `{"statusCode":200,"isBase64Encoded":true,"body":"AAEC"}`, wantStatus: 200, wantBody: "\x00\x01\x02"},
		{name: "no statusCode: the JSON is the body", out: `{"ok":true}`, wantStatus: 200,
			wantHeader: map[string]string{"Content-Type": "application/json"}, wantBody: `{"ok":true}`},
		{name: "function error", err: errors.New("boom"), wantStatus: 500, wantBody: "Internal Server Error"},
		{name: "malformed base64", out: `{"statusCode":200,"isBase64Encoded":true,"body":"%%%"}`, wantStatus: 500, wantBody: "Internal Server Error"},
		{name: "body over the quota", body: strings.Repeat("x", maxHTTPAPIBody+1), wantStatus: 413, wantBody: "Request Entity Too Large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fn := &fakeFn{out: tt.out, err: tt.err}
			mux := http.NewServeMux()
			(&httpAPIGateway{apiID: "api1", fn: fn, log: discardLogger()}).handle(mux)
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest("POST", "/httpapi/items/7", strings.NewReader(tt.body)))
			if w.Code != tt.wantStatus || !strings.Contains(w.Body.String(), tt.wantBody) {
				t.Errorf("status, body = %d %q, want %d with %q", w.Code, w.Body, tt.wantStatus, tt.wantBody)
			}
			for k, v := range tt.wantHeader {
				if got := w.Header()[k]; len(got) != 1 || got[0] != v {
					t.Errorf("header %s = %q, want %q (name as the function wrote it)", k, got, v)
				}
			}
			if tt.wantStatus == 413 && fn.got != nil {
				t.Error("the function was invoked with a body over the quota")
			}
		})
	}
}

// TestHTTPAPIEvent builds the payload 2.0 event as API Gateway does:
// lower-case header names, repeated headers and parameters joined with
// commas, cookies apart, a binary body in base64.
func TestHTTPAPIEvent(t *testing.T) {
	t.Parallel()
	fn := &fakeFn{out: `{"statusCode":204}`}
	mux := http.NewServeMux()
	(&httpAPIGateway{apiID: "api1", fn: fn, log: discardLogger()}).handle(mux)
	r := httptest.NewRequest("PUT", "/httpapi/items/7?a=1&a=2", strings.NewReader("\xff\x00"))
	r.Header.Add("X-Api-Key", "k1")
	r.Header.Add("X-Api-Key", "k2")
	r.Header.Set("Cookie", "s=1; t=2")
	mux.ServeHTTP(httptest.NewRecorder(), r)
	var ev struct {
		Version, RouteKey, RawPath, RawQueryString, Body string
		Cookies                                          []string
		Headers, QueryStringParameters, PathParameters   map[string]string
		IsBase64Encoded                                  bool
		RequestContext                                   struct {
			APIID, Stage string
			HTTP         struct{ Method, SourceIP string }
		}
	}
	if err := json.Unmarshal(fn.got, &ev); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(ev.Version, "|", ev.RouteKey, "|", ev.RawPath, "|", ev.RawQueryString, "|", ev.Headers["x-api-key"], "|", ev.Headers["cookie"], "|", ev.Cookies, "|",
		ev.QueryStringParameters, "|", ev.PathParameters, "|", ev.Body, ev.IsBase64Encoded, "|", ev.RequestContext.APIID, ev.RequestContext.Stage, ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.SourceIP)
	want := "2.0|ANY /httpapi/items/{id}|/httpapi/items/7|a=1&a=2|k1,k2||[s=1 t=2]|map[a:1,2]|map[id:7]|/wA=true|api1$defaultPUT192.0.2.1"
	if got != want {
		t.Errorf("event:\n got %s\nwant %s", got, want)
	}
}

// TestRESTMetrics: the REST demo API's decisions (its authorizer's Invoke,
// through the local gateway) are on /metrics beside the HTTP API's and the
// service's, under api "demo".
func TestRESTMetrics(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	id := s.ruleIDs(t)["demo GET /search"]
	if id == "" {
		t.Fatal("no seeded rule for demo GET /search")
	}

	var codes []int
	for range 4 {
		resp, _ := s.do(t, "GET", "/search", "carol", nil)
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[200 200 200 429]" {
		t.Fatalf("GET /search ×4 = %v, want [200 200 200 429]", codes)
	}
	if resp, b := s.do(t, "GET", "/search", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /search without a key = %d %s, want 401", resp.StatusCode, b)
	}

	_, metrics := s.do(t, "GET", "/metrics", "", nil)
	for _, line := range []string{
		fmt.Sprintf(`sluice_decisions_total{api="demo",kind="rate",outcome="allow",rule=%q} 3`, id),
		fmt.Sprintf(`sluice_decisions_total{api="demo",kind="rate",outcome="deny",rule=%q} 1`, id),
		`sluice_decisions_total{api="demo",kind="none",outcome="unauthorized",rule="none"} 1`,
	} {
		if !strings.Contains(string(metrics), line+"\n") {
			t.Errorf("/metrics has no line %s:\n%s", line, grepLines(string(metrics), "sluice_decisions_total"))
		}
	}
}
