package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/admin"
	sluiceapp "github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The hostile corpus: what an attacker or a careless client can send to the
// edges (the authorizer's event handlers, the admin API over API Gateway
// events and over net/http), on the object graph the Lambdas run
// (internal/app) against real Redis and PostgreSQL. Every case must answer
// a clear 4xx problem, a Deny or Unauthorized (401) — an Allow only where
// the input is legitimate — never a 5xx or a panic, and must lose nothing:
// no over-admission, no lost or doubled write, an audit row per write.

const hostileAPI = "a1b2c3d4e5"

// hostile is the app under attack.
type hostile struct {
	app    *sluiceapp.Local
	prefix string
	pool   *pgxpool.Pool // behind the app's back: COPY and row counts
	http   *httptest.Server
	out    *testenv.Buffer
}

func newHostile(t *testing.T) *hostile {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	cfg, err := config.FromEnv(func(k string) string {
		return map[string]string{"REDIS_URL": testenv.RedisURL(t), "DATABASE_URL": dbURL, "REDIS_TIMEOUT": "1s"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &hostile{prefix: testenv.Prefix(t, "hostile"), out: &testenv.Buffer{}}
	h.app, err = sluiceapp.NewLocal(context.Background(), cfg, sluiceapp.Options{
		Out: h.out, Function: "hostile-test", Prefix: h.prefix,
	})
	if err != nil {
		t.Fatalf("app.NewLocal: %v", err)
	}
	t.Cleanup(h.app.Close)
	testenv.DeleteKeys(t, h.app.Redis, h.prefix)
	if h.pool, err = pgxpool.New(context.Background(), dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.pool.Close)
	// The admin API as sluice local serves it (net/http's limits included).
	h.http = httptest.NewServer(h.app.Admin.Service.Handler(admin.HandlerOptions{Actor: func(*http.Request) string { return "hostile" }}))
	t.Cleanup(h.http.Close)
	return h
}

// adminEvent calls the admin Lambda handler (every route) with an API
// Gateway proxy event; params are raw path parameters.
func (h *hostile) adminEvent(t *testing.T, method, resource string, params map[string]string, body string, hdr map[string]string) events.APIGatewayProxyResponse {
	t.Helper()
	path := resource
	for k, v := range params {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	if hdr == nil {
		hdr = map[string]string{}
	}
	if body != "" && hdr["Content-Type"] == "" {
		hdr["Content-Type"] = "application/json"
	}
	ev := events.APIGatewayProxyRequest{Resource: resource, Path: path, HTTPMethod: method, Headers: hdr, PathParameters: params, Body: body,
		RequestContext: events.APIGatewayProxyRequestContext{Identity: events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::123456789012:user/hostile"}}}
	resp, err := h.app.Admin.Handler("")(context.Background(), ev)
	if err != nil {
		t.Fatalf("admin %s %.80q: error %v, want an answer", method, path, err)
	}
	wantNo5xx(t, method+" "+path, resp.StatusCode, resp.Headers["Content-Type"], resp.Body)
	return resp
}

// adminHTTP sends one request to the admin API over HTTP; hdr holds name,
// value pairs.
func (h *hostile) adminHTTP(t *testing.T, method, rawPath, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.http.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = rawPath // sent as is: percent-encoding included
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatalf("admin %s %.80q: %v (a panic closes the connection)", method, rawPath, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge { // net/http's own plain answer
		wantNo5xx(t, method+" "+rawPath, resp.StatusCode, resp.Header.Get("Content-Type"), string(b))
	}
	return resp.StatusCode, resp.Header, string(b)
}

// wantNo5xx: no server error, and every error is a problem document.
func wantNo5xx(t *testing.T, what string, status int, contentType, body string) {
	t.Helper()
	if status >= 500 || status < 200 {
		t.Errorf("%.100s = %d %.300s; want no 5xx", what, status, body)
	}
	if status >= 400 && (contentType != "application/problem+json" || !json.Valid([]byte(body))) {
		t.Errorf("%.100s = %d %s %.300s; want a problem+json document", what, status, contentType, body)
	}
}

// create creates a rule through the admin Lambda handler.
func (h *hostile) create(t *testing.T, r map[string]any) rules.Rule {
	t.Helper()
	b, _ := json.Marshal(r)
	resp := h.adminEvent(t, "POST", "/rules", nil, string(b), nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /rules %s = %d %s", b, resp.StatusCode, resp.Body)
	}
	var out rules.Rule
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// count runs a counting query behind the app's back.
func (h *hostile) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := h.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// restEvent is a REST API REQUEST authorizer event for GET /orders/{id}
// carrying key as x-api-key.
func hostileREST(key string) events.APIGatewayCustomAuthorizerRequestTypeRequest {
	return events.APIGatewayCustomAuthorizerRequestTypeRequest{
		Type: "REQUEST", MethodArn: "arn:aws:execute-api:eu-west-1:123456789012:" + hostileAPI + "/prod/GET/orders/42",
		Resource: "/orders/{id}", Path: "/orders/42", HTTPMethod: "GET",
		Headers: map[string]string{"X-Api-Key": key},
		RequestContext: events.APIGatewayCustomAuthorizerRequestTypeRequestContext{
			APIID: hostileAPI, HTTPMethod: "GET", ResourcePath: "/orders/{id}",
			Identity: events.APIGatewayCustomAuthorizerRequestTypeRequestIdentity{SourceIP: "203.0.113.9"},
		},
	}
}

// decision is what the authorizer answered, in words.
func decision(resp events.APIGatewayCustomAuthorizerResponse, err error) string {
	switch {
	case err != nil && err.Error() == "Unauthorized":
		return "401"
	case err != nil:
		return "error: " + err.Error()
	case len(resp.PolicyDocument.Statement) != 1:
		return fmt.Sprintf("bad policy %+v", resp.PolicyDocument)
	}
	return resp.PolicyDocument.Statement[0].Effect
}

// TestHostileAuthorizer sends hostile events to the authorizer: oversized
// and invalid subjects are refused (401), not charged; subjects full of
// hash-tag braces and stars are charged like any other, to one well-formed
// key per bucket, exactly up to their limit.
func TestHostileAuthorizer(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ctx := context.Background()
	apiRule := h.create(t, map[string]any{"api": hostileAPI, "route": "*", "subject": "*", "limit": 3, "period": "1m"})
	routeRule := h.create(t, map[string]any{"api": hostileAPI, "route": "GET /orders/{id}", "subject": "*", "limit": 10, "period": "1m"})
	if err := h.app.Cache.Refresh(ctx, true); err != nil {
		t.Fatal(err)
	}

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			ev   func() events.APIGatewayCustomAuthorizerRequestTypeRequest
		}{
			{"64 KB key", func() events.APIGatewayCustomAuthorizerRequestTypeRequest {
				return hostileREST(strings.Repeat("k", 64<<10))
			}},
			{"1 MB key", func() events.APIGatewayCustomAuthorizerRequestTypeRequest {
				return hostileREST(strings.Repeat("k", 1<<20))
			}},
			{"invalid UTF-8 key", func() events.APIGatewayCustomAuthorizerRequestTypeRequest { return hostileREST("key-\xff\xfe") }},
			{"no key", func() events.APIGatewayCustomAuthorizerRequestTypeRequest { return hostileREST("") }},
		} {
			// Many times: a refused request is never charged, so it never
			// turns into a Deny either.
			for i := range 5 {
				if got := decision(h.app.Authorizer.REST(ctx, tc.ev())); got != "401" {
					t.Errorf("%s (call %d): REST = %s, want 401", tc.name, i+1, got)
				}
			}
			// The Lambda entry point decodes JSON: the same through Invoke.
			// (Not for invalid UTF-8: JSON cannot carry it, and decoding
			// turns it into U+FFFD, a valid if odd key.)
			if tc.name == "invalid UTF-8 key" {
				continue
			}
			payload, _ := json.Marshal(tc.ev())
			if _, err := h.app.Authorizer.Invoke(ctx, payload); err == nil || err.Error() != "Unauthorized" {
				t.Errorf("%s: Invoke error = %v, want Unauthorized", tc.name, err)
			}
		}
		// An HTTP API event with a 1 MB key.
		ev := events.APIGatewayV2CustomAuthorizerV2Request{Version: "2.0", Type: "REQUEST", RouteKey: "GET /orders/{id}",
			Headers:        map[string]string{"x-api-key": strings.Repeat("k", 1<<20)},
			RequestContext: events.APIGatewayV2HTTPRequestContext{APIID: hostileAPI, HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", SourceIP: "203.0.113.9"}}}
		if _, err := h.app.Authorizer.HTTP(ctx, ev); err == nil || err.Error() != "Unauthorized" {
			t.Errorf("HTTP(1 MB key) error = %v, want Unauthorized", err)
		}
		if keys := bucketKeys(ctx, t, h); len(keys) != 0 {
			t.Errorf("refused requests wrote %d bucket keys, want none: %v", len(keys), keys)
		}
	})

	t.Run("legitimate but odd", func(t *testing.T) {
		// A 64 KB header that is not the subject, an invalid UTF-8 path and
		// resource: the request is decided as usual.
		ev := hostileREST("odd-1")
		ev.Headers["User-Agent"] = strings.Repeat("u", 64<<10)
		ev.Resource, ev.Path = "/orders/{id}\xff", "/orders/\xff"
		ev.MethodArn += "\xff"
		resp, err := h.app.Authorizer.REST(ctx, ev)
		if got := decision(resp, err); got != "Allow" || resp.PolicyDocument.Statement[0].Resource[0] != ev.MethodArn {
			t.Errorf("REST(64 KB user agent, invalid UTF-8 resource) = %s %v, want Allow on the event's method ARN", got, resp.PolicyDocument)
		}
	})

	t.Run("hash tags and stars", func(t *testing.T) {
		subjects := []string{"{x}", "}{", "*", "{*}", "a}{b", "{", "}", "**", "{" + apiRule.ID + "}", "sl:{x}:y"}
		for _, s := range subjects {
			var got []string
			for range 5 {
				got = append(got, decision(h.app.Authorizer.REST(ctx, hostileREST(s))))
			}
			// 3 a minute API-wide: exactly 3 through, whatever the braces.
			if want := []string{"Allow", "Allow", "Allow", "Deny", "Deny"}; !slices.Equal(got, want) {
				t.Errorf("subject %q: decisions %v, want %v", s, got, want)
			}
		}
		// One key per bucket, named <prefix>{<32 hex>}:<rule id>: one hash
		// tag, so every key of a subject is in one cluster slot.
		keyRE := regexp.MustCompile(`^` + regexp.QuoteMeta(h.prefix) + `\{([0-9a-f]{32})\}:(` + apiRule.ID + `|` + routeRule.ID + `)$`)
		tags := map[string][]string{}
		for _, k := range bucketKeys(ctx, t, h) {
			m := keyRE.FindStringSubmatch(k)
			if m == nil {
				t.Errorf("key %q is not <prefix>{<32 hex>}:<rule id>", k)
				continue
			}
			tags[m[1]] = append(tags[m[1]], m[2])
		}
		for _, s := range subjects {
			if ids := tags[limiter.SubjectHash(s)]; len(ids) != 2 {
				t.Errorf("subject %q has keys for rules %v, want the API-wide and the route rule", s, ids)
			}
		}
	})

	if strings.Contains(h.out.String(), `"level":"ERROR"`) {
		t.Errorf("error lines logged:\n%.2000s", h.out.String())
	}
}

// TestHostileAdmin sends hostile requests to the admin API, over API
// Gateway events and over HTTP: each gets a 4xx problem (or, where the
// request is legitimate, its answer), and nothing is written.
func TestHostileAdmin(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	r := h.create(t, map[string]any{"api": hostileAPI, "route": "*", "subject": "{x}*", "limit": 5, "period": "1m"})
	rulesBefore, auditBefore := h.count(t, "SELECT count(*) FROM rules"), h.count(t, "SELECT count(*) FROM audit_log")
	big, huge := strings.Repeat("h", 64<<10), strings.Repeat("h", 1<<20)
	valid := `{"api":"a","route":"*","subject":"s","limit":1,"period":"1s"}`

	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		hdr          []string
		want         int
	}{
		{"64 KB header on a read", "GET", "/rules?limit=1", "", []string{"X-Junk", big}, 200},
		{"64 KB If-Match", "PUT", "/rules/" + r.ID, valid, []string{"If-Match", big}, 412},
		{"64 KB Content-Type", "POST", "/rules", valid, []string{"Content-Type", big}, 415},
		{"1 MB If-Match", "DELETE", "/rules/" + r.ID, "", []string{"If-Match", huge}, 412},
		// Past net/http's 1 MB header limit: its own plain 431.
		{"2 MB header", "GET", "/rules", "", []string{"X-Junk", huge + huge}, 431},
		{"1 MB body", "POST", "/rules", "{\"description\":\"" + huge + "\"}", nil, 413},
		{"64 KB cursor", "GET", "/rules?cursor=" + big, "", nil, 400},
		{"64 KB filter", "GET", "/rules?subject=" + big, "", nil, 400},
		{"invalid UTF-8 in a subject path", "GET", "/subjects/%FF%FE/limits", "", nil, 400},
		{"NUL in a subject path", "GET", "/subjects/a%00b/limits", "", nil, 400},
		{"invalid UTF-8 in a query", "GET", "/rules?subject=%FF", "", nil, 400},
		{"invalid UTF-8 in a body", "POST", "/rules", "{\"api\":\"a\",\"route\":\"*\",\"subject\":\"\xff\",\"limit\":1,\"period\":\"1s\"}", nil, 400},
		{"braces and stars in a subject path", "GET", "/subjects/" + url.PathEscape("{x}*") + "/limits?api=" + hostileAPI, "", nil, 200},
		{"a 10 KB subject path", "GET", "/subjects/" + strings.Repeat("s", 10<<10) + "/limits", "", nil, 400},
		{"reset with braces", "DELETE", "/subjects/" + url.PathEscape("}{") + "/buckets", "", nil, 204},
		{"truncated JSON", "POST", "/rules", "{", nil, 400},
		{"a bare star", "POST", "/rules", "*", nil, 400},
		{"JSON in JSON", "POST", "/rules", `{"api":{"api":"a"},"route":"*","subject":"*","limit":1,"period":"1s"}`, nil, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := h.adminHTTP(t, tc.method, tc.path, tc.body, tc.hdr...)
			if status != tc.want {
				t.Errorf("%s %.60s = %d %.300s, want %d", tc.method, tc.path, status, body, tc.want)
			}
		})
	}
	// The Lambda edge: path parameters and bodies as API Gateway hands them
	// over, raw bytes included.
	for _, tc := range []struct {
		name     string
		method   string
		resource string
		params   map[string]string
		body     string
		hdr      map[string]string
		want     int
	}{
		{"raw invalid UTF-8 subject", "GET", "/subjects/{subject}/limits", map[string]string{"subject": "\xff"}, "", nil, 400},
		{"raw braces subject", "GET", "/subjects/{subject}/limits", map[string]string{"subject": "{x}*"}, "", nil, 200},
		{"1 MB subject", "DELETE", "/subjects/{subject}/buckets", map[string]string{"subject": strings.Repeat("s", 1<<20)}, "", nil, 400},
		{"1 MB If-Match", "PUT", "/rules/{id}", map[string]string{"id": r.ID}, valid, map[string]string{"If-Match": huge}, 412},
		{"invalid UTF-8 rule id", "GET", "/rules/{id}", map[string]string{"id": "\xff"}, "", nil, 400},
		{"invalid UTF-8 body", "POST", "/rules", nil, "{\"subject\":\"\xff\"}", nil, 400},
	} {
		t.Run("lambda/"+tc.name, func(t *testing.T) {
			resp := h.adminEvent(t, tc.method, tc.resource, tc.params, tc.body, tc.hdr)
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s = %d %.300s, want %d", tc.method, tc.resource, resp.StatusCode, resp.Body, tc.want)
			}
		})
	}
	if n, a := h.count(t, "SELECT count(*) FROM rules"), h.count(t, "SELECT count(*) FROM audit_log"); n != rulesBefore || a != auditBefore {
		t.Errorf("after the hostile requests: %d rules and %d audit rows, want %d and %d (nothing written)", n, a, rulesBefore, auditBefore)
	}
}

// TestHostileWriteRaces races conflicting writes on one rule and one scope:
// exactly one wins, the others get 412 (or 409, 404), and the audit log
// holds one row per write that won, nothing else.
func TestHostileWriteRaces(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	const racers = 16
	race := func(f func(i int) int) []int {
		statuses := make([]int, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				statuses[i] = f(i)
			})
		}
		close(start)
		wg.Wait()
		return statuses
	}
	tally := func(statuses []int) map[int]int {
		m := map[int]int{}
		for _, s := range statuses {
			m[s]++
		}
		return m
	}
	audit := func(id string) int {
		return h.count(t, "SELECT count(*) FROM audit_log WHERE kind = 'rule' AND target_id = $1", id)
	}

	// The same scope created 16 times at once: one rule.
	got := tally(race(func(i int) int {
		return h.adminEvent(t, "POST", "/rules", nil, fmt.Sprintf(`{"api":"race","route":"*","subject":"s","limit":%d,"period":"1m"}`, i+1), nil).StatusCode
	}))
	if got[201] != 1 || got[409] != racers-1 {
		t.Errorf("racing creates of one scope: statuses %v, want one 201 and %d 409", got, racers-1)
	}
	if n := h.count(t, "SELECT count(*) FROM rules WHERE api = 'race'"); n != 1 {
		t.Errorf("racing creates left %d rules, want 1", n)
	}

	// 16 updates of version 1 at once: one wins.
	r := h.create(t, map[string]any{"api": hostileAPI, "route": "*", "subject": "racer", "limit": 1, "period": "1m"})
	statuses := race(func(i int) int {
		body := fmt.Sprintf(`{"api":%q,"route":"*","subject":"racer","limit":%d,"period":"1m"}`, hostileAPI, 100+i)
		return h.adminEvent(t, "PUT", "/rules/{id}", map[string]string{"id": r.ID}, body, map[string]string{"If-Match": `"1"`}).StatusCode
	})
	if got := tally(statuses); got[200] != 1 || got[412] != racers-1 {
		t.Errorf("racing updates with If-Match \"1\": statuses %v, want one 200 and %d 412", got, racers-1)
	}
	winner := 100 + slices.Index(statuses, 200)
	var now rules.Rule
	if err := json.Unmarshal([]byte(h.adminEvent(t, "GET", "/rules/{id}", map[string]string{"id": r.ID}, "", nil).Body), &now); err != nil {
		t.Fatal(err)
	}
	if now.Version != 2 || now.Limit == nil || *now.Limit != int64(winner) {
		t.Errorf("after the race: version %d limit %v, want version 2 with the winner's limit %d", now.Version, now.Limit, winner)
	}
	if n := audit(r.ID); n != 2 {
		t.Errorf("audit rows of the rule = %d, want 2 (create, the winning update)", n)
	}
	var hist admin.HistoryResponse
	if err := json.Unmarshal([]byte(h.adminEvent(t, "GET", "/rules/{id}/history", map[string]string{"id": r.ID}, "", nil).Body), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist.Entries) != 2 || !bytes.Contains(hist.Entries[1].After, []byte(`"limit":`+strconv.Itoa(winner))) {
		t.Errorf("history = %+v, want the create and the winning update (limit %d)", hist.Entries, winner)
	}

	// Deletes and updates of version 2 at once: exactly one write wins.
	statuses = race(func(i int) int {
		hdr := map[string]string{"If-Match": `"2"`}
		if i%2 == 0 {
			return h.adminEvent(t, "DELETE", "/rules/{id}", map[string]string{"id": r.ID}, "", hdr).StatusCode
		}
		body := fmt.Sprintf(`{"api":%q,"route":"*","subject":"racer","limit":7,"period":"1m"}`, hostileAPI)
		return h.adminEvent(t, "PUT", "/rules/{id}", map[string]string{"id": r.ID}, body, hdr).StatusCode
	})
	got = tally(statuses)
	if won := got[200] + got[204]; won != 1 || got[200]+got[204]+got[404]+got[412] != racers {
		t.Errorf("racing deletes and updates: statuses %v, want exactly one 200 or 204, the rest 404 or 412", got)
	}
	if n := audit(r.ID); n != 3 {
		t.Errorf("audit rows of the rule = %d, want 3 (create, update, the winner of the second race)", n)
	}
	if writes, rows := h.count(t, "SELECT count(*) FROM audit_log WHERE kind = 'rule'"), 1+1+1+1; writes != rows {
		t.Errorf("%d rule audit rows, want %d: one per write that won", writes, rows)
	}
}

// TestHostileManyRules: a bulk create of many rules at once loses none; a
// list of 10,000 rules pages through every one exactly once; a snapshot of
// 10,000 rules reaches the authorizer and decides as its rules say.
func TestHostileManyRules(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ctx := context.Background()

	// 200 creates from 8 callers at once.
	const created, callers = 200, 8
	ids := make(chan string, created)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := c; i < created; i += callers {
				body := fmt.Sprintf(`{"api":%q,"route":"GET /bulk/%d","subject":"*","limit":100,"period":"1m"}`, hostileAPI, i)
				resp := h.adminEvent(t, "POST", "/rules", nil, body, nil)
				var r rules.Rule
				if resp.StatusCode != 201 || json.Unmarshal([]byte(resp.Body), &r) != nil {
					t.Errorf("bulk create %d = %d %s", i, resp.StatusCode, resp.Body)
					continue
				}
				ids <- r.ID
			}
		})
	}
	wg.Wait()
	close(ids)
	if n := len(ids); n != created {
		t.Fatalf("bulk create: %d created, want %d", n, created)
	}
	if n := h.count(t, "SELECT count(*) FROM audit_log WHERE action = 'create'"); n != created {
		t.Errorf("bulk create: %d audit rows, want %d", n, created)
	}

	// 10,000 more, one per subject, by COPY (as a migration would).
	const copied = 10_000
	rows := make([][]any, copied)
	for i := range rows {
		rows[i] = []any{hostileAPI, "GET /orders/{id}", "user-" + strconv.Itoa(i), int64(2), int64(60_000)}
	}
	if _, err := h.pool.CopyFrom(ctx, pgx.Identifier{"rules"}, []string{"api", "route", "subject", "limit_count", "period_ms"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatalf("COPY: %v", err)
	}
	total := created + copied

	// Every page of 1,000, each rule exactly once, in list order: api,
	// route, subject, id, byte by byte (NUL, which no field holds, keeps
	// the tuple order in one string).
	seen := map[string]bool{}
	var last string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > total/1000+1 {
			t.Fatalf("more than %d pages", pages)
		}
		path := "/rules?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		status, _, body := h.adminHTTP(t, "GET", path, "")
		var page rules.Page
		if status != 200 || json.Unmarshal([]byte(body), &page) != nil {
			t.Fatalf("GET %s = %d %.300s", path, status, body)
		}
		for _, r := range page.Rules {
			key := r.API + "\x00" + r.Route + "\x00" + r.Subject + "\x00" + r.ID
			if seen[r.ID] || key <= last {
				t.Fatalf("rule %s listed twice or out of order", r.ID)
			}
			seen[r.ID], last = true, key
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != total {
		t.Errorf("listed %d rules, want %d", len(seen), total)
	}
	for _, q := range []string{"limit=1001", "limit=0x10", "limit=-1", "cursor=" + strings.Repeat("A", 100)} {
		if status, _, body := h.adminHTTP(t, "GET", "/rules?"+q, ""); status != 400 {
			t.Errorf("GET /rules?%.40s = %d %.200s, want 400", q, status, body)
		}
	}

	// The authorizer takes the 10,200-rule snapshot and decides by it.
	start := time.Now()
	if err := h.app.Cache.Refresh(ctx, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("rules snapshot of %d rules loaded in %v", total, time.Since(start))
	if st := h.app.Cache.Stats(); st.Rules != total {
		t.Fatalf("rules cache holds %d rules, want %d", st.Rules, total)
	}
	var lat []time.Duration
	for _, s := range []string{"user-0", "user-4242", "user-9999"} {
		var got []string
		for range 3 {
			t0 := time.Now()
			got = append(got, decision(h.app.Authorizer.REST(ctx, hostileREST(s))))
			lat = append(lat, time.Since(t0))
		}
		if want := []string{"Allow", "Allow", "Deny"}; !slices.Equal(got, want) {
			t.Errorf("subject %s under its own 2-a-minute rule: %v, want %v", s, got, want)
		}
	}
	slices.Sort(lat)
	t.Logf("decisions with %d rules: median %v, max %v (Redis round trip included)", total, lat[len(lat)/2], lat[len(lat)-1])
}

// bucketKeys lists the bucket keys under h's prefix: every key but the
// published rules snapshot and its version (<prefix>{rules}:…).
func bucketKeys(ctx context.Context, t *testing.T, h *hostile) []string {
	t.Helper()
	var out []string
	for _, k := range testenv.Keys(ctx, t, h.app.Redis, h.prefix+"{") {
		if !strings.HasPrefix(k, h.prefix+"{rules}:") {
			out = append(out, k)
		}
	}
	return out
}
