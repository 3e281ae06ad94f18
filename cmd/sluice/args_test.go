package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitArgs(t *testing.T) {
	t.Parallel()
	fs := newFlagSet(env{}, "x", "A B", "")
	fs.String("o", "", "")
	fs.String("token", "", "")
	fs.Bool("sigv4", false, "")
	fs.Int64("rate", 0, "")
	tests := []struct {
		args       []string
		flags, pos []string
	}{
		{[]string{"A", "-o", "json", "B"}, []string{"-o", "json"}, []string{"A", "B"}},
		{[]string{"--sigv4", "A"}, []string{"--sigv4"}, []string{"A"}}, // a bool takes no value
		{[]string{"--sigv4=false", "A"}, []string{"--sigv4=false"}, []string{"A"}},
		{[]string{"--token", "-", "A"}, []string{"--token", "-"}, []string{"A"}}, // a value may look like a flag
		{[]string{"--rate", "-1", "A"}, []string{"--rate", "-1"}, []string{"A"}},
		{[]string{"-", "--o=json"}, []string{"--o=json"}, []string{"-"}}, // "-" is stdin
		{[]string{"A", "--", "-B", "--o", "json"}, nil, []string{"A", "-B", "--o", "json"}},
		{[]string{"A", "--bogus", "B"}, []string{"--bogus"}, []string{"A", "B"}}, // unknown: Parse reports it
		{[]string{"A", "-o"}, []string{"-o"}, []string{"A"}},                     // no value: Parse reports it
	}
	for _, tt := range tests {
		flags, pos := splitArgs(fs.FlagSet, tt.args)
		if diff := cmp.Diff([]any{tt.flags, tt.pos}, []any{flags, pos}); diff != "" {
			t.Errorf("splitArgs(%q) (-want +got):\n%s", tt.args, diff)
		}
	}
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

// TestFlagsAfterArguments runs every command with its flags before the
// positional arguments, then after (and between) them: both send the same
// requests and say the same.
func TestFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	type result struct {
		code           int
		stdout, stderr string
		reqs           []string
	}
	runWith := func(t *testing.T, args []string) result {
		rec := &adminRecorder{}
		srv := httptest.NewServer(rec)
		defer srv.Close()
		// Before the command's own arguments, which may end with "--".
		args = append(append(args[:2:2], "--endpoint", srv.URL, "--token", "tok"), args[2:]...)
		var out, errb bytes.Buffer
		code := run(context.Background(), env{stdout: &out, stderr: &errb, stdin: strings.NewReader("{}")}, args)
		return result{code, out.String(), strings.ReplaceAll(errb.String(), srv.URL, "URL"), rec.reqs}
	}
	tests := []struct {
		name          string
		before, after []string
	}{
		{"rules ls", []string{"rules", "ls", "--api", "demo", "-o", "json"}, []string{"rules", "ls", "-o", "json", "--api", "demo"}},
		{"rules get", []string{"rules", "get", "-o", "json", "r1"}, []string{"rules", "get", "r1", "-o", "json"}},
		{"rules history", []string{"rules", "history", "-o", "json", "r1"}, []string{"rules", "history", "r1", "-o", "json"}},
		{"rules rm", []string{"rules", "rm", "--version", "3", "r1"}, []string{"rules", "rm", "r1", "--version", "3"}},
		{"rules put", []string{"rules", "put", "--api", "demo", "--route", "*", "--subject", "*", "--limit", "5", "--period", "1m"},
			[]string{"rules", "put", "--limit", "5", "--period", "1m", "--api", "demo", "--subject", "*", "--route", "*"}},
		{"plans ls", []string{"plans", "ls", "-o", "json"}, []string{"plans", "ls", "-o=json"}},
		{"plans get", []string{"plans", "get", "-o", "json", "gold"}, []string{"plans", "get", "gold", "-o", "json"}},
		{"plans rm", []string{"plans", "rm", "--version", "2", "gold"}, []string{"plans", "rm", "gold", "--version", "2"}},
		{"plans put", []string{"plans", "put", "--name", "gold", "--limit", "10", "--period", "1m"},
			[]string{"plans", "put", "--period", "1m", "--limit", "10", "--name", "gold"}},
		{"subjects limits", []string{"subjects", "limits", "--api", "demo", "alice"}, []string{"subjects", "limits", "alice", "--api", "demo"}},
		{"subjects reset", []string{"subjects", "reset", "--api", "demo", "alice"}, []string{"subjects", "reset", "alice", "--api", "demo"}},
		{"a subject that starts with a dash", []string{"subjects", "reset", "--api", "demo", "--", "-alice"},
			[]string{"subjects", "reset", "--api", "demo", "--", "-alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before, after := runWith(t, tt.before), runWith(t, tt.after)
			if before.code == 2 || len(before.reqs) == 0 {
				t.Fatalf("sluice %q = exit %d, %d requests, stderr %q: want the command to reach the admin API",
					tt.before, before.code, len(before.reqs), before.stderr)
			}
			if diff := cmp.Diff(before, after, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("sluice %q and sluice %q differ (-before +after):\n%s", tt.before, tt.after, diff)
			}
		})
	}
	t.Run("load", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		n := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			n++
			mu.Unlock()
			w.Header().Set("RateLimit-Policy", `"r";q=100;w=60`)
		}))
		defer srv.Close()
		flags := []string{"--requests", "3", "--rate", "0", "--quiet", "-o", "json", "--subjects", "1"}
		for _, args := range [][]string{
			append(append([]string{"load"}, flags...), srv.URL),
			append([]string{"load", srv.URL}, flags...),
			append([]string{"load", "--requests", "3", srv.URL}, flags[2:]...),
		} {
			var out, errb bytes.Buffer
			code := run(context.Background(), env{stdout: &out, stderr: &errb}, args)
			var rep struct {
				Sent    int64 `json:"sent"`
				Allowed int64 `json:"allowed"`
			}
			if err := json.Unmarshal(out.Bytes(), &rep); code != 0 || err != nil || rep.Sent != 3 || rep.Allowed != 3 {
				t.Errorf("sluice %q = exit %d, report %+v (%v), stderr %q; want 0 and 3 requests", args, code, rep, err, errb.String())
			}
		}
	})
}

