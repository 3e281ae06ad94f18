package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// runCLI runs one command line in process and returns its exit code and
// streams.
func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), &env{stdout: &out, stderr: &errb, stdin: strings.NewReader(stdin)}, args)
	return code, out.String(), errb.String()
}

// adminRecorder is an admin API that records each request and answers 404
// problem+json: the requests a command line sends are what its parse made
// of it.
type adminRecorder struct {
	mu   sync.Mutex
	reqs []string
}

func (r *adminRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Method+" "+req.URL.RequestURI()+" "+req.Header.Get("If-Match")+" "+string(b))
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte(`{"type":"about:blank","title":"Not Found","status":404,"detail":"nothing here"}`))
}

// TestFlagsAnywhere runs every command with its flags before the
// positional arguments, then after (and between) them, and the global -o
// before and after the command's words: all send the same requests and
// say the same.
func TestFlagsAnywhere(t *testing.T) {
	t.Parallel()
	type result struct {
		Code           int
		Stdout, Stderr string
		Reqs           []string
	}
	runWith := func(t *testing.T, args []string) result {
		rec := &adminRecorder{}
		srv := httptest.NewServer(rec)
		defer srv.Close()
		// At the end, or before "--" (after it, all is positional).
		i := indexOf(args, "--")
		if i < 0 {
			i = len(args)
		}
		args = slices.Concat(args[:i], []string{"--endpoint", srv.URL + "/admin", "--token", "tok"}, args[i:])
		code, stdout, stderr := runCLI(t, "{}", args...)
		return result{code, stdout, strings.ReplaceAll(stderr, srv.URL, "URL"), rec.reqs}
	}
	tests := []struct {
		name string
		args [][]string
	}{
		{"-o anywhere", [][]string{
			{"-o", "json", "rules", "ls"}, {"rules", "-o", "json", "ls"}, {"rules", "ls", "-o", "json"}, {"rules", "ls", "--output=json"}}},
		{"rules ls", [][]string{{"rules", "ls", "--api", "demo", "-o", "json"}, {"rules", "ls", "-o", "json", "--api", "demo"}}},
		{"rules get", [][]string{{"rules", "get", "-o", "json", "r1"}, {"rules", "get", "r1", "-o", "json"}}},
		{"rules history", [][]string{{"rules", "history", "-o", "json", "r1"}, {"rules", "history", "r1", "-o", "json"}}},
		{"rules rm", [][]string{{"rules", "rm", "--version", "3", "r1"}, {"rules", "rm", "r1", "--version", "3"}}},
		{"rules put", [][]string{{"rules", "put", "--api", "demo", "--route", "*", "--subject", "*", "--limit", "5", "--period", "1m"},
			{"rules", "put", "--limit", "5", "--period", "1m", "--api", "demo", "--subject", "*", "--route", "*"}}},
		{"plans ls", [][]string{{"plans", "ls", "-o", "json"}, {"plans", "ls", "-o=json"}, {"-o", "json", "plans", "ls"}}},
		{"plans get", [][]string{{"plans", "get", "-o", "json", "gold"}, {"plans", "get", "gold", "-o", "json"}}},
		{"plans rm", [][]string{{"plans", "rm", "--version", "2", "gold"}, {"plans", "rm", "gold", "--version", "2"}}},
		{"plans put", [][]string{{"plans", "put", "--name", "gold", "--limit", "10", "--period", "1m"},
			{"plans", "put", "--period", "1m", "--limit", "10", "--name", "gold"}}},
		{"subjects limits", [][]string{{"subjects", "limits", "--api", "demo", "alice"}, {"subjects", "limits", "alice", "--api", "demo"}}},
		{"subjects reset", [][]string{{"subjects", "reset", "--api", "demo", "alice"}, {"subjects", "reset", "alice", "--api", "demo"}}},
		{"a subject that starts with a dash", [][]string{{"subjects", "reset", "--api", "demo", "--", "-alice"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var first result
			for i, args := range tt.args {
				if len(args) == 0 {
					continue
				}
				got := runWith(t, args)
				if got.Code == 2 || len(got.Reqs) == 0 {
					t.Fatalf("sluice %q = exit %d, %d requests, stderr %q: want the command to reach the admin API",
						args, got.Code, len(got.Reqs), got.Stderr)
				}
				if i == 0 {
					first = got
					continue
				}
				if diff := cmp.Diff(first, got); diff != "" {
					t.Errorf("sluice %q and sluice %q differ (-first +this):\n%s", tt.args[0], args, diff)
				}
			}
		})
	}
	t.Run("load", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("RateLimit-Policy", `"r";q=100;w=60`)
		}))
		defer srv.Close()
		flags := []string{"--requests", "3", "--rate", "0", "--quiet", "-o", "json", "--subjects", "1"}
		for _, args := range [][]string{
			append(append([]string{"load"}, flags...), srv.URL),
			append([]string{"load", srv.URL}, flags...),
			append([]string{"load", "--requests", "3", srv.URL}, flags[2:]...),
			append([]string{"-o", "json", "load", srv.URL}, flags[:5]...),
		} {
			code, stdout, stderr := runCLI(t, "", args...)
			var rep struct {
				Sent    int64 `json:"sent"`
				Allowed int64 `json:"allowed"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || rep.Sent != 3 || rep.Allowed != 3 {
				t.Errorf("sluice %q = exit %d, report %+v (%v), stderr %q; want 0 and 3 requests", args, code, rep, err, stderr)
			}
		}
	})
}

func indexOf(s []string, v string) int { return slices.Index(s, v) }

// TestUsageErrors: a command line that cannot be used exits 2 with one
// line "sluice: <command>: <what is wrong>", then where the usage is;
// never the dump of every flag (that is --help's).
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // the error line
	}{
		{[]string{"rules", "ls", "--bogus"}, "sluice: rules ls: unknown flag --bogus"},
		{[]string{"rules", "ls", "extra"}, `sluice: rules ls: unexpected argument extra`},
		{[]string{"rules", "get"}, `sluice: rules get: expected "<id>"`},
		{[]string{"rules", "get", "r1", "r2"}, `sluice: rules get: unexpected argument r2`},
		{[]string{"rules", "get", "r1", "-o"}, `sluice: rules get: --output needs a value after it, such as --output table|json (Output: table or json)`},
		{[]string{"rules", "get", "r1", "-o", "yaml"}, `sluice: rules get: --output must be one of "table","json" but got "yaml"`},
		{[]string{"rules", "put", "--limit", "five"}, `sluice: rules put: --limit: expected a valid 64 bit int but got "five"`},
		{[]string{"rules", "put", "--enabled", "false"}, `sluice: rules put: unexpected argument false: a boolean flag takes its value after "=": --enabled=false`},
		{[]string{"rules", "list"}, `sluice: rules: unexpected argument list, did you mean "ls"?`},
		{[]string{"rules", "delete", "r1"}, `sluice: rules: unexpected argument delete, did you mean "rm"?`},
		{[]string{"plans", "list"}, `sluice: plans: unexpected argument list, did you mean "ls"?`},
		{[]string{"rules", "rm"}, `sluice: rules rm: expected "<id>"`},
		{[]string{"rules", "history", "r1", "--nope"}, "sluice: rules history: unknown flag --nope"},
		{[]string{"plans", "ls", "x"}, `sluice: plans ls: unexpected argument x`},
		{[]string{"plans", "get"}, `sluice: plans get: expected "<name>"`},
		{[]string{"plans", "rm", "a", "b"}, `sluice: plans rm: unexpected argument b`},
		{[]string{"plans", "put", "x"}, `sluice: plans put: unexpected argument x`},
		{[]string{"plans", "put"}, `sluice: plans put: --name (or name in the file) is required`},
		{[]string{"subjects", "limits"}, `sluice: subjects limits: expected "<subject>"`},
		{[]string{"subjects", "reset", "a", "--api"}, `sluice: subjects reset: --api needs a value after it, such as --api STRING`},
		{[]string{"load"}, `sluice: load: expected "<url>"`},
		{[]string{"load", "http://x", "http://y"}, `sluice: load: unexpected argument http://y`},
		{[]string{"load", "http://x", "--rate", "fast"}, `sluice: load: --rate: expected a float but got "fast"`},
		{[]string{"load", "--rate", "-1", "http://x"}, "sluice: load: --rate must be >= 0"},
		{[]string{"load", "ftp://x"}, `sluice: load: "ftp://x" is not an http(s) URL`},
		{[]string{"local", "extra"}, `sluice: local: unexpected argument extra`},
		{[]string{"local", "--bogus"}, "sluice: local: unknown flag --bogus"},
		{[]string{"token"}, "sluice: token: missing flags: --sub=STRING"},
		{[]string{"nope"}, "sluice: unexpected argument nope"},
		{[]string{"console", "--addr", "0.0.0.0:0", "--endpoint", "http://127.0.0.1:1/admin"}, `sluice: console: --addr "0.0.0.0:0": want a loopback address`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runCLI(t, "", tt.args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if code != 2 || !strings.HasPrefix(lines[0], tt.want) {
				t.Fatalf("sluice %q = exit %d, stderr:\n%s\nwant exit 2 and first line %q", tt.args, code, stderr, tt.want)
			}
			if len(lines) != 2 || !strings.HasPrefix(lines[1], "Run `sluice") || !strings.HasSuffix(lines[1], " --help` for usage.") {
				t.Errorf("sluice %q stderr:\n%s\nwant the error, then where the usage is, and nothing else", tt.args, stderr)
			}
		})
	}
}

