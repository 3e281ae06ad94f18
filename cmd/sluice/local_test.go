package main

import (
	"github.com/sluicehq/sluice/internal/local"

	"github.com/sluicehq/sluice/internal/load"

	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// sluiceBin is the sluice binary TestMain builds once, for the one test
// of the built binary (TestBinary) and TestConsoleCommand; every other
// test runs the command tree in process (run), `sluice local` included.
var sluiceBin string

// stateDir keeps the keys of every sluice the tests start, not the user's
// config directory.
var stateDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		os.Exit(1)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	stateDir = filepath.Join(dir, "state")
	os.Setenv("SLUICE_STATE_DIR", stateDir) // for the binary's runs
	build := exec.Command("go", "build", "-o", sluiceBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "TestMain: build sluice:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// localProc is one `sluice local`, run in process.
type localProc struct {
	base  string // http://127.0.0.1:<port>
	token string
	out   *testenv.Buffer // stdout and stderr, for failure messages
	// stop interrupts it (as Ctrl-C does: its context ends) and checks
	// that it exits cleanly; it runs once, by itself when the test ends.
	stop func()
}

var demoLine = regexp.MustCompile(`demo API\s+(http://\S+)/\s`)

// environ returns a getenv of the process environment with vars
// ("K=V") over it.
func environ(vars ...string) func(string) string {
	m := map[string]string{}
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string {
		if v, ok := m[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
}

// runLocal runs `sluice local args...` in process with vars over the
// environment; it returns the exit code once ctx ends or it fails.
func runLocal(ctx context.Context, stdout, stderr io.Writer, vars []string, args ...string) int {
	vars = append([]string{"SLUICE_STATE_DIR=" + stateDir}, vars...)
	return run(ctx, &env{stdout: stdout, stderr: stderr, getenv: environ(vars...)}, append([]string{"local"}, args...))
}

// startLocal starts `sluice local` in process on a free port with env
// added to the environment, waits for its banner, and stops it (its
// context ends, as at Ctrl-C) when the test ends, checking that it shuts
// down cleanly.
func startLocal(t *testing.T, env []string, args ...string) *localProc {
	t.Helper()
	p := &localProc{token: "test-" + testenv.Random(t), out: &testenv.Buffer{}}
	// REDIS_TIMEOUT 1s unless a test sets its own: at the 25 ms default a
	// loaded make test (-race, in process) failed decisions open, which
	// the rules allow, and the load and check tests read them as
	// over-admission.
	vars := append([]string{"SLUICE_ADMIN_TOKEN=" + p.token, "REDIS_URL=", "DATABASE_URL=", "LOG_LEVEL=warn", "REDIS_TIMEOUT=1s"}, env...)
	ctx, cancel := context.WithCancel(context.Background())
	stdout, w := io.Pipe()
	exited := make(chan int, 1)
	go func() {
		code := runLocal(ctx, w, p.out, vars, append(localDefaults(args), args...)...)
		w.Close()
		exited <- code
	}()
	ready := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		sent, base := false, ""
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.out, line)
			if m := demoLine.FindStringSubmatch(line + " "); m != nil && base == "" {
				base = m[1]
			}
			// Ready once the whole banner is out, so a test that reads it
			// finds every line.
			if base != "" && !sent && strings.HasPrefix(line, "Ctrl-C stops") {
				ready <- base
				sent = true
			}
		}
		io.Copy(io.Discard, stdout) //nolint:errcheck // a long line: keep the writer unblocked
	}()
	p.stop = sync.OnceFunc(func() {
		cancel()
		select {
		case code := <-exited:
			<-scanned
			if code != 0 {
				t.Errorf("sluice local after Ctrl-C: exit %d, want a clean exit; output:\n%s", code, p.out)
			} else if !strings.Contains(p.out.String(), "shutting down") {
				t.Errorf("sluice local exited without saying it was shutting down; output:\n%s", p.out)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("sluice local did not stop within 15s of Ctrl-C; output:\n%s", p.out)
		}
	})
	t.Cleanup(p.stop)
	select {
	case p.base = <-ready:
	case code := <-exited:
		exited <- code
		t.Fatalf("sluice local exited before serving: exit %d; output:\n%s", code, p.out)
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice local printed no banner within 60s; output:\n%s", p.out)
	}
	return p
}

// localDefaults are the flags startLocal adds, less those args gives
// itself: a flag given twice is refused.
func localDefaults(args []string) []string {
	var out []string
	for _, d := range [][2]string{{"--addr", "127.0.0.1:0"}, {"--seed", "../../examples/rules.json"}} {
		if !slices.ContainsFunc(args, func(a string) bool { return a == d[0] || strings.HasPrefix(a, d[0]+"=") }) {
			out = append(out, d[0], d[1])
		}
	}
	return out
}

// get sends GET base+path with subject in x-api-key ("" sends none).
func (p *localProc) get(t *testing.T, path, subject string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if subject != "" {
		req.Header.Set("x-api-key", subject)
	}
	return do(t, req)
}

// adminGet sends GET base+path with the admin token.
func (p *localProc) adminGet(t *testing.T, path string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	return do(t, req)
}

// do sends req and returns the response and its whole body.
func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", req.Method, req.URL.Path, err)
	}
	return resp, b
}

// cli runs a sluice command line in process against p's admin API.
func (p *localProc) cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), &env{stdout: &o, stderr: &e, stdin: strings.NewReader(""),
		getenv: environ("SLUICE_ENDPOINT="+p.base+"/admin", "SLUICE_ADMIN_TOKEN="+p.token)}, args)
	return o.String(), e.String(), code
}