// TestUsageErrors: a command line that cannot be used exits 2 naming the
// wrong argument, followed by the command's short usage, never the dump of
// every flag (that is -h's).
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // the error line
	}{
		{[]string{"rules", "ls", "--bogus"}, "sluice: rules ls: flag provided but not defined: -bogus"},
		{[]string{"rules", "ls", "extra"}, `sluice: rules ls: unexpected argument "extra"`},
		{[]string{"rules", "get"}, "sluice: rules get: missing ID"},
		{[]string{"rules", "get", "r1", "r2"}, `sluice: rules get: unexpected argument "r2"`},
		{[]string{"rules", "get", "r1", "-o"}, "sluice: rules get: flag needs an argument: -o"},
		{[]string{"rules", "get", "r1", "-o", "yaml"}, `sluice: rules get: -o "yaml": want table or json`},
		{[]string{"rules", "put", "--limit", "five"}, `sluice: rules put: invalid value "five" for flag -limit`},
		{[]string{"rules", "rm"}, "sluice: rules rm: missing ID"},
		{[]string{"rules", "history", "r1", "--nope"}, "sluice: rules history: flag provided but not defined: -nope"},
		{[]string{"plans", "ls", "x"}, `sluice: plans ls: unexpected argument "x"`},
		{[]string{"plans", "get"}, "sluice: plans get: missing NAME"},
		{[]string{"plans", "rm", "a", "b"}, `sluice: plans rm: unexpected argument "b"`},
		{[]string{"plans", "put", "x"}, `sluice: plans put: unexpected argument "x"`},
		{[]string{"subjects", "limits"}, "sluice: subjects limits: missing SUBJECT"},
		{[]string{"subjects", "reset", "a", "--api"}, "sluice: subjects reset: flag needs an argument: -api"},
		{[]string{"load"}, "sluice: load: missing URL"},
		{[]string{"load", "http://x", "http://y"}, `sluice: load: unexpected argument "http://y"`},
		{[]string{"load", "http://x", "--rate", "fast"}, `sluice: load: invalid value "fast" for flag -rate`},
		{[]string{"local", "extra"}, `sluice: local: unexpected argument "extra"`},
		{[]string{"local", "--bogus"}, "sluice: local: flag provided but not defined: -bogus"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			code := run(context.Background(), env{stdout: &out, stderr: &errb}, tt.args)
			name := tt.args[0]
			if name != "load" && name != "local" {
				name += " " + tt.args[1]
			}
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			if code != 2 || !strings.HasPrefix(lines[0], tt.want) {
				t.Fatalf("sluice %q = exit %d, stderr:\n%s\nwant exit 2 and first line %q", tt.args, code, errb.String(), tt.want)
			}
			if len(lines) != 3 || !strings.HasPrefix(lines[1], "usage: sluice "+name+" [flags]") || lines[2] != "Run `sluice "+name+" -h` for the flags." {
				t.Errorf("sluice %q stderr:\n%s\nwant the error, then the short usage of %s (2 lines) and nothing else", tt.args, errb.String(), name)
			}
		})
	}
}

// TestHelp: -h, anywhere on the line, prints the whole usage to stdout and
// exits 0.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"rules", "get", "-h"}, {"rules", "get", "r1", "--help"}, {"load", "http://x", "-h"}, {"subjects", "reset", "-h"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), env{stdout: &out, stderr: &errb}, args)
		if code != 0 || !strings.Contains(out.String(), "flags:\n") || !strings.Contains(out.String(), "  -") || errb.Len() != 0 {
			t.Errorf("sluice %q = exit %d, stdout:\n%s\nstderr %q; want 0 and every flag on stdout", args, code, out.String(), errb.String())
		}
	}
}
