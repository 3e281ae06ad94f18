package ratelimit_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/ratelimit"
)

// target is one hostile input: the subject, api and route a caller names,
// and whether it sends the subject or the api twice. In a query string
// (the query entries), rawKey and rawValue are how the client spells the
// parameter and the subject on the wire ("" is the plain spelling), and
// extra is a pair sent beside it: a transport that decodes the query
// (API Gateway) hands the entry the decoded pairs, one that does not (an
// ALB, a net/http request) the raw ones. method is the request's method
// (GET when "").
type target struct {
	subject, api, route string
	dupSubject, dupAPI  bool
	rawKey, rawValue    string
	extra               string
	method              string
}

// goodRoute is the route of the sample events.
const goodRoute = "GET /orders/{id}"

// tg returns the target of subject on the sample API and route, changed
// by opts.
func tg(subject string, opts ...func(*target)) target {
	in := target{subject: subject, api: sampleAPI, route: goodRoute}
	for _, o := range opts {
		o(&in)
	}
	return in
}

func api(a string) func(*target)   { return func(t *target) { t.api = a } }
func route(r string) func(*target) { return func(t *target) { t.route = r } }
func dupSubject(t *target)         { t.dupSubject = true }
func dupAPI(t *target)             { t.dupAPI = true }

// spelled is the query spelling key=value of the subject on the wire.
func spelled(key, value string) func(*target) {
	return func(t *target) { t.rawKey, t.rawValue = key, value }
}

// besides sends the raw pair extra beside the subject's in the query.
func besides(extra string) func(*target) { return func(t *target) { t.extra = extra } }

// method sends the request with method m.
func method(m string) func(*target) { return func(t *target) { t.method = m } }

// wireQuery is in's query string as the client writes it: the subject's
// parameter in its spelling (twice when dupSubject), then extra.
func (in target) wireQuery() string {
	k, v := in.rawKey, in.rawValue
	if k == "" {
		k = "api_key"
	}
	if v == "" {
		v = url.QueryEscape(in.subject)
	}
	q := k + "=" + v
	if in.dupSubject {
		q += "&" + q
	}
	if in.extra != "" {
		q += "&" + in.extra
	}
	return q
}