// cliJSON runs the CLI with -o json, wants exit 0 and decodes stdout.
func (p *localProc) cliJSON(t *testing.T, out any, args ...string) {
	t.Helper()
	stdout, stderr, code := p.cli(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("sluice %s = exit %d, want 0; stderr:\n%s", strings.Join(args, " "), code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		t.Fatalf("sluice %s: decode %q: %v", strings.Join(args, " "), stdout, err)
	}
}

type backend struct {
	name  string
	env   func(t *testing.T) []string
	extra func(t *testing.T) []string // flags
}

func backends() []backend {
	return []backend{
		{name: "embedded", env: func(*testing.T) []string { return nil }, extra: func(*testing.T) []string { return nil }},
		{
			name: "redis+postgres",
			env: func(t *testing.T) []string {
				// A fresh, empty database: sluice local migrates it itself.
				return []string{"REDIS_URL=" + testenv.RedisURL(t), "DATABASE_URL=" + pgtest.NewEmptyDatabase(t)}
			},
			extra: func(t *testing.T) []string {
				prefix := testenv.Prefix(t, "local")
				// Our keys go when the test ends: the rules snapshot and
				// version do not expire by themselves.
				testenv.DeleteKeys(t, testenv.Redis(t), prefix)
				return []string{"--redis-prefix", prefix}
			},
		},
	}
}

// TestLocal drives `sluice local` over HTTP and through the CLI, once on
// the embedded defaults and once on real Redis and PostgreSQL.
func TestLocal(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			env := b.env(t)
			p := startLocal(t, env, b.extra(t)...)

			t.Run("allow then 429", func(t *testing.T) { testAllowThenDeny(t, p) })
			t.Run("no subject is 401", func(t *testing.T) { testNoSubject(t, p) })
			t.Run("stacked route limit", func(t *testing.T) { testStacked(t, p) })
			t.Run("unknown resource is 404", func(t *testing.T) {
				resp, _ := p.get(t, "/nope/nope", "alice")
				if resp.StatusCode != http.StatusNotFound {
					t.Errorf("GET /nope/nope = %d, want 404", resp.StatusCode)
				}
			})
			t.Run("admin needs the token", func(t *testing.T) { testAdminToken(t, p) })
			t.Run("check API", func(t *testing.T) { testCheck(t, p) })
			t.Run("usage API", func(t *testing.T) { testUsage(t, p) })
			t.Run("admin CRUD through the CLI", func(t *testing.T) { testCLI(t, p) })
			t.Run("rule change applies within 2s", func(t *testing.T) { testRuleChange(t, p) })
			t.Run("load finds no over-admission", func(t *testing.T) { testLoad(t, p) })
			t.Run("stats name the denied subject", func(t *testing.T) { testStats(t, p) })
			t.Run("shadow denials are the shadow rule's", func(t *testing.T) { testShadowStats(t, p) })
			t.Run("rules put --expires-at", func(t *testing.T) { testExpiresAt(t, p) })
		})
	}
}

// TestLocalHeaderDialects runs sluice local with RATELIMIT_HEADERS and
// --ratelimit-headers: the flag wins over the variable, the 429 carries the
// chosen dialects' fields and Retry-After and no other dialect's, and a
// dialect it does not know stops it at start with an error naming the
// variable.
func TestLocalHeaderDialects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      []string
		args     []string
		want     []string // fields the 429 must carry
		wantNone []string // fields it must not
	}{
		{"variable", []string{"RATELIMIT_HEADERS=draft6"}, nil,
			[]string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"},
			[]string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit"}},
		{"flag wins", []string{"RATELIMIT_HEADERS=draft6"}, []string{"--ratelimit-headers", "legacy,draft11"},
			[]string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit", "Retry-After"},
			[]string{"RateLimit-Limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startLocal(t, tt.env, tt.args...)
			subject := "dialect-" + testenv.Random(t)
			var resp *http.Response
			for range 4 { // GET /search: 3 a minute (examples/rules.json)
				resp, _ = p.get(t, "/search", subject)
			}
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("GET /search #4 = %d, want 429", resp.StatusCode)
			}
			for _, f := range tt.want {
				if len(resp.Header.Values(f)) == 0 {
					t.Errorf("429 lacks %s: %v", f, resp.Header)
				}
			}
			for _, f := range tt.wantNone {
				if len(resp.Header.Values(f)) > 0 {
					t.Errorf("429 has %s, not chosen: %v", f, resp.Header)
				}
			}
			if v := resp.Header.Get("X-RateLimit-Reset"); v != "" {
				reset, err := strconv.ParseInt(v, 10, 64)
				if now := time.Now().Unix(); err != nil || reset < now || reset > now+61 {
					t.Errorf("X-RateLimit-Reset = %q, want a Unix time within a minute of %d", v, now)
				}
			}
		})
	}
	t.Run("unknown dialect", func(t *testing.T) {
		t.Parallel()
		var out testenv.Buffer
		code := runLocal(context.Background(), &out, &out, []string{"REDIS_URL=", "DATABASE_URL="}, "--addr", "127.0.0.1:0", "--ratelimit-headers", "draft11,x-ratelimit")
		if code != 2 || !strings.Contains(out.String(), `RATELIMIT_HEADERS: unknown dialect "x-ratelimit"`) {
			t.Errorf("sluice local --ratelimit-headers draft11,x-ratelimit = exit %d:\n%s\nwant exit 2 and a start-up error naming RATELIMIT_HEADERS", code, out.String())
		}
	})
}

