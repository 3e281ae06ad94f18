package ratelimit_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/prommetrics"
)

// addRules creates rules through the admin API of s's deployment, as an
// operator does; a Limiter built after starts with them.
func (s setup) addRules(t testing.TB, rs ...map[string]any) (ids []string) {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string {
		return map[string]string{"REDIS_URL": s.redisURL, "DATABASE_URL": s.dbURL, "REDIS_PREFIX": s.prefix}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := app.NewAdmin(context.Background(), cfg, app.AdminFull, app.Options{Out: s.out})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	for _, r := range rs {
		body, _ := json.Marshal(r)
		resp := serveAdmin(adm.Service, "POST", "/rules", nil, body, "ratelimit-test")
		var created struct{ ID string }
		if resp.Status != http.StatusCreated || json.Unmarshal(resp.Body, &created) != nil {
			t.Fatalf("create rule %v = %d %s", r, resp.Status, resp.Body)
		}
		ids = append(ids, created.ID)
	}
	return ids
}

// limiterWith builds a Limiter on s with o's Sources, JWT and Headers.
func (s setup) limiterWith(t testing.TB, o ratelimit.Options) *ratelimit.Limiter {
	t.Helper()
	o.RedisURL, o.Prefix, o.Out = s.redisURL, s.prefix, s.out
	rl, err := ratelimit.New(context.Background(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(rl.Close)
	return rl
}

// recorder is an Observer keeping every decision.
type recorder struct{ got chan ratelimit.Decision }

func (r recorder) ObserveDecision(d ratelimit.Decision) { r.got <- d }

// problem is a problem+json body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// TestHandler serves a ServeMux behind the middleware over a real HTTP
// server on the test Redis: the rule of the setup (2 a minute on GET
// /orders/{id}) admits two requests of a caller and answers the third
// with 429, Retry-After, the RateLimit fields of both dialects and a
// problem document, without calling the route's handler; another caller
// has its own bucket; a route without a rule is not limited; a request
// without a key is 401.
func TestHandler(t *testing.T) {
	s := newSetup(t)
	rl := s.limiterWith(t, ratelimit.Options{Headers: "draft11,legacy"})
	var served atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "order "+r.PathValue("id"))
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	obs := recorder{got: make(chan ratelimit.Decision, 100)}
	srv := httptest.NewServer(rl.Handler(mux, ratelimit.HandlerOptions{API: "shop", AllowHeaders: true, Observer: obs}))
	defer srv.Close()

	get := func(path, key string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}

	for i, want := range []string{"1", "0"} {
		resp, body := get("/orders/42", "alice")
		if resp.StatusCode != 200 || string(body) != "order 42" {
			t.Fatalf("request %d = %d %q, want 200 from the handler", i+1, resp.StatusCode, body)
		}
		if resp.Header.Get("X-RateLimit-Remaining") != want || !strings.HasSuffix(resp.Header.Get("RateLimit"), ";r="+want+";t=60") && !strings.Contains(resp.Header.Get("RateLimit"), ";r="+want+";") {
			t.Errorf("request %d fields: RateLimit %q X-RateLimit-Remaining %q, want remaining %s",
				i+1, resp.Header.Get("RateLimit"), resp.Header.Get("X-RateLimit-Remaining"), want)
		}
	}
	resp, body := get("/orders/42", "alice")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request = %d %s, want 429", resp.StatusCode, body)
	}
	if served.Load() != 2 {
		t.Errorf("the handler served %d requests, want 2: a denied request reached it", served.Load())
	}
	var p problem
	if err := json.Unmarshal(body, &p); err != nil || p.Status != 429 || p.Type != ratelimit.ProblemTypeBase+"too-many-requests" || !strings.Contains(p.Detail, "retry in 30 s") {
		t.Errorf("429 body = %s (%v), want a problem document saying when to retry", body, err)
	}
	for name, want := range map[string]string{
		"Content-Type": "application/problem+json", "Retry-After": "30", "X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0",
	} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("429 %s = %q, want %q", name, got, want)
		}
	}
	if !strings.Contains(resp.Header.Get("RateLimit-Policy"), ";q=2;w=60") || resp.Header.Get("X-RateLimit-Reset") == "" {
		t.Errorf("429 RateLimit-Policy %q X-RateLimit-Reset %q, want the rule's policy and a reset time",
			resp.Header.Get("RateLimit-Policy"), resp.Header.Get("X-RateLimit-Reset"))
	}

	if resp, _ := get("/orders/42", "bob"); resp.StatusCode != 200 {
		t.Errorf("another caller = %d, want 200: each caller has its own bucket", resp.StatusCode)
	}
	for range 3 {
		if resp, _ := get("/health", "alice"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
			t.Errorf("GET /health = %d RateLimit %q, want 200 without fields: no rule applies", resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
	resp, body = get("/orders/42", "")
	if err := json.Unmarshal(body, &p); resp.StatusCode != 401 || err != nil || p.Type != ratelimit.ProblemTypeBase+"unauthorized" || !strings.Contains(p.Detail, "header:x-api-key") {
		t.Errorf("without a key = %d %s, want 401 naming the source", resp.StatusCode, body)
	}

	close(obs.got)
	count := map[string]int{}
	var remaining []int64 // alice's on GET /orders/42: RateLimit's r
	for d := range obs.got {
		count[d.Outcome]++
		if d.Outcome == ratelimit.OutcomeDeny && (d.API != "shop" || d.Rule == "") {
			t.Errorf("deny decision = %+v, want api shop and the rule", d)
		}
		if d.Rule != "" && (d.Limit != 2 || d.Window != time.Minute) {
			t.Errorf("decision %+v, want the rule's RateLimit-Policy q=2, w=60s", d)
		}
		if d.Rule == "" && d.Limit+d.Remaining+int64(d.Window) != 0 {
			t.Errorf("decision without a rule %+v, want no numbers", d)
		}
		if d.Rule != "" && len(remaining) < 3 {
			remaining = append(remaining, d.Remaining)
		}
	}
	if !slices.Equal(remaining, []int64{1, 0, 0}) {
		t.Errorf("observed remaining %v, want 1, 0, 0 as RateLimit's r said", remaining)
	}
	if want := map[string]int{"allow": 6, "deny": 1, "unauthorized": 1}; !equalCounts(count, want) {
		t.Errorf("observed outcomes = %v, want %v", count, want)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestHandlerRoutes checks which route the rules see: the pattern of a
// handler the mux calls (r.Pattern), the mux's pattern when the middleware
// wraps the mux, a wildcard path as API Gateway's greedy parameter, and
// the Resource func without a pattern. Each route has a rule of limit 0:
// a request that reaches its rule is denied.
func TestHandlerRoutes(t *testing.T) {
	s := newSetup(t)
	s.addRules(t,
		map[string]any{"api": "shop", "route": "GET /files/{path+}", "subject": "*", "limit": 0, "period": "1m"},
		map[string]any{"api": "shop", "route": "POST /carts/{id}", "subject": "*", "limit": 0, "period": "1m"},
		map[string]any{"api": "shop", "route": "GET /legacy/{id}", "subject": "*", "limit": 0, "period": "1m"},
	)
	rl := s.limiterWith(t, ratelimit.Options{})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	o := ratelimit.HandlerOptions{API: "shop"}

	inner := http.NewServeMux() // the middleware inside: r.Pattern
	inner.Handle("GET /files/{path...}", rl.Handler(ok, o))
	inner.Handle("POST /carts/{id}", rl.Handler(ok, o))
	inner.Handle("GET /other/{id}", rl.Handler(ok, o))
	outer := http.NewServeMux() // the middleware outside: the mux's pattern
	outer.Handle("GET /files/{path...}", ok)
	outer.Handle("POST /carts/{id}", ok)
	outer.Handle("GET /other/{id}", ok)
	legacy := ratelimit.HandlerOptions{API: "shop", Resource: func(method, path string) string {
		if strings.HasPrefix(path, "/legacy/") {
			return "/legacy/{id}"
		}
		return ""
	}}
	for _, h := range []struct {
		name string
		h    http.Handler
	}{
		{"inside the mux", inner},
		{"around the mux", rl.Handler(outer, o)},
		// A limited sub-mux mounted on another mux under a prefix: the
		// outer mux sets r.Pattern ("/"), the inner one routes.
		{"around a mounted mux", mounted(rl.Handler(outer, o))},
	} {
		for _, tt := range []struct {
			method, path string
			want         int
		}{
			{"GET", "/files/a/b.txt", 429},
			{"POST", "/carts/7", 429},
			{"GET", "/other/7", 200},
		} {
			r := httptest.NewRequest(tt.method, tt.path, nil)
			r.Header.Set("X-Api-Key", "k")
			w := httptest.NewRecorder()
			h.h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Errorf("%s: %s %s = %d, want %d", h.name, tt.method, tt.path, w.Code, tt.want)
			}
		}
	}
	for path, want := range map[string]int{"/legacy/9": 429, "/new/9": 200} {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("X-Api-Key", "k")
		w := httptest.NewRecorder()
		rl.Handler(ok, legacy).ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Resource func: GET %s = %d, want %d", path, w.Code, want)
		}
	}
}

// mounted is h mounted on a mux of its own under "/", as a service mounts
// its limited API mux beside unlimited routes.
func mounted(h http.Handler) http.Handler {
	top := http.NewServeMux()
	top.Handle("/", h)
	top.Handle("GET /healthz", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	return top
}

// TestHandlerSubjectFunc limits by the subject a Subject func names (the
// caller's own authentication), through the same hygiene: an empty or
// hostile one is 401, never charged to anyone.
func TestHandlerSubjectFunc(t *testing.T) {
	s := newSetup(t)
	rl := s.limiterWith(t, ratelimit.Options{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {})
	h := rl.Handler(mux, ratelimit.HandlerOptions{API: "shop", Subject: func(r *http.Request) string { return r.Header.Get("X-User") }})
	send := func(user string) int {
		r := httptest.NewRequest("GET", "/orders/1", nil)
		r.Header.Set("X-User", user)
		r.Header.Set("X-Api-Key", "ignored: the Subject func names the caller")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i, want := range []int{200, 200, 429} {
		if got := send(" u1 "); got != want {
			t.Errorf("request %d of u1 = %d, want %d", i+1, got, want)
		}
	}
	for _, bad := range []string{"", "   ", "u\x00", "u\xff", strings.Repeat("u", ratelimit.MaxSubjectLen+1)} {
		if got := send(bad); got != 401 {
			t.Errorf("Subject %q = %d, want 401", bad, got)
		}
	}
}

// TestHandlerModes checks the rules' modes through the middleware as the
// authorizer applies them: a shadow rule over its limit lets the request
// through (observed as shadowDeny); with Redis down, a rule failing open
// lets it through (observed as failOpen) and one failing closed answers
// 429 (observed as failClosed).
func TestHandlerModes(t *testing.T) {
	s := newSetup(t)
	s.addRules(t,
		map[string]any{"api": "modes", "route": "GET /shadow", "subject": "*", "limit": 0, "period": "1m", "mode": "shadow"},
		map[string]any{"api": "modes", "route": "GET /open", "subject": "*", "limit": 5, "period": "1m", "failure_mode": "open"},
		map[string]any{"api": "modes", "route": "GET /closed", "subject": "*", "limit": 5, "period": "1m", "failure_mode": "closed"},
	)
	up := s.limiterWith(t, ratelimit.Options{})
	// Redis down: a client through a proxy that is up while the Limiter
	// loads the rules snapshot, then taken down.
	u, err := url.Parse(s.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	proxy.Up(t)
	down := s.limiterWith(t, ratelimit.Options{Redis: redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})})
	proxy.Down()

	mux := http.NewServeMux()
	for _, p := range []string{"GET /shadow", "GET /open", "GET /closed"} {
		mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	for _, tt := range []struct {
		name       string
		rl         *ratelimit.Limiter
		path       string
		status     int
		outcome    string
		open, shut bool
	}{
		{"shadow rule over its limit", up, "/shadow", 200, ratelimit.OutcomeShadowDeny, false, false},
		{"redis down, failure mode open", down, "/open", 200, ratelimit.OutcomeAllow, true, false},
		{"redis down, failure mode closed", down, "/closed", 429, ratelimit.OutcomeDeny, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obs := recorder{got: make(chan ratelimit.Decision, 1)}
			r := httptest.NewRequest("GET", tt.path, nil)
			r.Header.Set("X-Api-Key", "k")
			w := httptest.NewRecorder()
			tt.rl.Handler(mux, ratelimit.HandlerOptions{API: "modes", Observer: obs}).ServeHTTP(w, r)
			d := <-obs.got
			if w.Code != tt.status || d.Outcome != tt.outcome || d.FailOpen != tt.open || d.FailClosed != tt.shut {
				t.Errorf("GET %s = %d, observed %+v; want %d, %s, failOpen %v, failClosed %v", tt.path, w.Code, d, tt.status, tt.outcome, tt.open, tt.shut)
			}
		})
	}
}

// TestHandlerPrometheus serves requests through the middleware with the
// Prometheus observer and scrapes it: the decisions by api, rule and
// outcome, and the Limiter's health gauges.
func TestHandlerPrometheus(t *testing.T) {
	s := newSetup(t)
	rl := s.limiterWith(t, ratelimit.Options{})
	reg := prometheus.NewRegistry()
	m, err := prommetrics.New(reg, prommetrics.Options{Health: rl.Health})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(http.ResponseWriter, *http.Request) {})
	h := rl.Handler(mux, ratelimit.HandlerOptions{API: "shop", Observer: m})
	for range 3 {
		r := httptest.NewRequest("GET", "/orders/1", nil)
		r.Header.Set("X-Api-Key", "k")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	got := w.Body.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^sluice_decisions_total\{api="shop",kind="rate",outcome="allow",rule="[^"]+"\} 2$`),
		regexp.MustCompile(`(?m)^sluice_decisions_total\{api="shop",kind="rate",outcome="deny",rule="[^"]+"\} 1$`),
		regexp.MustCompile(`(?m)^sluice_redis_latency_seconds_count 3$`),
		regexp.MustCompile(`(?m)^sluice_breaker_open 0$`),
	} {
		if !want.MatchString(got) {
			t.Errorf("scrape lacks %s:\n%s", want, got)
		}
	}
}

// TestHandlerPrometheusInFlight: a concurrency rule of 2 behind the
// middleware with the Prometheus observer. While two requests are in
// their handler the scrape shows sluice_in_flight 2, the third request's
// 429 is counted with kind="concurrency", and a request of the setup's
// rate rule with kind="rate"; once the two return, sluice_in_flight is 0.
func TestHandlerPrometheusInFlight(t *testing.T) {
	s := newSetup(t)
	ids := s.addRules(t, map[string]any{"api": "shop", "route": "POST /exports", "subject": "*", "kind": "concurrency", "limit": 2, "period": "1h"})
	rl := s.limiterWith(t, ratelimit.Options{})
	reg := prometheus.NewRegistry()
	m, err := prommetrics.New(reg, prommetrics.Options{Health: rl.Health})
	if err != nil {
		t.Fatal(err)
	}
	entered, finish := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exports", func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-finish
	})
	mux.HandleFunc("GET /orders/{id}", func(http.ResponseWriter, *http.Request) {})
	h := rl.Handler(mux, ratelimit.HandlerOptions{API: "shop", Observer: m})
	serve := func(method, path string) int {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("X-Api-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	scrape := func() string {
		w := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		return w.Body.String()
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if code := serve("POST", "/exports"); code != http.StatusOK {
				t.Errorf("a held export = %d, want 200", code)
			}
		})
		<-entered
	}
	if code := serve("POST", "/exports"); code != http.StatusTooManyRequests {
		t.Errorf("a third export with two in flight = %d, want 429", code)
	}
	if code := serve("GET", "/orders/1"); code != http.StatusOK {
		t.Errorf("GET /orders/1 = %d, want 200", code)
	}
	got := scrape()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^sluice_in_flight 2$`),
		regexp.MustCompile(`(?m)^sluice_decisions_total\{api="shop",kind="concurrency",outcome="allow",rule="` + ids[0] + `"\} 2$`),
		regexp.MustCompile(`(?m)^sluice_decisions_total\{api="shop",kind="concurrency",outcome="deny",rule="` + ids[0] + `"\} 1$`),
		regexp.MustCompile(`(?m)^sluice_decisions_total\{api="shop",kind="rate",outcome="allow",rule="[^"]+"\} 1$`),
	} {
		if !want.MatchString(got) {
			t.Errorf("scrape with two exports in flight lacks %s:\n%s", want, got)
		}
	}
	close(finish)
	wg.Wait()
	if got := scrape(); !strings.Contains(got, "\nsluice_in_flight 0\n") {
		t.Errorf("scrape after the exports ended lacks sluice_in_flight 0:\n%s", got)
	}
}