// decodedQuery is in's query as API Gateway hands it to a Lambda: each
// pair decoded (a pair that does not decode is kept as sent), in both the
// single-value map (the last value) and the multi-value one.
func (in target) decodedQuery() (map[string]string, map[string][]string) {
	single, multi := map[string]string{}, map[string][]string{}
	for pair := range strings.SplitSeq(in.wireQuery(), "&") {
		k, v, _ := strings.Cut(pair, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		single[k] = v
		multi[k] = append(multi[k], v)
	}
	return single, multi
}

// httpMethod is in's method.
func (in target) httpMethod() string {
	if in.method == "" {
		return "GET"
	}
	return in.method
}

// Outcomes of an entry: what it did with the target.
const (
	refused = "refused" // 400 or 401: nothing charged, reset or read
	isS     = "S"       // acted on subject S's buckets (S is blocked on the API)
	isK1    = isS       // acted on k1's buckets, as blocked as S's: the request entries tell them only by their answer
	isNew   = "new"     // acted on another subject's buckets
)

// needs says what an input takes of an entry's encoding.
type needs uint16

const (
	needAPI         needs = 1 << iota // the caller names the api
	needRoute                         // the caller names the route
	needRawUTF8                       // the subject's bytes are not UTF-8 and must reach the entry as they are
	needDupSubj                       // the subject is sent twice
	needDupAPI                        // the api is sent twice
	needQuery                         // the subject is sent in the query string, spelled or beside another pair
	needMethod                        // the request's method is not GET
	needOtherMethod                   // the method is not one a "GET /path" pattern routes (GET, HEAD)
	needRouteRule                     // the outcome is a route rule's: the entry must tell it from the API-wide one
)

// entry is one way into Sluice, entered as a user or AWS enters it.
type entry struct {
	name string
	// takes is what the entry's request can carry. The authorizer and the
	// ratelimit package get the api and route from API Gateway's event
	// (the caller does not name them); JSON events cannot carry bytes that
	// are not UTF-8 (Go's decoder turns them into U+FFFD before any check,
	// and API Gateway sends valid JSON); a path parameter or an answer's
	// principalId cannot be sent twice.
	takes needs
	enter func(t *testing.T, in target) string
}

// TestHostileTargets runs every entry (the authorizer's REST and HTTP
// events through Invoke, POST /check through its Lambda handler, the admin
// API's POST /usage and subjects routes through their API Gateway
// handler, the ratelimit package's wrapped authorizer by principalId and
// by context key) over the same hostile subjects, apis and routes, and
// expects the same answer from each: one normalization
// (rules.NormalizeTarget). The rules: subject S is blocked on the API
// (limit 0, route *), every other subject gets 100 a minute; so an entry
// that acts on S's buckets is told from one that acts on a new subject's.
func TestHostileTargets(t *testing.T) {
	const key = "hygiene-subject-key-0123456789"
	e := newHygiene(t, key)
	long := strings.Repeat("s", ratelimit.MaxSubjectLen)
	rows := []struct {
		name string
		in   target
		want string
	}{
		{"S", tg("S"), isS},
		{"spaces around", tg(" S "), isS},
		{"tab and NBSP around", tg("\tS\u00a0"), isS},
		{"star is a subject", tg("*"), isNew},
		{"256 bytes", tg(long), isNew},
		{"256 bytes and spaces", tg("  " + long + "  "), isNew},
		{"257 bytes", tg(long + "s"), refused},
		{"empty", tg(""), refused},
		{"blank", tg("   "), refused},
		{"not UTF-8", tg("S\xff"), refused},
		{"not UTF-8, another byte", tg("S\xfe"), refused},
		{"U+FFFD, what JSON makes of bytes that are not UTF-8", tg("S\uFFFD"), refused},
		{"NUL", tg("S\x00"), refused},
		{"escape inside", tg("S\x1bT"), refused},
		{"subject twice", tg("S", dupSubject), refused},

		{"api with spaces", tg("S", api(" "+sampleAPI+" ")), isS},
		{"api empty", tg("S", api("")), refused},
		{"api star", tg("S", api("*")), refused},
		{"api with a slash", tg("S", api("a1b2/c3")), refused},
		{"api twice", tg("S", dupAPI), refused},

		{"route lower case, trailing slash", tg("S", route("get /orders/{id}/")), isS},
		{"route star", tg("S", route("*")), isS},
		{"route ANY", tg("S", route("ANY /orders/{id}")), isS},
		{"unknown method", tg("S", route("FROB /orders/{id}")), refused},
		{"route empty", tg("S", route("")), refused},
		{"route without a path", tg("S", route("GET orders")), refused},
		{"route with ..", tg("S", route("GET /orders/../admin")), refused},

		// The query as the client spells it: every spelling of one key
		// and one value is one subject, as the backend decodes it.
		{"query plain", tg("S", spelled("api_key", "S")), isS},
		{"query value percent-encoded", tg("S", spelled("api_key", "%53")), isS},
		{"query value lower-case hex", tg("k1", spelled("api_key", "%6b1")), isK1},
		{"query value upper-case hex", tg("k1", spelled("api_key", "%6B%31")), isK1},
		{"query value digit encoded", tg("k1", spelled("api_key", "k%31")), isK1},
		{"query key percent-encoded", tg("S", spelled("%61pi_key", "S")), isS},
		{"query value with a plus", tg("S T", spelled("api_key", "S+T")), isNew},
		{"query malformed pair beside the key", tg("S", spelled("api_key", "S"), besides("x=%zz")), isS},
		{"query semicolon pair beside the key", tg("S", spelled("api_key", "S"), besides("x=1;y=2")), isS},
		{"query key twice, spelled two ways", tg("S", spelled("api_key", "S"), besides("%61pi_key=S")), refused},
		{"query not UTF-8 encoded", tg("S\xff", spelled("api_key", "S%FF")), refused},

		// HEAD is GET without the body: H is blocked on GET /orders/{id}.
		{"GET of a route H is blocked on", tg("H", method("GET")), isS},
		{"HEAD of that route", tg("H", route("HEAD /orders/{id}"), method("HEAD")), isS},
		// A method in any case is one method (rules.CanonicalMethod): a
		// server routing any method to the handler serves "get" as GET.
		{"get of that route", tg("H", method("get")), isS},
		{"Get of that route", tg("H", method("Get")), isS},
		{"gEt of that route", tg("H", method("gEt")), isS},
		{"head of that route", tg("H", method("head")), isS},
		{"Head of that route", tg("H", method("Head")), isS},
		{"hEAD of that route", tg("H", method("hEAD")), isS},
		{"POST of that route is not GET", tg("H", method("POST")), isNew},
		{"post of that route is not GET", tg("H", method("post")), isNew},
		// The same methods as the check API and the admin API name them.
		{"route GET, H blocked on it", tg("H", route("GET /orders/{id}")), isS},
		{"route get", tg("H", route("get /orders/{id}")), isS},
		{"route Get", tg("H", route("Get /orders/{id}")), isS},
		{"route gEt, trailing slash", tg("H", route("gEt /orders/{id}/")), isS},
		{"route HEAD", tg("H", route("HEAD /orders/{id}")), isS},
		{"route head", tg("H", route("head /orders/{id}")), isS},
		{"route hEaD", tg("H", route("hEaD /orders/{id}")), isS},
		{"route POST is not GET", tg("H", route("POST /orders/{id}")), isNew},
		{"route post is not GET", tg("H", route("post /orders/{id}")), isNew},
	}
	entries := e.entries()
	for _, row := range rows {
		in := row.in
		var need needs
		if in.api != sampleAPI {
			need |= needAPI
		}
		if in.route != goodRoute {
			need |= needRoute
		}
		if in.dupSubject {
			need |= needDupSubj
		}
		if in.dupAPI {
			need |= needDupAPI
		}
		if !isUTF8(in.subject) {
			need |= needRawUTF8
		}
		if in.rawKey != "" || in.extra != "" {
			need |= needQuery
		}
		if in.method != "" {
			need |= needMethod
			need &^= needRoute // the entries that take a method derive the route
			if in.method != "GET" && in.method != "HEAD" {
				need |= needOtherMethod
			}
		}
		if in.subject == "H" {
			need |= needRouteRule
		}
		ran := 0
		for _, en := range entries {
			if en.takes&need != need {
				continue
			}
			ran++
			if got := en.enter(t, in); got != row.want {
				t.Errorf("%s: %s answered %s, want %s", row.name, en.name, got, row.want)
			}
		}
		if ran < 2 {
			t.Errorf("%s: only %d entries take the input; want it compared across entries", row.name, ran)
		}
	}
}

// hygiene is a deployment's decision and admin graphs, and two embedded
// limiters, on one Redis and database, under one subject hash key.
type hygiene struct {
	dec                *app.Decider
	adm                *app.Admin
	admLog             *testenv.Buffer
	byPrincipal, byCtx *ratelimit.Limiter
	hashS              string // S's keyed hash
}

func newHygiene(t *testing.T, key string) *hygiene {
	t.Helper()
	redisURL, dbURL, prefix := testenv.RedisURL(t), pgtest.NewDatabase(t), testenv.Prefix(t, "hygiene")
	testenv.DeleteKeys(t, testenv.Redis(t), prefix)
	env := map[string]string{"REDIS_URL": redisURL, "DATABASE_URL": dbURL, "REDIS_PREFIX": prefix, "SUBJECT_HMAC_KEY": key,
		"SUBJECT_SOURCES": "header:x-api-key,query:api_key"}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	e := &hygiene{admLog: &testenv.Buffer{}, hashS: limiter.NewHasher([]byte(key)).SubjectHash("S")}
	if e.adm, err = app.NewAdmin(context.Background(), cfg, app.AdminFull, app.Options{Out: e.admLog}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.adm.Close)
	for _, r := range []map[string]any{
		{"api": sampleAPI, "route": "*", "subject": "S", "limit": 0, "period": "1m"},
		{"api": sampleAPI, "route": "*", "subject": "k1", "limit": 0, "period": "1m"},
		{"api": sampleAPI, "route": "GET /orders/{id}", "subject": "H", "limit": 0, "period": "1m"},
		{"api": sampleAPI, "route": "*", "subject": "*", "limit": 100, "period": "1m"},
	} {
		b, _ := json.Marshal(r)
		resp := serveAdmin(e.adm.Service, "POST", "/rules", nil, b, "")
		if resp.Status != http.StatusCreated {
			t.Fatalf("create rule = %d %s", resp.Status, resp.Body)
		}
	}
	// Built after the rules, so it starts with them.
	if e.dec, err = app.NewDecider(context.Background(), cfg, app.Options{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.dec.Close)
	for _, l := range []struct {
		rl  **ratelimit.Limiter
		ctx string
	}{{&e.byPrincipal, ""}, {&e.byCtx, "tenant"}} {
		rl, err := ratelimit.New(context.Background(), ratelimit.Options{RedisURL: redisURL, Prefix: prefix,
			SubjectKey: key, ContextKey: l.ctx, Out: io.Discard, Sources: "header:x-api-key,query:api_key"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rl.Close)
		*l.rl = rl
	}
	return e
}

// entries are the ways in.
func (e *hygiene) entries() []entry {
	apiParts := needAPI | needRoute | needRawUTF8 | needDupSubj | needDupAPI
	// The request entries: API Gateway's JSON events, the net/http
	// request, each entered as its users enter it. A JSON transport turns
	// bytes that are not UTF-8 into U+FFFD before Sluice sees them; the
	// answer is the same.
	header := needRawUTF8 | needDupSubj | needMethod | needOtherMethod | needRouteRule
	query := header | needQuery
	// A "GET /orders/{id}" pattern answers another method 405 itself; a
	// method-less one serves every method, "get" included.
	getHeader, getQuery := header&^needOtherMethod, query&^needOtherMethod
	return []entry{
		{"authorizer REST header", header, func(t *testing.T, in target) string { return e.authorizerREST(t, in, "headers") }},
		{"authorizer REST query", query, func(t *testing.T, in target) string { return e.authorizerREST(t, in, "queryStringParameters") }},
		{"authorizer HTTP header", header, func(t *testing.T, in target) string { return e.authorizerHTTP(t, in, false) }},
		{"authorizer HTTP query", query, func(t *testing.T, in target) string { return e.authorizerHTTP(t, in, true) }},
		{"POST /check", apiParts | needRouteRule, e.check},
		{"POST /usage", apiParts, e.usage}, // a blocked bucket is not charged, whichever rule blocks it
		{"GET /subjects/{subject}/limits", needAPI | needRoute | needRawUTF8 | needDupAPI | needRouteRule, e.limits},
		{"DELETE /subjects/{subject}/buckets", needAPI | needRawUTF8 | needDupAPI, e.reset},
		{"ratelimit principalId", needRawUTF8, func(t *testing.T, in target) string { return e.wrapped(t, e.byPrincipal, in.subject, nil) }},
		{"ratelimit context:tenant", needRawUTF8, func(t *testing.T, in target) string {
			return e.wrapped(t, e.byCtx, "alice", map[string]any{"tenant": in.subject})
		}},
		{"ratelimit Handler header", getHeader, func(t *testing.T, in target) string { return e.middleware(t, in, "GET /orders/{id}", false) }},
		{"ratelimit Handler query", getQuery, func(t *testing.T, in target) string { return e.middleware(t, in, "GET /orders/{id}", true) }},
		{"ratelimit Handler header, any method", header, func(t *testing.T, in target) string { return e.middleware(t, in, "/orders/{id}", false) }},
		{"ratelimit Handler query, any method", query, func(t *testing.T, in target) string { return e.middleware(t, in, "/orders/{id}", true) }},
		{"ratelimit LimitHTTPAPI header", header, func(t *testing.T, in target) string { return e.httpAPI(t, in, false) }},
		{"ratelimit LimitHTTPAPI query", query, func(t *testing.T, in target) string { return e.httpAPI(t, in, true) }},
		{"ratelimit LimitProxy header", header, func(t *testing.T, in target) string { return e.proxy(t, in, false) }},
		{"ratelimit LimitProxy query", query, func(t *testing.T, in target) string { return e.proxy(t, in, true) }},
		{"ratelimit LimitALB header", header, func(t *testing.T, in target) string { return e.alb(t, in, false) }},
		{"ratelimit LimitALB query", query, func(t *testing.T, in target) string { return e.alb(t, in, true) }},
	}
}

// routeKey is an HTTP API route key for in: GET's route, or an ANY route
// for any other method (an HTTP API routes a HEAD request to one).
func (in target) routeKey() string {
	if in.httpMethod() == "GET" {
		return "GET /orders/{id}"
	}
	return "ANY /orders/{id}"
}

// joined is an HTTP API's view of a multi-value map: repeated values
// joined with commas.
func joined(m map[string][]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, vs := range m {
		out[k] = strings.Join(vs, ",")
	}
	return out
}

// rawPairs is in's query as an ALB hands it to a Lambda: each pair as the
// client wrote it, not decoded.
func (in target) rawPairs() map[string][]string {
	out := map[string][]string{}
	for pair := range strings.SplitSeq(in.wireQuery(), "&") {
		k, v, _ := strings.Cut(pair, "=")
		out[k] = append(out[k], v)
	}
	return out
}

// jsonMap writes m as a JSON object, its strings byte for byte (rawJSON).
func jsonMap[V string | []string](m map[string]V) string {
	var b strings.Builder
	b.WriteByte('{')
	for k, v := range m {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(rawJSON(k) + ":")
		switch v := any(v).(type) {
		case string:
			b.WriteString(rawJSON(v))
		case []string:
			b.WriteByte('[')
			for i, x := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(rawJSON(x))
			}
			b.WriteByte(']')
		}
	}
	b.WriteByte('}')
	return b.String()
}

// headerValues are the x-api-key header's values of in: the subject, twice
// when dupSubject.
func (in target) headerValues() []string {
	if in.dupSubject {
		return []string{in.subject, in.subject}
	}
	return []string{in.subject}
}

// middleware sends GET /orders/42 (or in's method) to a ServeMux routing
// pattern, behind the net/http middleware, in process, so its bytes reach
// the handler as they are: the subject in X-Api-Key (twice: two header
// lines), or in the query as the client spells it.
func (e *hygiene) middleware(t *testing.T, in target, pattern string, inQuery bool) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	target := "/orders/42"
	if inQuery {
		target += "?" + in.wireQuery()
	}
	r := httptest.NewRequest(in.httpMethod(), target, nil)
	if !inQuery {
		r.Header["X-Api-Key"] = in.headerValues()
	}
	w := httptest.NewRecorder()
	e.byPrincipal.Handler(mux, ratelimit.HandlerOptions{API: sampleAPI}).ServeHTTP(w, r)
	return integrationOutcome(t, w.Code, w.Body.String())
}

// integrationOutcome reads what a middleware or integration answer did:
// 401 refused, 429 S's bucket (S is blocked), 200 another's.
func integrationOutcome(t *testing.T, status int, body string) string {
	t.Helper()
	switch status {
	case http.StatusUnauthorized:
		return refused
	case http.StatusTooManyRequests:
		return isS
	case http.StatusOK:
		return isNew
	}
	t.Fatalf("answer = %d %s", status, body)
	return ""
}

// httpAPI sends an HTTP API payload 2.0 integration event, decoded as the
// Lambda runtime decodes it, with the subject in the x-api-key header
// (twice: joined with a comma, as API Gateway joins them) or in the query
// (decoded, repeated values joined).
func (e *hygiene) httpAPI(t *testing.T, in target, inQuery bool) string {
	t.Helper()
	hdr, q := `{"x-api-key":`+rawJSON(strings.Join(in.headerValues(), ","))+`}`, `{}`
	if inQuery {
		_, multi := in.decodedQuery()
		hdr, q = `{}`, jsonMap(joined(multi))
	}
	ev := decode[events.APIGatewayV2HTTPRequest](t, []byte(fmt.Sprintf(`{"version":"2.0","routeKey":%q,"rawPath":"/orders/42","rawQueryString":%s,
		"headers":%s,"queryStringParameters":%s,"requestContext":{"apiId":%q,"http":{"method":%q,"path":"/orders/42","sourceIp":"203.0.113.7"}}}`,
		in.routeKey(), rawJSON(in.wireQuery()), hdr, q, sampleAPI, in.httpMethod())))
	r, err := e.byPrincipal.LimitHTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	}, ratelimit.HandlerOptions{})(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return integrationOutcome(t, r.StatusCode, r.Body)
}