func testAllowThenDeny(t *testing.T, p *localProc) {
	subject := "allow-" + testenv.Random(t)
	// GET /search: 3 a minute (examples/rules.json).
	for i := range 3 {
		resp, body := p.get(t, "/search", subject)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /search #%d = %d %s, want 200", i+1, resp.StatusCode, body)
		}
		if resp.Header.Get("RateLimit-Policy") == "" || resp.Header.Get("RateLimit") == "" {
			t.Errorf("GET /search #%d headers = %v, want RateLimit-Policy and RateLimit", i+1, resp.Header)
		}
		var echo struct {
			Resource   string         `json:"resource"`
			Authorizer map[string]any `json:"authorizer"`
		}
		if err := json.Unmarshal(body, &echo); err != nil {
			t.Fatalf("GET /search: decode echo: %v", err)
		}
		if echo.Resource != "/search" || echo.Authorizer["principalId"] == "" || echo.Authorizer["remaining"] != float64(2-i) {
			t.Errorf("GET /search #%d echo = %+v, want resource /search, a principalId and remaining %d", i+1, echo, 2-i)
		}
	}
	resp, body := p.get(t, "/search", subject)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("GET /search #4 = %d %s, want 429", resp.StatusCode, body)
	}
	// One token every 20 s; the header rounds up to whole seconds.
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 19 || ra > 20 {
		t.Errorf("GET /search #4 Retry-After = %q, want 19 or 20 (3 per minute)", resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(resp.Header.Get("RateLimit-Policy"), ";q=3;w=60") {
		t.Errorf("GET /search #4 RateLimit-Policy = %q, want q=3;w=60", resp.Header.Get("RateLimit-Policy"))
	}
	if !strings.Contains(resp.Header.Get("RateLimit"), ";r=0;") {
		t.Errorf("GET /search #4 RateLimit = %q, want r=0", resp.Header.Get("RateLimit"))
	}
	// The numbers are JSON numbers, as the check API's are.
	var deny map[string]any
	if err := json.Unmarshal(body, &deny); err != nil {
		t.Fatalf("429 body %s: %v", body, err)
	}
	if deny["message"] != "Too Many Requests" || deny["retryAfter"] != float64(ra) || deny["limit"] != 3.0 || deny["remaining"] != 0.0 {
		t.Errorf("429 body = %v, want message, retryAfter = Retry-After, limit 3, remaining 0 (numbers)", deny)
	}
}

func testNoSubject(t *testing.T, p *localProc) {
	resp, body := p.get(t, "/hello", "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /hello without x-api-key = %d %s, want 401", resp.StatusCode, body)
	}
	if !strings.Contains(string(body), `"Unauthorized"`) {
		t.Errorf("401 body = %s, want message Unauthorized", body)
	}
	// The query string is a subject source too.
	resp, body = p.get(t, "/hello?api_key=q-"+testenv.Random(t), "")
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /hello?api_key= = %d %s, want 200", resp.StatusCode, body)
	}
}

// testStacked: a request is charged on the API-wide rule (10/min) and the
// route rule (3/min); a request denied by one charges neither.
func testStacked(t *testing.T, p *localProc) {
	subject := "stack-" + testenv.Random(t)
	var got []int
	for range 5 {
		resp, _ := p.get(t, "/search", subject)
		got = append(got, resp.StatusCode)
	}
	for range 8 {
		resp, _ := p.get(t, "/hello", subject)
		got = append(got, resp.StatusCode)
	}
	// 3 searches pass and spend 3 of the 10 API-wide tokens; the 2 denied
	// ones spend nothing; 7 hellos pass, the 8th is denied by the API rule.
	want := []int{200, 200, 200, 429, 429, 200, 200, 200, 200, 200, 200, 200, 429}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statuses of 5 × /search then 8 × /hello = %v, want %v", got, want)
	}
	resp, _ := p.get(t, "/hello", subject)
	if !strings.Contains(resp.Header.Get("RateLimit-Policy"), ";q=10;w=60") {
		t.Errorf("denied /hello RateLimit-Policy = %q, want the API-wide rule's q=10;w=60", resp.Header.Get("RateLimit-Policy"))
	}
	// The partner key's API-wide rule is its plan (100/min), not the
	// default 10/min.
	partner := 0
	for range 12 {
		if resp, _ := p.get(t, "/hello", "partner-key"); resp.StatusCode == http.StatusOK {
			partner++
		}
	}
	if partner != 12 {
		t.Errorf("partner-key: %d of 12 /hello allowed, want 12 (plan partner, 100/min)", partner)
	}
}

// post sends POST base+path with body as JSON and auth as Authorization
// ("" sends none), and returns the response and its body.
func (p *localProc) post(t *testing.T, path, auth, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return do(t, req)
}

