package edgejs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/cdn"
	"github.com/sluicehq/sluice/internal/cdn/edgejs"
	"github.com/sluicehq/sluice/internal/denial"
	"github.com/sluicehq/sluice/internal/edge"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/rules"
)

// raw is a request as a client sends it: header fields in order (a name
// may repeat) and the query string as written.
type raw struct {
	headers [][2]string
	query   string
}

// corpus is the hostile-subject corpus: what a client can send in the
// places the edge reads.
var corpus = []raw{
	{headers: [][2]string{{"x-api-key", "K1"}}},
	{headers: [][2]string{{"X-Api-Key", "  K2\t"}}},
	{headers: [][2]string{{"x-api-key", "K3"}, {"x-api-key", "K4"}}},
	{headers: [][2]string{{"x-api-key", "a,b"}}},
	{headers: [][2]string{{"x-api-key", ""}}, query: "api_key=Q1"},
	{headers: [][2]string{{"x-api-key", "   "}}, query: "api_key=Q2"},
	{query: "api_key=Q%31"},
	{query: "api_key=a+b"},
	{query: "api%5Fkey=Q3"},
	{query: "api_key=Q4&api_key=Q5"},
	{query: "api_key="},
	{query: "API_KEY=Q6"},
	{headers: [][2]string{{"x-api-key", "caf\u00e9"}}},
	{headers: [][2]string{{"x-api-key", "nul\x00byte"}}},
	{headers: [][2]string{{"x-api-key", "tab\tinside"}}},
	{headers: [][2]string{{"x-api-key", "\u00a0nbsp"}}},
	{headers: [][2]string{{"x-api-key", "\ufeffbom"}}},
	{headers: [][2]string{{"x-api-key", strings.Repeat("k", 256)}}},
	{headers: [][2]string{{"x-api-key", strings.Repeat("k", 257)}}},
	{headers: [][2]string{{"x-api-key", "quote\"and\\slash"}}},
	{headers: [][2]string{{"x-api-key", "<script>"}}},
	{headers: [][2]string{{"x-tenant", "T1"}}},
	{headers: [][2]string{{"X-TENANT", "T2"}, {"x-api-key", "K5"}}},
	{headers: [][2]string{{"authorization", "Bearer e30.e30."}}},
	{},
}

// sourceSets are the SUBJECT_SOURCES the corpus is read with.
var sourceSets = []string{
	"header:x-api-key,query:api_key",
	"apikey",
	"query:api_key,header:x-tenant",
	"header:X-Tenant,ip",
	"ip,header:x-api-key",
	"jwt:sub,header:x-api-key",
}

// viewer is r as CloudFront's function sees it: names lower-cased, query
// values as written.
func viewer(r raw) edgejs.Request {
	v := edgejs.Request{Method: "GET", URI: "/orders/1", Headers: map[string]edgejs.Field{}, Querystring: map[string]edgejs.Field{}}
	add := func(m map[string]edgejs.Field, k, val string) {
		f, ok := m[k]
		if !ok {
			m[k] = edgejs.Field{Value: val}
			return
		}
		if f.MultiValue == nil {
			f.MultiValue = []edgejs.Value{{Value: f.Value}}
		}
		f.MultiValue = append(f.MultiValue, edgejs.Value{Value: val})
		m[k] = f
	}
	for _, h := range r.headers {
		add(v.Headers, strings.ToLower(h[0]), h[1])
	}
	for p := range strings.SplitSeq(r.query, "&") {
		if p == "" {
			continue
		}
		k, val, _ := strings.Cut(p, "=")
		add(v.Querystring, k, val)
	}
	return v
}

// gateway is r as API Gateway hands it to the authorizer (REST): the last
// value of a repeated field in the single-value maps, every value in the
// multi-value ones, query names and values decoded; the API key is the
// x-api-key header's.
func gateway(r raw) identity.Request {
	g := identity.Request{Headers: map[string]string{}, MultiHeaders: map[string][]string{}, Query: map[string]string{},
		MultiQuery: map[string][]string{}, SourceIP: "198.51.100.7"}
	for _, h := range r.headers {
		g.Headers[h[0]] = h[1]
		g.MultiHeaders[h[0]] = append(g.MultiHeaders[h[0]], h[1])
		if strings.EqualFold(h[0], "x-api-key") {
			g.APIKey = h[1]
		}
	}
	q, _ := url.ParseQuery(r.query)
	for k, vs := range q {
		g.Query[k] = vs[len(vs)-1]
		g.MultiQuery[k] = vs
	}
	return g
}

func load(t *testing.T, o cdn.FunctionOptions, store map[string]string, now time.Time) (*edgejs.Function, string) {
	t.Helper()
	src, err := cdn.Function(o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := edgejs.Load(src, func(k string) (string, error) {
		if v, ok := store[k]; ok {
			return v, nil
		}
		return "", cdn.ErrNotFound
	}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	run, _ := cdn.Runnable(src)
	return f, run
}

// node runs the function under Node (scripts/node.sh's): the subjects it
// reads in reqs and its answers to events.
func node(t *testing.T, src string, store map[string]string, now time.Time, reqs []edgejs.Request, events []edgejs.Event) ([]*string, []*string) {
	t.Helper()
	bin, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_INTEGRATION") == "1" {
			t.Fatal("node not on PATH (scripts/node.sh prints its directory)")
		}
		t.Skip("node not on PATH")
	}
	if events == nil {
		events = []edgejs.Event{}
	}
	if reqs == nil {
		reqs = []edgejs.Request{}
	}
	in, _ := json.Marshal(map[string]any{"src": src, "store": store, "now": now.UnixMilli(), "requests": reqs, "events": events})
	cmd := exec.Command(bin, "testdata/node-run.js")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var res struct{ Subjects, Responses []*string }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("node's output %q: %v", out, err)
	}
	return res.Subjects, res.Responses
}