// TestHelp: --help, anywhere on the line, prints the whole usage to stdout
// and exits 0; no arguments print it to stderr and exit 2. The admin
// token's value is never in it.
func TestHelp(t *testing.T) {
	t.Setenv("SLUICE_ADMIN_TOKEN", "sl_secret_in_env")
	for _, args := range [][]string{
		{"rules", "get", "-h"}, {"rules", "get", "r1", "--help"}, {"load", "http://x", "-h"}, {"subjects", "reset", "-h"},
		{"help"}, {"help", "rules"}, {"--help"}, {"rules", "--help"}, {"token", "--help"},
	} {
		code, stdout, stderr := runCLI(t, "", args...)
		if code != 0 || !strings.Contains(stdout, "Flags:\n") || !strings.Contains(stdout, "  -h, --help") || stderr != "" {
			t.Errorf("sluice %q = exit %d, stdout:\n%s\nstderr %q; want 0 and the flags on stdout", args, code, stdout, stderr)
		}
		if strings.Contains(stdout, "sl_secret_in_env") {
			t.Errorf("sluice %q prints the admin token's value:\n%s", args, stdout)
		}
	}
	// A flag read from a variable says which, once.
	if _, stdout, _ := runCLI(t, "", "rules", "ls", "-h"); strings.Count(stdout, "($SLUICE_ENDPOINT)") != 1 {
		t.Errorf("sluice rules ls -h:\n%s\nwant --endpoint's help to end ($SLUICE_ENDPOINT), once", stdout)
	}
	code, stdout, stderr := runCLI(t, "")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "Commands:") {
		t.Errorf("sluice = exit %d, stdout %q, stderr:\n%s\nwant 2 and the commands on stderr", code, stdout, stderr)
	}
}