// testUsage reports usage through POST /admin/usage: the token is
// required, and a report that puts the seeded GET /search rule (3 a
// minute, a token every 20 s) 3 into debt denies the next check for 80 s.
func testUsage(t *testing.T, p *localProc) {
	subject := "usage-" + testenv.Random(t)
	usage := `{"subject":"` + subject + `","api":"demo","route":"GET /search","cost":5}`
	if resp, _ := p.post(t, "/admin/usage", "", usage); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /admin/usage without the token = %d, want 401", resp.StatusCode)
	}
	auth := "Bearer " + p.token
	check := `{"subject":"` + subject + `","api":"demo","route":"GET /search"}`
	if resp, b := p.post(t, "/admin/check", auth, check); resp.StatusCode != http.StatusOK {
		t.Fatalf("check = %d %s, want 200", resp.StatusCode, b)
	}
	resp, b := p.post(t, "/admin/usage", auth, usage)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"remaining":-3`) {
		t.Fatalf("POST /admin/usage = %d %s, want 200 with the bucket at -3", resp.StatusCode, b)
	}
	resp, b = p.post(t, "/admin/check", auth, check)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "80" {
		t.Errorf("check after the debt = %d %s (Retry-After %q), want 429 with Retry-After 80", resp.StatusCode, b, resp.Header.Get("Retry-After"))
	}
}

// testCheck drives POST /admin/check as a service not behind API Gateway
// would: the token is required, the seeded GET /search rule (3 a minute)
// allows three and denies the fourth with Retry-After, and a bad body is a
// 400 problem naming its field.
func testCheck(t *testing.T, p *localProc) {
	subject := "check-" + testenv.Random(t)
	body := `{"subject":"` + subject + `","api":"demo","route":"GET /search"}`
	if resp, _ := p.post(t, "/admin/check", "", body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /admin/check without the token = %d, want 401", resp.StatusCode)
	}
	auth := "Bearer " + p.token
	for i := range 4 {
		resp, b := p.post(t, "/admin/check", auth, body)
		var got struct {
			Allowed    bool   `json:"allowed"`
			Limit      int64  `json:"limit"`
			Remaining  int64  `json:"remaining"`
			RetryAfter int64  `json:"retryAfter"`
			Rule       string `json:"rule"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("POST /admin/check #%d: decode %q: %v", i+1, b, err)
		}
		switch {
		case i < 3 && (resp.StatusCode != http.StatusOK || !got.Allowed || got.Limit != 3 || got.Remaining != int64(2-i)):
			t.Errorf("check #%d = %d %s, want 200 allowed, limit 3, remaining %d", i+1, resp.StatusCode, b, 2-i)
		case i == 3 && (resp.StatusCode != http.StatusTooManyRequests || got.Allowed || got.RetryAfter < 1 || resp.Header.Get("Retry-After") == ""):
			t.Errorf("check #4 = %d %s (Retry-After %q), want 429 with a retry-after", resp.StatusCode, b, resp.Header.Get("Retry-After"))
		}
		if resp.Header.Get("RateLimit-Policy") == "" {
			t.Errorf("check #%d headers = %v, want RateLimit-Policy", i+1, resp.Header)
		}
	}
	resp, b := p.post(t, "/admin/check", auth, `{"subject":"x","api":"demo","route":"FETCH"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"route"`) ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("check with a bad route = %d %s %s, want a 400 problem naming route", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

func testAdminToken(t *testing.T, p *localProc) {
	for _, auth := range []string{"", "Bearer wrong", "Basic " + p.token, "Bearer " + p.token + "x"} {
		req, _ := http.NewRequest(http.MethodGet, p.base+"/admin/rules", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /admin/rules with Authorization %q = %d, want 401", auth, resp.StatusCode)
		}
	}
	if resp, _ := p.adminGet(t, "/admin/rules"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /admin/rules with the token = %d, want 200", resp.StatusCode)
	}
}

func testCLI(t *testing.T, p *localProc) {
	route := "DELETE /items/{id}"
	var created rules.Rule
	p.cliJSON(t, &created, "rules", "put", "--api", "demo", "--route", route, "--subject", "*", "--limit", "2", "--period", "1m", "--description", "cli test")
	if created.ID == "" || created.Version != 1 || *created.Limit != 2 || created.Route != route {
		t.Fatalf("rules put (create) = %+v, want a new rule, version 1, limit 2", created)
	}

	var got rules.Rule
	p.cliJSON(t, &got, "rules", "get", created.ID)
	if got.ID != created.ID || got.Description != "cli test" {
		t.Errorf("rules get = %+v, want the created rule", got)
	}

	// Update by id: only --limit changes; If-Match the current version.
	var updated rules.Rule
	p.cliJSON(t, &updated, "rules", "put", "--id", created.ID, "--limit", "4")
	if updated.Version != 2 || *updated.Limit != 4 || updated.Route != route || updated.Description != "cli test" {
		t.Errorf("rules put --id --limit 4 = %+v, want version 2, limit 4, the rest kept", updated)
	}
	// Update by scope, no id.
	p.cliJSON(t, &updated, "rules", "put", "--api", "demo", "--route", route, "--subject", "*", "--burst", "6")
	if updated.ID != created.ID || updated.Version != 3 || *updated.Burst != 6 || *updated.Limit != 4 {
		t.Errorf("rules put by scope --burst 6 = %+v, want the same rule, version 3, burst 6, limit 4", updated)
	}
	// The same again changes nothing: the API answers version 3, and the
	// CLI says unchanged, not "updated … to version 3".
	out, stderr, code := p.cli(t, "rules", "put", "--id", created.ID, "--burst", "6")
	if want := "rule " + created.ID + " unchanged (already so at version 3)"; code != 0 || !strings.Contains(stderr, want) ||
		strings.Contains(stderr, "updated") || !strings.Contains(out, created.ID) {
		t.Errorf("rules put --burst 6 again (a no-op) = exit %d, stderr %q, want exit 0 saying %q, the rule on stdout", code, stderr, want)
	}
	_, stderr, code = p.cli(t, "rules", "put", "--id", created.ID, "--limit", "4", "--burst", "7")
	if want := "updated rule " + created.ID + " to version 4"; code != 0 || !strings.Contains(stderr, want) {
		t.Errorf("rules put --burst 7 = exit %d, stderr %q, want %q", code, stderr, want)
	}
	// A stale version is refused (412) and changes nothing.
	_, stderr, code = p.cli(t, "rules", "put", "--id", created.ID, "--limit", "5", "--version", "1")
	if code != 1 || !strings.Contains(stderr, "412") {
		t.Errorf("rules put --version 1 (stale) = exit %d, stderr %q, want exit 1 with 412", code, stderr)
	}
	// A table for people lists it.
	out, _, code = p.cli(t, "rules", "ls", "--route", route)
	if code != 0 || !strings.Contains(out, created.ID) || !strings.Contains(out, "4/1m") {
		t.Errorf("rules ls --route = exit %d:\n%s\nwant a table row with %s and 4/1m", code, out, created.ID)
	}

	var history []rules.AuditEntry
	p.cliJSON(t, &history, "rules", "history", created.ID)
	if len(history) != 4 {
		t.Fatalf("rules history = %d entries, want 4 (create, 3 updates; the no-op is not one)", len(history))
	}
	for _, h := range history {
		if h.Actor != local.AdminActor {
			t.Errorf("rules history entry %s by %q, want %q", h.Action, h.Actor, local.AdminActor)
		}
	}

	if _, stderr, code := p.cli(t, "rules", "rm", created.ID); code != 0 {
		t.Fatalf("rules rm = exit %d: %s", code, stderr)
	}
	if _, stderr, code := p.cli(t, "rules", "get", created.ID); code != 1 || !strings.Contains(stderr, "404") {
		t.Errorf("rules get after rm = exit %d, stderr %q, want exit 1 with 404", code, stderr)
	}

	// From a file: create, then the same file again updates by scope.
	file := filepath.Join(t.TempDir(), "rule.json")
	body := `{"api": "demo", "route": "PUT /items/{id}", "subject": "*", "limit": 2, "period": "1h", "mode": "shadow"}`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var fromFile rules.Rule
	p.cliJSON(t, &fromFile, "rules", "put", "-f", file)
	if fromFile.Version != 1 || fromFile.Mode != rules.Shadow || fromFile.Period != rules.Period(time.Hour) {
		t.Errorf("rules put -f = %+v, want version 1, shadow, 1h", fromFile)
	}
	var again rules.Rule
	p.cliJSON(t, &again, "rules", "put", "-f", file, "--limit", "5")
	if again.ID != fromFile.ID || again.Version != 2 || *again.Limit != 5 {
		t.Errorf("rules put -f again --limit 5 = %+v, want the same rule at version 2, limit 5", again)
	}
	if _, stderr, code := p.cli(t, "rules", "rm", again.ID, "--version", "2"); code != 0 {
		t.Errorf("rules rm --version 2 = exit %d: %s", code, stderr)
	}

	// Plans.
	name := "gold" + testenv.Random(t)[:4]
	var plan rules.Plan
	p.cliJSON(t, &plan, "plans", "put", "--name", name, "--limit", "50", "--period", "1m")
	if plan.Name != name || plan.Limit != 50 || plan.Version != 1 {
		t.Errorf("plans put = %+v, want %s 50/1m version 1", plan, name)
	}
	p.cliJSON(t, &plan, "plans", "put", "--name", name, "--burst", "80")
	if plan.Version != 2 || plan.Burst == nil || *plan.Burst != 80 || plan.Limit != 50 {
		t.Errorf("plans put --burst 80 = %+v, want version 2, burst 80, limit 50", plan)
	}
	var plans []rules.Plan
	p.cliJSON(t, &plans, "plans", "ls")
	found := false
	for _, pl := range plans {
		found = found || pl.Name == name
	}
	if !found {
		t.Errorf("plans ls = %+v, want %s among them", plans, name)
	}
	if _, stderr, code := p.cli(t, "plans", "rm", name); code != 0 {
		t.Errorf("plans rm = exit %d: %s", code, stderr)
	}

	// Subjects: limits show the spent bucket; reset fills it again.
	subject := "cli-" + testenv.Random(t)
	for range 3 {
		p.get(t, "/search", subject)
	}
	var limits struct {
		Limits []struct {
			Route     string `json:"route"`
			Remaining int64  `json:"remaining"`
		} `json:"limits"`
	}
	p.cliJSON(t, &limits, "subjects", "limits", subject, "--api", "demo", "--route", "GET /search")
	remaining := map[string]int64{}
	for _, l := range limits.Limits {
		remaining[l.Route] = l.Remaining
	}
	if remaining["GET /search"] != 0 || remaining["*"] != 7 {
		t.Errorf("subjects limits = %+v, want GET /search remaining 0 and * remaining 7", limits)
	}
	if _, stderr, code := p.cli(t, "subjects", "reset", subject, "--api", "demo"); code != 0 {
		t.Fatalf("subjects reset = exit %d: %s", code, stderr)
	}
	if resp, _ := p.get(t, "/search", subject); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /search after subjects reset = %d, want 200", resp.StatusCode)
	}

	// Bad input is a 400 naming the field, exit 1.
	_, stderr, code = p.cli(t, "rules", "put", "--api", "demo", "--route", "FETCH /x", "--subject", "*", "--limit", "1", "--period", "1m")
	if code != 1 || !strings.Contains(stderr, "400") || !strings.Contains(stderr, "route") {
		t.Errorf("rules put with a bad route = exit %d, stderr %q, want exit 1, 400 naming route", code, stderr)
	}
	// A bad token is refused.
	if _, stderr, code := p.cli(t, "rules", "ls", "--endpoint", p.base+"/admin", "--token", "nope"); code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("rules ls with a bad token = exit %d %s, want a 401 failure", code, stderr)
	}
}