// proxy sends a REST API proxy event with the subject in the x-api-key
// header (twice: two values in multiValueHeaders) or in the query
// (decoded, in both maps, as API Gateway fills them).
func (e *hygiene) proxy(t *testing.T, in target, inQuery bool) string {
	t.Helper()
	vs := in.headerValues()
	hdr, mhdr, q, mq := jsonMap(map[string]string{"x-api-key": vs[len(vs)-1]}), jsonMap(map[string][]string{"x-api-key": vs}), `{}`, `{}`
	if inQuery {
		single, multi := in.decodedQuery()
		hdr, mhdr, q, mq = `{}`, `{}`, jsonMap(single), jsonMap(multi)
	}
	ev := decode[events.APIGatewayProxyRequest](t, []byte(fmt.Sprintf(`{"resource":"/orders/{id}","path":"/orders/42","httpMethod":%q,
		"headers":%s,"multiValueHeaders":%s,"queryStringParameters":%s,"multiValueQueryStringParameters":%s,
		"requestContext":{"apiId":%q,"identity":{"sourceIp":"203.0.113.7"}}}`, in.httpMethod(), hdr, mhdr, q, mq, sampleAPI)))
	r, err := e.byPrincipal.LimitProxy(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 200}, nil
	}, ratelimit.HandlerOptions{})(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return integrationOutcome(t, r.StatusCode, r.Body)
}