// TestProblemTypesDocumented: every problem type the middleware and the
// wrappers answer with names a section of docs/middleware.md.
func TestProblemTypesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/middleware.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(ratelimit.ProblemTypeBase, "/docs/middleware.md#") {
		t.Fatalf("ProblemTypeBase = %q, want docs/middleware.md", ratelimit.ProblemTypeBase)
	}
	for _, slug := range []string{"too-many-requests", "unauthorized", "internal-error"} {
		if !strings.Contains(string(doc), "\n### "+slug+"\n") {
			t.Errorf("docs/middleware.md has no section %q", slug)
		}
	}
}

// TestHandlerJWT limits by a verified token's claim through the
// middleware: a valid bearer token is charged to its sub; a missing,
// doubled, forged or foreign-scheme Authorization is 401 with
// WWW-Authenticate, never charged.
func TestHandlerJWT(t *testing.T) {
	s := newSetup(t)
	pem, err := identity.NewDevKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := identity.ParseDevKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := identity.NewDevIssuer(identity.DevIssuerName, key)
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(iss.JWKS()) }))
	defer jwks.Close()
	rl := s.limiterWith(t, ratelimit.Options{Sources: "jwt:sub", JWTIssuer: identity.DevIssuerName, JWTAudience: identity.DevAudience, JWTJWKSURL: jwks.URL})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(http.ResponseWriter, *http.Request) {})
	h := rl.Handler(mux, ratelimit.HandlerOptions{API: "shop"})
	sign := func(sub string) string {
		tok, err := iss.Sign(sub, nil, time.Minute, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	send := func(auth ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/orders/1", nil)
		r.Header["Authorization"] = auth
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	alice := sign("alice")
	for i, want := range []int{200, 200, 429} {
		if w := send("Bearer " + alice); w.Code != want {
			t.Fatalf("request %d of alice = %d %s, want %d", i+1, w.Code, w.Body, want)
		}
	}
	forged := alice[:len(alice)-4] + "AAAA"
	for name, auth := range map[string][]string{
		"no header": nil, "two tokens": {"Bearer " + sign("bob"), "Bearer " + sign("bob")}, "forged": {"Bearer " + forged},
		"basic": {"Basic Ym9iOnB3"}, "not a token": {"Bearer x.y.z"},
	} {
		w := send(auth...)
		if w.Code != 401 || w.Header().Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s = %d (WWW-Authenticate %q), want 401 asking for a bearer token", name, w.Code, w.Header().Get("WWW-Authenticate"))
		}
	}
	if w := send("Bearer " + sign("bob")); w.Code != 200 {
		t.Errorf("bob after the refused requests = %d, want 200: a refusal was charged", w.Code)
	}
}