// testRuleChange changes the API-wide limit of one route through the CLI and
// measures how long until the gateway applies it.
func testRuleChange(t *testing.T, p *localProc) {
	route := "POST /items"
	var r rules.Rule
	p.cliJSON(t, &r, "rules", "put", "--api", "demo", "--route", route, "--subject", "*", "--limit", "1", "--period", "1h")
	start := time.Now()
	post := func(subject string) int {
		req, _ := http.NewRequest(http.MethodPost, p.base+"/items", nil)
		req.Header.Set("x-api-key", subject)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	applied := func(limit int) time.Duration {
		testenv.Await(t, 5*time.Second, 20*time.Millisecond, fmt.Sprintf("rule %s limit %d applied", route, limit), func() bool {
			s := "change-" + testenv.Random(t)
			n := 0
			for range limit + 1 {
				if post(s) == http.StatusOK {
					n++
				}
			}
			return n == limit
		})
		return time.Since(start)
	}
	if d := applied(1); d > 2*time.Second {
		t.Errorf("new rule applied after %v, want within 2s", d)
	}
	start = time.Now()
	p.cliJSON(t, &r, "rules", "put", "--id", r.ID, "--limit", "3")
	if d := applied(3); d > 2*time.Second {
		t.Errorf("rule update applied after %v, want within 2s", d)
	}
	if _, stderr, code := p.cli(t, "rules", "rm", r.ID); code != 0 {
		t.Errorf("rules rm = exit %d: %s", code, stderr)
	}
}

func testLoad(t *testing.T, p *localProc) {
	prefix := "load-" + testenv.Random(t) + "-"
	stdout, stderr, code := p.cli(t, "load", "--rate", "300", "--concurrency", "8", "--duration", "2s", "--subjects", "4",
		"--subject-prefix", prefix, "--strict", "--quiet", "-o", "json", p.base+"/hello")
	if code != 0 {
		t.Fatalf("sluice load --strict = exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var rep load.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("decode load report: %v\n%s", err, stdout)
	}
	if rep.OverAdmitted != 0 || rep.Unchecked != 0 || rep.Errors != 0 {
		t.Errorf("load report: over-admitted %d, unchecked %d, errors %d, want 0 0 0", rep.OverAdmitted, rep.Unchecked, rep.Errors)
	}
	// /hello: 10 a minute per subject. In 2 s each subject gets its burst
	// of 10, and nothing more (10·2/60 < 1): nothing lost either.
	for _, s := range rep.Subjects {
		if s.Allowed != 10 || !s.Checked {
			t.Errorf("load subject %s allowed %d (checked %v), want exactly 10", s.Subject, s.Allowed, s.Checked)
		}
	}
	if rep.Denied == 0 || rep.LatencyMs.P50 <= 0 {
		t.Errorf("load report: denied %d, p50 %v, want denials and latencies", rep.Denied, rep.LatencyMs.P50)
	}

	// Stacked: /search is charged on the API-wide rule and on its route
	// rule (3 a minute); each subject gets exactly 3.
	stdout, stderr, code = p.cli(t, "load", "--rate", "200", "--duration", "1s", "--subjects", "3",
		"--subject-prefix", prefix+"s-", "--strict", "--quiet", "-o", "json", p.base+"/search")
	if code != 0 {
		t.Fatalf("sluice load --strict /search = exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	rep = load.Report{}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("decode load report: %v\n%s", err, stdout)
	}
	for _, s := range rep.Subjects {
		if s.Allowed != 3 || !s.Checked || s.Over || s.Limit != 3 {
			t.Errorf("load /search subject %s = allowed %d, checked %v, over %v, limit %d, want 3 allowed within limit 3", s.Subject, s.Allowed, s.Checked, s.Over, s.Limit)
		}
	}
}

// TestLocalDefaultLimit: on an API no rule names, --default-limit applies.
func TestLocalDefaultLimit(t *testing.T) {
	t.Parallel()
	p := startLocal(t, nil, "--api", "other", "--default-limit", "2/1m")
	subject := "default-" + testenv.Random(t)
	var got []int
	for range 3 {
		resp, _ := p.get(t, "/hello", subject)
		got = append(got, resp.StatusCode)
	}
	if fmt.Sprint(got) != fmt.Sprint([]int{200, 200, 429}) {
		t.Errorf("3 × /hello on api other with DEFAULT_LIMIT 2/1m = %v, want [200 200 429]", got)
	}
}

// TestLocalLikeLambda: `sluice local` is built by internal/app as the
// Lambdas are, so it writes what they write: the circuit breaker's log line
// when Redis goes away (here a proxy to the test Redis is cut), and the EMF
// metric line flushed at shutdown, as the authorizer flushes on SIGTERM.
func TestLocalLikeLambda(t *testing.T) {
	t.Parallel()
	proxy := testenv.NewProxy(t, testenv.RedisAddr(t))
	proxy.Up(t)
	prefix := testenv.Prefix(t, "local")
	testenv.DeleteKeys(t, testenv.Redis(t), prefix)
	p := startLocal(t, []string{"REDIS_URL=redis://" + proxy.Addr(), "REDIS_TIMEOUT=100ms"}, "--redis-prefix", prefix)
	subject := "lambda-like-" + testenv.Random(t)
	if resp, b := p.get(t, "/hello", subject); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /hello with Redis up = %d %s, want 200", resp.StatusCode, b)
	}

	proxy.Down()
	for i := range 6 {
		// The default failure mode is open: every one passes, and five
		// failures in a row open the breaker.
		if resp, b := p.get(t, "/hello", subject); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /hello #%d with Redis down = %d %s, want 200 (fail open)", i+1, resp.StatusCode, b)
		}
	}
	breaker := regexp.MustCompile(`"message":"redis circuit breaker".*"to":"open"`)
	if !breaker.MatchString(p.out.String()) {
		t.Errorf("no breaker log line after Redis went away; output:\n%s", p.out)
	}

	p.stop()
	// Lines flushed before shutdown (one per 10s interval) count too.
	var failOpen, allowed float64
	for line := range strings.SplitSeq(p.out.String(), "\n") {
		if !strings.Contains(line, `"_aws"`) {
			continue
		}
		var emf struct {
			AWS struct {
				CloudWatchMetrics []struct{ Namespace string }
			} `json:"_aws"`
			Function  string
			Outcome   string
			Decisions float64
			FailOpen  float64
		}
		if err := json.Unmarshal([]byte(line), &emf); err != nil {
			t.Fatalf("EMF line %q: %v", line, err)
		}
		if len(emf.AWS.CloudWatchMetrics) != 1 || emf.AWS.CloudWatchMetrics[0].Namespace != "Sluice" || emf.Function != "sluice-local" {
			t.Errorf("EMF line %s: want namespace Sluice and Function sluice-local", line)
		}
		failOpen += emf.FailOpen
		if emf.Outcome == "allow" {
			allowed += emf.Decisions
		}
	}
	if failOpen != 6 || allowed != 7 {
		t.Errorf("EMF lines count FailOpen %v and allow %v, want 6 and 7; output:\n%s", failOpen, allowed, p.out)
	}
}

// TestLocalSecretsStaySecret: connection-string passwords, in both
// PostgreSQL forms and in Redis URLs, never reach the output, whether the
// string fails to parse or the server is unreachable; a token the user
// chose is masked in the banner.
func TestLocalSecretsStaySecret(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, redisURL, databaseURL string }{
		{"unreachable URLs", "redis://u:rsekrit1@127.0.0.1:1", "postgres://u:sekrit1@127.0.0.1:1/db?sslmode=disable"},
		{"keyword/value DSN", "redis://:rsekrit2@127.0.0.1:1", "host=127.0.0.1 port=1 user=u password=sekrit2 dbname=x sslmode=disable"},
		{"quoted DSN password", "redis://:rsekrit3@127.0.0.1:1", `host=127.0.0.1 port=1 password='sek rit3' dbname=x`},
		{"unparsable URLs", "redis://u:rsekrit4@[::1", "postgres://u:sekrit4@[::1"},
		{"bad DSN port", "redis://:rsekrit5@127.0.0.1:notaport", "host=127.0.0.1 password=sekrit5 port=notaport"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out testenv.Buffer
			runLocal(ctx, &out, &out, []string{"REDIS_URL=" + tc.redisURL, "DATABASE_URL=" + tc.databaseURL, "SLUICE_ADMIN_TOKEN="}, "--addr", "127.0.0.1:0", "--seed", "")
			for _, secret := range []string{"rsekrit", "sekrit", "sek rit"} {
				if strings.Contains(out.String(), secret) {
					t.Errorf("output holds the password %q:\n%s", secret, out.String())
				}
			}
		})
	}

	p := startLocal(t, nil)
	p.stop() // the whole banner is out
	if strings.Contains(p.out.String(), p.token) {
		t.Errorf("the banner prints the token from SLUICE_ADMIN_TOKEN:\n%s", p.out)
	}
	if !strings.Contains(p.out.String(), "$SLUICE_ADMIN_TOKEN") {
		t.Errorf("the banner's curl lines do not refer to $SLUICE_ADMIN_TOKEN:\n%s", p.out)
	}
}