// alb sends an ALB event of a multi-value target group with the subject
// in the x-api-key header (twice: two values), or in the query as the
// load balancer passes it: as the client wrote it.
func (e *hygiene) alb(t *testing.T, in target, inQuery bool) string {
	t.Helper()
	hdr, q := map[string][]string{"x-api-key": in.headerValues(), "x-forwarded-for": {"203.0.113.7"}}, map[string][]string{}
	if inQuery {
		delete(hdr, "x-api-key")
		q = in.rawPairs()
	}
	ev := decode[events.ALBTargetGroupRequest](t, []byte(fmt.Sprintf(`{"httpMethod":%q,"path":"/orders/42",
		"multiValueHeaders":%s,"multiValueQueryStringParameters":%s}`, in.httpMethod(), jsonMap(hdr), jsonMap(q))))
	r, err := e.byPrincipal.LimitALB(func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		return events.ALBTargetGroupResponse{StatusCode: 200}, nil
	}, ratelimit.HandlerOptions{API: sampleAPI, ForwardedHops: 1, Resource: func(string, string) string { return "/orders/{id}" }})(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return integrationOutcome(t, r.StatusCode, r.Body)
}

// authorizerREST sends a REST API REQUEST event with the subject in the
// x-api-key header or the api_key query parameter (in the single and
// multi-value maps, as API Gateway fills both; the query decoded) through
// Invoke.
func (e *hygiene) authorizerREST(t *testing.T, in target, where string) string {
	t.Helper()
	vs := in.headerValues()
	single, multi := jsonMap(map[string]string{"x-api-key": vs[len(vs)-1]}), jsonMap(map[string][]string{"x-api-key": vs})
	multiName := "multiValueHeaders"
	if where == "queryStringParameters" {
		s, m := in.decodedQuery()
		single, multi, multiName = jsonMap(s), jsonMap(m), "multiValueQueryStringParameters"
	}
	ev := fmt.Sprintf(`{"type":"REQUEST","methodArn":"arn:aws:execute-api:eu-west-1:123456789012:%s/prod/%s/orders/42",
		"resource":"/orders/{id}","path":"/orders/42","httpMethod":%q,%q:%s,%q:%s,
		"requestContext":{"apiId":%q,"identity":{"sourceIp":"203.0.113.7"}}}`,
		sampleAPI, in.httpMethod(), in.httpMethod(), where, single, multiName, multi, sampleAPI)
	out, err := e.dec.Authorizer.Invoke(context.Background(), []byte(ev))
	if err != nil {
		if err.Error() != "Unauthorized" {
			t.Fatalf("authorizer Invoke: %v", err)
		}
		return refused
	}
	var resp events.APIGatewayCustomAuthorizerResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	// The principalId is the keyed hash of the subject charged; a Deny is
	// a blocked subject's (k1's, H's).
	if resp.PrincipalID == e.hashS || resp.PolicyDocument.Statement[0].Effect == "Deny" {
		return isS
	}
	return isNew
}