// TestCorpusSubjects holds the edge to the authorizer: for every source
// set and hostile request, goja and Node read the same subject, and a
// subject the edge reads is the one identity.Find charges. The edge may
// read none where the authorizer reads one (the request passes), never
// another.
func TestCorpusSubjects(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	found := 0
	for _, set := range sourceSets {
		sources, err := identity.ParseSources(set)
		if err != nil {
			t.Fatal(err)
		}
		f, src := load(t, cdn.FunctionOptions{StoreID: "store", EdgeKey: "k", API: "api", Sources: sources}, nil, now)
		reqs := make([]edgejs.Request, len(corpus))
		for i, r := range corpus {
			reqs[i] = viewer(r)
		}
		fromNode, _ := node(t, src, map[string]string{}, now, reqs, nil)
		for i, r := range corpus {
			got, ok, err := f.Subject(reqs[i])
			if err != nil {
				t.Fatal(err)
			}
			var n *string
			if i < len(fromNode) {
				n = fromNode[i]
			}
			if ok != (n != nil) || (ok && *n != got) {
				t.Errorf("%s, request %d %q: goja reads %q (%v), node %v", set, i, r, got, ok, n)
			}
			g := gateway(r)
			want, _, fd := identity.Find(sources, &g)
			if ok {
				found++
				if fd != identity.Found || want != got {
					t.Errorf("%s, request %d %q: the edge reads %q, the authorizer %q (%v): the edge would deny another subject", set, i, r, got, want, fd)
				}
				if !cdn.Eligible(got) {
					t.Errorf("%s, request %d: the edge reads %q, which the recorder never publishes", set, i, got)
				}
			}
		}
	}
	if found < 15 {
		t.Errorf("the edge read %d subjects in the corpus: it passes requests it should read", found)
	}
}

// TestSame429 holds the edge's 429 to the gateway response the authorizer's
// Deny gets (internal/denial rendered with the authorizer's context), under
// goja and under Node, for every header dialect.
func TestSame429(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	eff := &rules.Effective{ID: "r-quota", API: "api", Route: rules.Wildcard, Subject: rules.Wildcard, Limit: 100, Burst: 100,
		Cost: 1, Period: 24 * time.Hour, Kind: rules.Quota, PolicyName: `"r-quota"`, Policy: `"r-quota";q=100;w=86400`}
	res := authorizer.Result{Effective: eff, Rule: eff.ID, Limit: 100, Remaining: 0, Reset: 3 * time.Hour, RetryAfter: 3 * time.Hour, Cost: 1}
	ent := cdn.Entry{Expires: now.Add(res.RetryAfter).Unix(), ResetAt: now.Add(res.Reset).Unix(), API: "api", Rule: eff.ID,
		Limit: res.Limit, Policy: res.Policy(), Name: eff.PolicyName}
	v, err := ent.Encode()
	if err != nil {
		t.Fatal(err)
	}
	key := cdn.Key("k", "K1")
	store := map[string]string{key: v}
	for _, d := range []headers.Dialects{headers.Draft11, headers.Draft6, headers.Legacy, headers.Draft11 | headers.Draft6 | headers.Legacy} {
		f, src := load(t, cdn.FunctionOptions{StoreID: "store", EdgeKey: "k", API: "api", Sources: identity.DefaultSources, Headers: d}, store, now)
		var e edgejs.Event
		e.Context.RequestID = "req-1"
		e.Request = viewer(raw{headers: [][2]string{{"x-api-key", "K1"}}})
		got, err := f.Handle(e)
		if err != nil || got == nil {
			t.Fatalf("%v: Handle = %v, %v; want a 429", d, got, err)
		}
		ctx := map[string]string{}
		for k, x := range edge.Context(&res, d, now) {
			ctx[k] = fmt.Sprint(x) // as API Gateway writes a context value
		}
		wantH, wantBody := denial.TooManyRequests(d).Render(denial.Context{RequestID: "req-1", Authorizer: ctx})
		gotH := map[string]string{}
		for k, x := range got.Headers {
			gotH[strings.ToLower(k)] = x.Value
		}
		wantL := map[string]string{}
		for k, x := range wantH {
			wantL[strings.ToLower(k)] = x[0]
		}
		if got.StatusCode != 429 || got.Body.Data != string(wantBody) || !cmp.Equal(gotH, wantL) {
			t.Errorf("%v: the edge's 429 = %d %v %s\nthe gateway's = %v %s\n%s", d, got.StatusCode, gotH, got.Body.Data, wantL, wantBody, cmp.Diff(wantL, gotH))
		}
		_, fromNode := node(t, src, store, now, nil, []edgejs.Event{e})
		js, _ := json.Marshal(got)
		var nodeRes edgejs.Response
		if len(fromNode) != 1 || fromNode[0] == nil || json.Unmarshal([]byte(*fromNode[0]), &nodeRes) != nil {
			t.Fatalf("%v: node answered %v", d, fromNode)
		}
		if !cmp.Equal(*got, nodeRes) {
			t.Errorf("%v: goja %s, node %s", d, js, *fromNode[0])
		}
	}
}