// TestLocalDatabaseDown: `sluice local` with DATABASE_URL pointing at a
// database that does not answer starts anyway, as a cold Lambda does: on
// the rules snapshot an earlier run published to Redis, or with none, on
// the default limit; and it migrates, seeds and publishes once the
// database answers.
func TestLocalDatabaseDown(t *testing.T) {
	t.Parallel()
	rURL, dbURL := testenv.RedisURL(t), pgtest.NewEmptyDatabase(t)
	rdb := testenv.Redis(t)
	published, fresh := testenv.Prefix(t, "local"), testenv.Prefix(t, "local")
	testenv.DeleteKeys(t, rdb, published)
	testenv.DeleteKeys(t, rdb, fresh)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host) // down until Up
	u.Host = proxy.Addr()
	downURL := u.String()
	statuses := func(p *localProc, subject string, n int) []int {
		var got []int
		for range n {
			resp, _ := p.get(t, "/search", subject)
			got = append(got, resp.StatusCode)
		}
		return got
	}

	// A first run, the database up, migrates, seeds and publishes.
	p := startLocal(t, []string{"REDIS_URL=" + rURL, "DATABASE_URL=" + dbURL}, "--redis-prefix", published)
	p.stop()

	t.Run("snapshot", func(t *testing.T) {
		p := startLocal(t, []string{"REDIS_URL=" + rURL, "DATABASE_URL=" + downURL}, "--redis-prefix", published, "--default-limit", "1/1m")
		// GET /search: 3 a minute in the seed, not the default's 1.
		if got := statuses(p, "snap-"+testenv.Random(t), 4); fmt.Sprint(got) != "[200 200 200 429]" {
			t.Errorf("4 × /search on the snapshot = %v, want [200 200 200 429]", got)
		}
		if out := p.out.String(); !strings.Contains(out, "database unreachable at start") || !strings.Contains(out, "unreachable at start: retrying") {
			t.Errorf("want the database failure logged and shown in the banner; output:\n%s", out)
		}
		// The banner says what it enforces, not "rules not yet".
		if want := "rules      enforcing the 7 rule(s) of the snapshot in Redis while the database is unreachable"; !strings.Contains(p.out.String(), want) {
			t.Errorf("the banner does not say %q; output:\n%s", want, p.out)
		}
		if resp, _ := p.adminGet(t, "/admin/rules"); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("GET /admin/rules with the database down = %d, want 503", resp.StatusCode)
		}
	})

	t.Run("neither, then the database", func(t *testing.T) {
		p := startLocal(t, []string{"REDIS_URL=" + rURL, "DATABASE_URL=" + downURL, "LOG_LEVEL=info"}, "--redis-prefix", fresh, "--default-limit", "1/1m")
		if got := statuses(p, "none-"+testenv.Random(t), 2); fmt.Sprint(got) != "[200 429]" {
			t.Errorf("2 × /search with neither source = %v, want [200 429] (the default, 1/1m)", got)
		}
		if !strings.Contains(p.out.String(), "no rules loaded") {
			t.Errorf("want the no-rules state logged; output:\n%s", p.out)
		}
		if want := "rules      no rules: no snapshot in Redis and the database is unreachable, so the default limit (DEFAULT_LIMIT) applies"; !strings.Contains(p.out.String(), want) {
			t.Errorf("the banner does not say %q; output:\n%s", want, p.out)
		}
		proxy.Up(t)
		start := time.Now()
		testenv.Await(t, 20*time.Second, 50*time.Millisecond, "catch-up after the database came up", func() bool {
			return strings.Contains(p.out.String(), "database reachable: migrated, seeded and published")
		})
		testenv.Await(t, 25*time.Second-time.Since(start), 100*time.Millisecond, "the seeded rule applied after the database came up", func() bool {
			return fmt.Sprint(statuses(p, "up-"+testenv.Random(t), 4)) == "[200 200 200 429]"
		})
		t.Logf("database up to the seeded rule applied: %v", time.Since(start).Round(time.Millisecond))
	})
}