// authorizerHTTP sends an HTTP API payload 2.0 event with the subject in
// the x-api-key header or the api_key query parameter (sent twice, API
// Gateway joins the values with a comma) through Invoke.
func (e *hygiene) authorizerHTTP(t *testing.T, in target, inQuery bool) string {
	t.Helper()
	hdr, q := `{"x-api-key":`+rawJSON(strings.Join(in.headerValues(), ","))+`}`, `{}`
	if inQuery {
		_, multi := in.decodedQuery()
		hdr, q = `{}`, jsonMap(joined(multi))
	}
	ev := fmt.Sprintf(`{"version":"2.0","type":"REQUEST","routeArn":"arn:aws:execute-api:eu-west-1:123456789012:%s/$default/%s/orders/42",
		"routeKey":%q,"rawPath":"/orders/42","rawQueryString":%s,"headers":%s,"queryStringParameters":%s,
		"requestContext":{"apiId":%q,"http":{"method":%q,"path":"/orders/42","sourceIp":"203.0.113.7"}}}`,
		sampleAPI, in.httpMethod(), in.routeKey(), rawJSON(in.wireQuery()), hdr, q, sampleAPI, in.httpMethod())
	out, err := e.dec.Authorizer.Invoke(context.Background(), []byte(ev))
	if err != nil {
		if err.Error() != "Unauthorized" {
			t.Fatalf("authorizer Invoke: %v", err)
		}
		return refused
	}
	var resp events.APIGatewayV2CustomAuthorizerSimpleResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.IsAuthorized { // S is blocked
		return isS
	}
	return isNew
}