// TestAdminErrors: problem+json answers become one readable error line
// (then the details), prefixed "sluice: <command>:", and exit 1; a field
// error of a rule given by flags names the flag.
func TestAdminErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("Authorization = %q, want the bearer token", r.Header.Get("Authorization"))
		}
		w.Header().Set("Content-Type", "application/problem+json")
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/admin/stats") {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"type":"x","title":"Bad Request","status":400,"detail":"The request is invalid; see errors.","errors":[{"field":"window","reason":"must be a whole number of minutes from 1m to 15m"}]}`))
			return
		}
		if r.Method == http.MethodGet {
			w.Write([]byte(`{"rules":[]}`))
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"type":"x","title":"Bad Request","status":400,"detail":"The request is invalid; see errors.","errors":[{"field":"api","reason":"is required"},{"field":"min_remaining","reason":"must be at least 0"}]}`))
	}))
	defer srv.Close()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"rules", "put", "--route", "*", "--subject", "*", "--limit", "1", "--period", "1m", "--min-remaining", "-1"},
			"sluice: rules put: create rule: 400 Bad Request: The request is invalid; see errors.\n  --api: is required\n  --min-remaining: must be at least 0\n"},
		{[]string{"rules", "put", "-f", "-"},
			"sluice: rules put: create rule: 400 Bad Request: The request is invalid; see errors.\n  api: is required\n  min_remaining: must be at least 0\n"},
		{[]string{"stats", "--window", "1h"}, "sluice: stats: 400 Bad Request: The request is invalid; see errors.\n  --window: must be a whole number of minutes from 1m to 15m\n"},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI(t, `{"route":"*","subject":"*","limit":1,"period":"1m","min_remaining":-1}`, append(tt.args, "--endpoint", srv.URL+"/admin", "--token", "tok")...)
		if code != 1 || stderr != tt.want {
			t.Errorf("sluice %q = exit %d, stderr:\n%s\nwant exit 1 and\n%s", tt.args, code, stderr, tt.want)
		}
	}
}

// TestLoadStrict: `load --strict` exits 3 when a subject was
// over-admitted, 0 when none was, and 1 when no request was admitted at
// all (all 404, or nothing listening): such a run proves nothing.
func TestLoadStrict(t *testing.T) {
	t.Parallel()
	handler := func(status int, policy string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("RateLimit-Policy", policy)
			w.WriteHeader(status)
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close()
	tests := []struct {
		name    string
		handler http.Handler // nil: nothing listens
		code    int
		want    string
	}{
		{"within the limit", handler(200, `"r";q=100000;w=1`), 0, ""},
		{"over-admitted", handler(200, `"r";q=1;w=60`), 3, "sluice: load: 3 subject(s) over-admitted"},
		{"all 404", handler(404, ""), 1, "sluice: load: no request was admitted ("},
		{"connection refused", nil, 1, "sluice: load: no request was admitted ("},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := refused
			if tt.handler != nil {
				srv := httptest.NewServer(tt.handler)
				defer srv.Close()
				url = srv.URL
			}
			code, stdout, stderr := runCLI(t, "", "load", "--strict", "--quiet", "--rate", "0", "--requests", "30", "--duration", "5s", "--subjects", "3", "--timeout", time.Second.String(), url)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("sluice load --strict = exit %d, stderr %q; want %d and %q\nstdout:\n%s", code, stderr, tt.code, tt.want, stdout)
			}
		})
	}
}

func TestHumanDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{250 * time.Millisecond, "250ms"},
		{1500 * time.Millisecond, "1.5s"},
		{59 * time.Second, "59s"},
		{4*time.Minute + 10*time.Second, "4m 10s"},
		{5 * time.Minute, "5m"},
		{2*time.Hour + 5*time.Minute + 20*time.Second, "2h 5m"},
		{725*time.Hour + 21*time.Minute + 12114*time.Millisecond, "30d 5h"},
		{48 * time.Hour, "2d"},
	}
	for _, tt := range tests {
		if got := humanDuration(tt.d); got != tt.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// fakeAdmin answers each "METHOD /path" in routes with its JSON body and
// records the bodies it was sent.
func fakeAdmin(t *testing.T, routes map[string]string) (url string, bodies *[]string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+string(b))
		mu.Unlock()
		body, ok := routes[r.Method+" "+strings.TrimPrefix(r.URL.Path, "/admin")]
		if !ok {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"title":"Not Found","status":404}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/admin", &got
}

// TestTables: what the tables print where a person reads them: a subject
// no rule applies to says so (not an empty table); a quota's reset is a
// date and a long reset reads "30d 5h"; plans show their kind, a quota no
// burst; a rule's LIMIT reads as its kind; a history names what changed.
func TestTables(t *testing.T) {
	t.Parallel()
	endpoint, _ := fakeAdmin(t, map[string]string{
		"GET /subjects/nobody/limits": `{"subject":"nobody","api":"demo","limits":[]}`,
		"GET /subjects/alice/limits": `{"subject":"alice","limits":[
			{"rule":"r1","api":"demo","route":"*","subject":"*","limit":10,"period":"1m","burst":10,"cost":1,"failure_mode":"open","mode":"enforce","kind":"rate","remaining":7,"reset_ms":18000},
			{"rule":"r2","api":"demo","route":"*","subject":"alice","limit":100000,"period":"1mo","burst":100000,"cost":1,"failure_mode":"open","mode":"enforce","kind":"quota","remaining":99990,"reset_ms":2611272114,"used":10,"resets_at":"2027-01-01T00:00:00Z"}]}`,
		"GET /plans": `{"plans":[{"name":"gold","limit":1000,"period":"1m","burst":2000,"version":1},
			{"name":"monthly","kind":"quota","limit":100000,"period":"1mo","version":2,"description":"per month"}]}`,
		"GET /rules": `{"rules":[{"id":"r1","api":"demo","route":"*","subject":"*","limit":10,"period":"1m","version":1},
			{"id":"r2","api":"demo","route":"*","subject":"q","kind":"quota","limit":100,"period":"1mo","version":1},
			{"id":"r3","api":"demo","route":"*","subject":"c","kind":"concurrency","limit":5,"period":"30s","version":1},
			{"id":"r4","api":"demo","route":"*","subject":"p","plan":"gold","version":1},
			{"id":"r5","api":"demo","route":"*","subject":"g","kind":"quota","limit":1000,"period":"1d","global":true,"version":1}]}`,
		"GET /rules/r1/history": `{"entries":[{"action":"update","actor":"me","at":"2026-12-01T00:00:00Z",
			"before":{"limit":10,"version":1},"after":{"limit":20,"mode":"shadow","version":2}}]}`,
	})
	tests := []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"subjects", "limits", "nobody", "--api", "demo"},
			[]string{"no rule applies to subject nobody on api demo"}, []string{"RULE"}},
		{[]string{"subjects", "limits", "alice"},
			[]string{"18s", "resets 2027-01-01 00:00 UTC", "30d 5h"}, []string{"725h", "18.000s"}},
		{[]string{"plans", "ls"},
			[]string{"KIND", "gold     rate   1000/1m     2000", "monthly  quota  100000/1mo  -"}, nil},
		{[]string{"rules", "ls"},
			[]string{" 10/1m ", " quota 100/1mo ", " 5 in flight, ttl 30s ", " plan gold ", " global quota 1000/1d "}, nil},
		{[]string{"rules", "history", "r1"},
			[]string{"2026-12-01T00:00:00Z  update  me     limit 10→20, mode ∅→shadow"}, []string{"version"}},
	}
	for _, tt := range tests {
		code, stdout, stderr := runCLI(t, "", append(tt.args, "--endpoint", endpoint)...)
		if code != 0 {
			t.Fatalf("sluice %q = exit %d: %s", tt.args, code, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("sluice %q:\n%s\nwant %q", tt.args, stdout, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(stdout, n) {
				t.Errorf("sluice %q:\n%s\nwant no %q", tt.args, stdout, n)
			}
		}
	}
}

// TestSubjectsFind: `sluice subjects find SUBJECT` sends the subject in
// the body of POST /subjects/find (never in the URL, which access logs
// keep) and prints what the admin API answers, as a table or as JSON.
func TestSubjectsFind(t *testing.T) {
	t.Parallel()
	answer := `{"subject_hash":"3f2a9c","in_top_offenders":true}`
	endpoint, bodies := fakeAdmin(t, map[string]string{"POST /subjects/find": answer})
	code, stdout, stderr := runCLI(t, "", "subjects", "find", "customer-42", "--endpoint", endpoint)
	if code != 0 {
		t.Fatalf("subjects find = exit %d: %s", code, stderr)
	}
	if want := "POST /admin/subjects/find " + `{"subject":"customer-42"}`; len(*bodies) != 1 || (*bodies)[0] != want {
		t.Errorf("subjects find sent %q, want [%q]", *bodies, want)
	}
	for _, w := range []string{"subject_hash      3f2a9c", "in_top_offenders  true"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("subjects find printed:\n%s\nwant %q", stdout, w)
		}
	}
	code, stdout, _ = runCLI(t, "", "-o", "json", "subjects", "find", "customer-42", "--endpoint", endpoint)
	var got map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || got["subject_hash"] != "3f2a9c" || got["in_top_offenders"] != true {
		t.Errorf("subjects find -o json = exit %d:\n%s\nwant the answer as JSON", code, stdout)
	}
}

// TestNoFalseHint: "did you mean" names only a command that exists where
// the mistake was made: `sluice list` has no ls to suggest.
func TestNoFalseHint(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCLI(t, "", "list")
	if code != 2 || strings.Contains(stderr, "did you mean") {
		t.Errorf("sluice list = exit %d, stderr %q; want 2 and no suggestion", code, stderr)
	}
}

// TestEmptyEnvIsUnset: a variable set to "" is unset, as it was before the
// CLI moved to kong: SLUICE_ENDPOINT= gives the default endpoint, not an
// empty one.
func TestEmptyEnvIsUnset(t *testing.T) {
	t.Setenv("SLUICE_ENDPOINT", "")
	code, _, stderr := runCLI(t, "", "rules", "ls", "--timeout", "1s")
	if code != 1 || !strings.Contains(stderr, "http://127.0.0.1:8080/admin/rules") {
		t.Errorf("SLUICE_ENDPOINT= sluice rules ls = exit %d, stderr %q; want the default endpoint tried", code, stderr)
	}
}