// testStats: a subject denied on /search shows in GET /admin/stats as its
// hash, with the route rule and the API, and the window is validated.
func testStats(t *testing.T, p *localProc) {
	subject := "stats-" + testenv.Random(t)
	for range 5 {
		p.get(t, "/search", subject)
	}
	resp, body := p.adminGet(t, "/admin/stats?window=15m&top=100")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/stats = %d %s", resp.StatusCode, body)
	}
	var rep stats.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatal(err)
	}
	hash := localSubjectHash(t, subject)
	var found *stats.SubjectStat
	for i, s := range rep.Subjects {
		if s.Subject == hash {
			found = &rep.Subjects[i]
		}
	}
	if found == nil || found.Denied != 2 || found.API != "demo" || found.Rule == "" {
		t.Fatalf("stats subjects = %+v, want %s denied twice on api demo", rep.Subjects, hash)
	}
	var rule *stats.RuleStat
	for i, r := range rep.Rules {
		if r.Rule == found.Rule {
			rule = &rep.Rules[i]
		}
	}
	if rule == nil || rule.Denied < 2 || rule.Allowed == nil || *rule.Allowed < 3 || rep.Source != "in-process" {
		t.Errorf("stats rules = %+v, want %s with >= 2 denied, >= 3 allowed", rep.Rules, found.Rule)
	}
	if strings.Contains(string(body), subject) {
		t.Errorf("GET /admin/stats shows the raw subject %q", subject)
	}
	var cli stats.Report
	p.cliJSON(t, &cli, "stats", "--window", "15m", "--top", "100")
	if !strings.Contains(fmt.Sprint(cli.Subjects), hash) {
		t.Errorf("sluice stats subjects = %+v, want %s", cli.Subjects, hash)
	}
	if _, stderr, code := p.cli(t, "stats", "--window", "16m"); code == 0 || !strings.Contains(stderr, "window") {
		t.Errorf("sluice stats --window 16m = exit %d, %s; want a failure naming window", code, stderr)
	}
	resp, body = p.adminGet(t, "/admin/stats?window=16m")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"field":"window"`) {
		t.Errorf("GET /admin/stats?window=16m = %d %s, want 400 naming window", resp.StatusCode, body)
	}
}

// localSubjectHash is the hash `sluice local` names subject by: keyed with
// the subject hash key it generated and keeps in SLUICE_STATE_DIR.
func localSubjectHash(t *testing.T, subject string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(os.Getenv("SLUICE_STATE_DIR"), "subject-hmac.key"))
	if err != nil {
		t.Fatalf("read the local subject hash key: %v", err)
	}
	return limiter.NewHasher([]byte(strings.TrimSpace(string(b)))).SubjectHash(subject)
}

// TestLocalRuleNeverMatches: `rules put` against sluice local warns of a
// rule that can never match (a misspelt api, a path where the route names
// a template) with what would match, and still writes it; a rule that can
// match gets no warning.
func TestLocalRuleNeverMatches(t *testing.T) {
	t.Parallel()
	p := startLocal(t, nil)
	tests := []struct {
		api, route string
		want       string // "" for no warning
	}{
		{"demo", "GET /items/42", `sluice: rules put: warning: route "GET /items/42" is a path, not a resource of api "demo": did you mean "GET /items/{id}"?`},
		{"dmeo", "*", `sluice: rules put: warning: api "dmeo" is not an API of this stack (it has "demo", "demo-http", "demo-service"): the rule will never match`},
		{"demo-http", "GET /httpapi/items/42", `sluice: rules put: warning: route "GET /httpapi/items/42" is a path, not a resource of api "demo-http": did you mean "GET /httpapi/items/{id}"?`},
		{"demo-service", "GET /service/items/{id}", ""},
		{"demo", "GET /items/{id}", ""},
	}
	for _, tt := range tests {
		_, stderr, code := p.cli(t, "rules", "put", "--api", tt.api, "--route", tt.route, "--subject", "nm-"+testenv.Random(t), "--limit", "1", "--period", "1m")
		if code != 0 {
			t.Errorf("rules put --api %s --route %q = exit %d, want the rule written: %s", tt.api, tt.route, code, stderr)
		}
		if tt.want == "" && strings.Contains(stderr, "warning") || !strings.Contains(stderr, tt.want) {
			t.Errorf("rules put --api %s --route %q stderr:\n%s\nwant %q", tt.api, tt.route, stderr, tt.want)
		}
	}
}

// testShadowStats: a shadow rule on GET /items/{id} (limit 1) beside the
// seed's API-wide enforcing rule, measured as a user would before
// enforcing it: its would-be denials show under the shadow rule in GET
// /admin/stats (what the console draws) and in /metrics, while every
// request passes.
func testShadowStats(t *testing.T, p *localProc) {
	var shadow rules.Rule
	p.cliJSON(t, &shadow, "rules", "put", "--api", "demo", "--route", "GET /items/{id}", "--subject", "*",
		"--limit", "1", "--period", "1m", "--mode", "shadow")
	t.Cleanup(func() { p.cli(t, "rules", "rm", shadow.ID) })
	subject := "shadow-" + testenv.Random(t)
	for i := range 3 {
		if resp, body := p.get(t, "/items/7", subject); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /items/7 #%d = %d %s, want 200: a shadow rule never denies", i+1, resp.StatusCode, body)
		}
	}
	resp, body := p.adminGet(t, "/admin/stats?window=15m&top=100")
	var rep stats.Report
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &rep) != nil {
		t.Fatalf("GET /admin/stats = %d %s", resp.StatusCode, body)
	}
	var got *stats.RuleStat
	for i, r := range rep.Rules {
		if r.Rule == shadow.ID {
			got = &rep.Rules[i]
		}
	}
	if got == nil || got.ShadowDenied != 2 {
		t.Errorf("GET /admin/stats rules = %+v, want the shadow rule %s with 2 shadow denials", rep.Rules, shadow.ID)
	}
	resp, body = p.get(t, "/metrics", "")
	want := `sluice_decisions_total{api="demo",kind="rate",outcome="shadowDeny",rule="` + shadow.ID + `"} 2`
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		t.Errorf("GET /metrics = %d, want the line %s in:\n%s", resp.StatusCode, want, grepLines(string(body), "shadowDeny"))
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

// testExpiresAt: `rules put --expires-at` time-boxes a rule, `rules ls`
// shows it as expiring, "" clears it, and a time that is not RFC 3339 is
// refused naming the flag.
func testExpiresAt(t *testing.T, p *localProc) {
	route := "GET /expiring-" + testenv.Random(t)
	var r rules.Rule
	p.cliJSON(t, &r, "rules", "put", "--api", "demo", "--route", route, "--subject", "*", "--limit", "1", "--period", "1m",
		"--expires-at", "2099-01-01T00:00:00Z")
	t.Cleanup(func() { p.cli(t, "rules", "rm", r.ID) })
	if r.ExpiresAt == nil || r.ExpiresAt.Year() != 2099 {
		t.Fatalf("rules put --expires-at = %+v, want it expiring in 2099", r)
	}
	if out, stderr, code := p.cli(t, "rules", "ls", "--api", "demo"); code != 0 || !strings.Contains(out, "EXPIRES") || !strings.Contains(out, "2099") {
		t.Errorf("rules ls = exit %d %s%s, want an EXPIRES column with 2099", code, out, stderr)
	}
	var cleared rules.Rule // fresh: an absent expires_at must not keep the old value
	p.cliJSON(t, &cleared, "rules", "put", "--id", r.ID, "--expires-at", "")
	if cleared.ExpiresAt != nil {
		t.Errorf(`rules put --expires-at "" = %v, want no expiry`, cleared.ExpiresAt)
	}
	if _, stderr, code := p.cli(t, "rules", "put", "--id", r.ID, "--expires-at", "friday"); code != 2 || !strings.Contains(stderr, "--expires-at") {
		t.Errorf("rules put --expires-at friday = exit %d %s, want 2 naming the flag", code, stderr)
	}
}