// body is the JSON body of a check or usage request for in, its strings
// written byte for byte (bytes that are not UTF-8 included).
func body(in target, extra string) string {
	b := `{"subject":` + rawJSON(in.subject)
	if in.dupSubject {
		b += `,"subject":` + rawJSON(in.subject)
	}
	b += `,"api":` + rawJSON(in.api)
	if in.dupAPI {
		b += `,"api":` + rawJSON(in.api)
	}
	return b + `,"route":` + rawJSON(in.route) + extra + "}"
}

// check sends POST /check as a REST proxy event (base64 body, as API
// Gateway sends binary bodies) through the check Lambda's Invoke.
func (e *hygiene) check(t *testing.T, in target) string {
	t.Helper()
	ev, _ := json.Marshal(events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/check", IsBase64Encoded: true,
		Body: base64.StdEncoding.EncodeToString([]byte(body(in, "")))})
	out, err := e.dec.Check.Invoke(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.APIGatewayProxyResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	switch resp.StatusCode {
	case http.StatusBadRequest:
		return refused
	case http.StatusTooManyRequests: // S is blocked
		return isS
	case http.StatusOK:
		return isNew
	}
	t.Fatalf("check = %d %s", resp.StatusCode, resp.Body)
	return ""
}

// admin sends one admin request as API Gateway's REST proxy event (the
// body base64-encoded) through the admin Lambdas' handler.
func (e *hygiene) admin(t *testing.T, method, resource string, subject *string, q url.Values, b string) events.APIGatewayProxyResponse {
	t.Helper()
	ev := events.APIGatewayProxyRequest{HTTPMethod: method, Resource: resource, Path: resource,
		MultiValueQueryStringParameters: q, Body: base64.StdEncoding.EncodeToString([]byte(b)), IsBase64Encoded: true}
	if subject != nil {
		// A path parameter as it appears in the path, percent-encoded.
		enc := url.PathEscape(*subject)
		ev.Path = strings.Replace(resource, "{subject}", enc, 1)
		ev.PathParameters = map[string]string{"subject": enc}
	}
	if b != "" {
		ev.Headers = map[string]string{"Content-Type": "application/json"}
	}
	raw, _ := json.Marshal(ev)
	var decoded events.APIGatewayProxyRequest
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	resp, err := e.adm.Handler("")(context.Background(), decoded)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// usage sends POST /usage of cost 1.
func (e *hygiene) usage(t *testing.T, in target) string {
	t.Helper()
	resp := e.admin(t, "POST", "/usage", nil, nil, body(in, `,"cost":1`))
	if resp.StatusCode == http.StatusBadRequest {
		return refused
	}
	var out admin.UsageResponse
	if err := json.Unmarshal([]byte(resp.Body), &out); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("usage = %d %s", resp.StatusCode, resp.Body)
	}
	if out.Subject == "S" && len(out.Buckets) == 0 { // S's only bucket is blocked: nothing to charge
		return isS
	}
	return isNew
}

// query is the subjects routes' query for in.
func query(in target, withRoute bool) url.Values {
	q := url.Values{"api": {in.api}}
	if in.dupAPI {
		q["api"] = append(q["api"], in.api)
	}
	if withRoute {
		q.Set("route", in.route)
	}
	return q
}

// limits sends GET /subjects/{subject}/limits.
func (e *hygiene) limits(t *testing.T, in target) string {
	t.Helper()
	resp := e.admin(t, "GET", "/subjects/{subject}/limits", &in.subject, query(in, true), "")
	if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusNotFound {
		return refused
	}
	var out admin.SubjectLimitsResponse
	if err := json.Unmarshal([]byte(resp.Body), &out); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("limits = %d %s", resp.StatusCode, resp.Body)
	}
	for _, l := range out.Limits {
		// S's API-wide rule or H's route rule: a blocked subject's own.
		if (out.Subject == "S" || out.Subject == "H") && l.Subject == out.Subject && l.Limit == 0 {
			return isS
		}
	}
	return isNew
}

// reset sends DELETE /subjects/{subject}/buckets and reads which subject's
// buckets it reset from its log line (the keyed hash).
func (e *hygiene) reset(t *testing.T, in target) string {
	t.Helper()
	before := len(e.admLog.String())
	resp := e.admin(t, "DELETE", "/subjects/{subject}/buckets", &in.subject, query(in, false), "")
	if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusNotFound {
		return refused
	}
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("reset = %d %s", resp.StatusCode, resp.Body)
	}
	sc := bufio.NewScanner(strings.NewReader(e.admLog.String()[before:]))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Message     string `json:"message"` // lambdacontext.ReplaceAttr's name for msg
			SubjectHash string `json:"subjectHash"`
			API         string `json:"api"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "subject buckets reset" {
			if line.SubjectHash == e.hashS && line.API == sampleAPI {
				return isS
			}
			return isNew
		}
	}
	t.Fatalf("reset answered 204 without its log line")
	return ""
}

// wrapped sends the sample REST event through a wrapped team authorizer
// that allows it, naming principal and ctxv.
func (e *hygiene) wrapped(t *testing.T, rl *ratelimit.Limiter, principal string, ctxv map[string]any) string {
	t.Helper()
	ev := sample[events.APIGatewayCustomAuthorizerRequestTypeRequest](t, "authorizer-rest.json")
	r, err := rl.WrapREST(restAnswer("Allow", "", principal, ctxv, nil))(context.Background(), ev)
	switch {
	case errors.Is(err, ratelimit.ErrUnauthorized):
		return refused
	case err != nil:
		t.Fatal(err)
	case r.PolicyDocument.Statement[0].Effect == "Deny": // S is blocked
		return isS
	}
	return isNew
}

// rawJSON writes s as a JSON string byte for byte: quotes, backslashes and
// control characters escaped, every other byte as it is (so bytes that are
// not UTF-8 reach a strict decoder).
func rawJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func isUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
