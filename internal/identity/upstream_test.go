package identity_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/identity"
)

// countingInvoker answers with the event itself and counts its calls;
// "unauthorized" and "fail" events fail.
type countingInvoker struct{ calls atomic.Int64 }

func (c *countingInvoker) Invoke(_ context.Context, event []byte) ([]byte, error) {
	c.calls.Add(1)
	switch string(event) {
	case "unauthorized":
		return nil, identity.ErrUpstreamUnauthorized
	case "fail":
		return nil, errors.New("throttled")
	}
	return event, nil
}

// Answers as an upstream gives them: a policy holds for every route its
// policy allows; a simple answer for the route it was asked about.
const (
	policyAnswer = `{"principalId":"u","policyDocument":{"Version":"2012-10-17","Statement":[]}}`
	simpleAnswer = `{"isAuthorized":true}`
)

func mustSources(t *testing.T, s string) []identity.UpstreamSource {
	t.Helper()
	src, err := identity.ParseUpstreamSources(s)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// req is a request with Authorization auth on route.
func req(auth, route string) *identity.UpstreamRequest {
	r := &identity.UpstreamRequest{Route: route}
	if auth != "" {
		r.Headers = map[string]string{"Authorization": auth}
	}
	return r
}

// TestUpstreamCache: with the identity sources named, a policy answer is
// reused per identity on every route (the caller evaluates it for each
// methodArn); a simple answer and Unauthorized only on the route they
// answered; failures and requests missing a value are never cached; the
// cache is bounded in answers and in time.
func TestUpstreamCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inv := &countingInvoker{}
	now := time.Unix(1_900_000_000, 0)
	u := identity.NewUpstream(inv, identity.UpstreamOptions{Sources: mustSources(t, "header:authorization"), TTL: 200 * time.Millisecond, Size: 3,
		Now: func() time.Time { return now }})
	calls := func() int64 { return inv.calls.Load() }
	for _, route := range []string{"GET/a", "GET/b", "GET/a"} {
		if got, err := u.Authorize(ctx, req("tok-p", route), []byte(policyAnswer)); err != nil || string(got) != policyAnswer {
			t.Fatalf("Authorize(tok-p, %s) = %q, %v", route, got, err)
		}
	}
	if n := calls(); n != 1 {
		t.Errorf("a policy answer on 3 requests of 2 routes invoked %d times, want 1", n)
	}
	for _, route := range []string{"GET/a", "GET/b", "GET/a", "GET/b"} {
		u.Authorize(ctx, req("tok-s", route), []byte(simpleAnswer))
	}
	if n := calls() - 1; n != 2 {
		t.Errorf("a simple answer on 4 requests of 2 routes invoked %d times, want 2 (once per route)", n)
	}
	before := calls()
	for _, route := range []string{"GET/a", "GET/a", "GET/b"} {
		if _, err := u.Authorize(ctx, req("tok-u", route), []byte("unauthorized")); !errors.Is(err, identity.ErrUpstreamUnauthorized) {
			t.Errorf("Authorize(unauthorized) error = %v", err)
		}
	}
	if n := calls() - before; n != 2 {
		t.Errorf("Unauthorized on 3 requests of 2 routes invoked %d times, want 2 (once per route)", n)
	}
	before = calls()
	for range 2 {
		if _, err := u.Authorize(ctx, req("tok-f", "GET/a"), []byte("fail")); err == nil {
			t.Error("Authorize(fail) error = nil")
		}
		u.Authorize(ctx, req("", "GET/a"), []byte(policyAnswer))
	}
	if n := calls() - before; n != 4 {
		t.Errorf("2 failures and 2 requests without Authorization invoked %d times, want 4 (none cached)", n)
	}
	// Bounded: 10 identities leave 3 answers.
	for i := range 10 {
		u.Authorize(ctx, req("many-"+strconv.Itoa(i), "GET/a"), []byte(policyAnswer))
	}
	if n := u.Len(); n != 3 {
		t.Errorf("Len() = %d after 10 identities, want the bound 3", n)
	}
	// The TTL ends reuse.
	u.Authorize(ctx, req("tok-p", "GET/a"), []byte(policyAnswer))
	now = now.Add(199 * time.Millisecond)
	before = calls()
	u.Authorize(ctx, req("tok-p", "GET/a"), []byte(policyAnswer))
	if calls() != before {
		t.Error("an answer younger than the TTL was not reused")
	}
	now = now.Add(time.Millisecond)
	u.Authorize(ctx, req("tok-p", "GET/a"), []byte(policyAnswer))
	if calls() != before+1 {
		t.Error("an answer as old as the TTL was reused")
	}
}

// TestUpstreamCacheOff: no identity sources named, or a TTL of 0 or less,
// is no cache at all: every request invokes the upstream.
func TestUpstreamCacheOff(t *testing.T) {
	t.Parallel()
	for _, o := range []identity.UpstreamOptions{
		{TTL: identity.DefaultUpstreamTTL},
		{TTL: 0, Sources: mustSources(t, "header:authorization")},
		{TTL: -1, Sources: mustSources(t, "header:authorization")},
	} {
		inv := &countingInvoker{}
		u := identity.NewUpstream(inv, o)
		for range 2 {
			u.Authorize(context.Background(), req("tok", "GET/a"), []byte(policyAnswer))
		}
		if inv.calls.Load() != 2 || u.Len() != 0 {
			t.Errorf("%d sources, TTL %v: %d invocations, %d cached; want 2, 0", len(o.Sources), o.TTL, inv.calls.Load(), u.Len())
		}
	}
}

// TestUpstreamCacheKey: an answer is reused only for a request with the
// same value of every source named (every value, for a header sent
// twice); values are length-prefixed, so no two lists join alike.
func TestUpstreamCacheKey(t *testing.T) {
	t.Parallel()
	base := func() *identity.UpstreamRequest {
		return &identity.UpstreamRequest{
			Request: identity.Request{
				Headers: map[string]string{"authorization": "Bearer x"}, Query: map[string]string{"tenant": "a"},
				APIKey: "k1", SourceIP: "203.0.113.9",
			},
			Route: "arn:aws:execute-api:eu-west-1:1:api/prod/GET/a", StageVariables: map[string]string{"env": "prod"},
		}
	}
	tests := []struct {
		name   string
		change func(r *identity.UpstreamRequest)
	}{
		{"header", func(r *identity.UpstreamRequest) { r.Headers["authorization"] = "Bearer y" }},
		{"query", func(r *identity.UpstreamRequest) { r.Query["tenant"] = "b" }},
		{"apikey", func(r *identity.UpstreamRequest) { r.APIKey = "k2" }},
		{"ip", func(r *identity.UpstreamRequest) { r.SourceIP = "203.0.113.10" }},
		{"route", func(r *identity.UpstreamRequest) { r.Route += "dmin" }},
		{"stage variable", func(r *identity.UpstreamRequest) { r.StageVariables["env"] = "test" }},
		{"header sent twice", func(r *identity.UpstreamRequest) {
			r.MultiHeaders = map[string][]string{"Authorization": {"Bearer other", "Bearer x"}}
		}},
		{"values joined otherwise", func(r *identity.UpstreamRequest) {
			r.Headers["authorization"], r.Query["tenant"] = "Bearer ", "xa" // "Bearer x"+"a" joined bare
		}},
	}
	sources := mustSources(t, "header:authorization,query:tenant,apikey,ip,route,stagevar:env")
	for _, tc := range tests {
		inv := &countingInvoker{}
		u := identity.NewUpstream(inv, identity.UpstreamOptions{Sources: sources, TTL: time.Minute})
		u.Authorize(context.Background(), base(), []byte(policyAnswer))
		u.Authorize(context.Background(), base(), []byte(policyAnswer))
		r := base()
		tc.change(r)
		u.Authorize(context.Background(), r, []byte(policyAnswer))
		if n := inv.calls.Load(); n != 2 {
			t.Errorf("%s changed: %d invocations, want 2 (the same request cached, the changed one asked)", tc.name, n)
		}
	}
	// A request missing one value is not cached.
	inv := &countingInvoker{}
	u := identity.NewUpstream(inv, identity.UpstreamOptions{Sources: sources, TTL: time.Minute})
	for range 2 {
		r := base()
		delete(r.StageVariables, "env")
		u.Authorize(context.Background(), r, []byte(policyAnswer))
	}
	if n := inv.calls.Load(); n != 2 || u.Len() != 0 {
		t.Errorf("without a stage variable named: %d invocations, %d cached; want 2, 0", n, u.Len())
	}
}

// TestUpstreamCacheBytes: the cache holds at most its byte budget of
// answers, whatever their number; an answer larger than the budget is used
// but not cached.
func TestUpstreamCacheBytes(t *testing.T) {
	t.Parallel()
	inv := &countingInvoker{}
	const budget = 8 << 10
	u := identity.NewUpstream(inv, identity.UpstreamOptions{Sources: mustSources(t, "header:authorization"), TTL: time.Minute, Bytes: budget})
	answer := []byte(`{"policyDocument":{},"context":{"pad":"` + strings.Repeat("x", 2000) + `"}}`)
	for i := range 20 {
		u.Authorize(context.Background(), req("tok-"+strconv.Itoa(i), "GET/a"), answer)
		if b := u.Bytes(); b > budget {
			t.Fatalf("after %d answers Bytes() = %d, over the budget %d", i+1, b, budget)
		}
	}
	if n := u.Len(); n != 3 {
		t.Errorf("Len() = %d answers of 2 KB in 8 KB, want 3", n)
	}
	// The same key again replaces, and costs once.
	before := u.Bytes()
	u.Authorize(context.Background(), req("tok-19", "GET/b"), answer)
	if u.Bytes() != before {
		t.Errorf("Bytes() = %d after a cached answer was reused, want %d", u.Bytes(), before)
	}
	huge := []byte(`{"policyDocument":{},"context":{"pad":"` + strings.Repeat("x", budget) + `"}}`)
	if got, err := u.Authorize(context.Background(), req("tok-huge", "GET/a"), huge); err != nil || len(got) != len(huge) {
		t.Fatalf("Authorize(huge) = %d bytes, %v", len(got), err)
	}
	if u.Len() != 3 {
		t.Errorf("an answer over the budget was cached (Len %d)", u.Len())
	}
}

func TestParseUpstreamSources(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want, err string }{
		{"", "", ""},
		{" header:Authorization , query:tenant,route,stagevar:env_1,apikey,ip", "header:Authorization,query:tenant,route,stagevar:env_1,apikey,ip", ""},
		{"ROUTE", "route", ""},
		{"route:GET", "", "route takes no name"},
		{"stagevar:", "", "a stage variable name"},
		{"stagevar:a-b", "", "a stage variable name"},
		{"header:", "", `identity source "header:"`},
		{"context:tenant", "", "what the upstream authorizer reads of the request"},
		{"principal", "", "what the upstream authorizer reads of the request"},
		{"jwt:sub", "", "want header:<name>, query:<name>, apikey, ip, route or stagevar:<name>"},
		{"header:a,,route", "", `identity source ""`},
	} {
		got, err := identity.ParseUpstreamSources(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseUpstreamSources(%q) error = %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseUpstreamSources(%q) error = %v, want one saying %q", tc.in, err, tc.err)
		case tc.err == "" && identity.FormatUpstreamSources(got) != tc.want:
			t.Errorf("ParseUpstreamSources(%q) = %q, want %q", tc.in, identity.FormatUpstreamSources(got), tc.want)
		}
	}
}

func TestUpstreamIdentity(t *testing.T) {
	t.Parallel()
	id := identity.NewUpstreamIdentity("user-1", map[string]any{
		"tenant": "acme", "seats": 3.0, "admin": true, "nested": map[string]any{"x": 1}, "none": nil,
	})
	want := identity.UpstreamIdentity{Principal: "user-1", Context: map[string]string{"tenant": "acme", "seats": "3", "admin": "true"}}
	if diff := cmp.Diff(want, id); diff != "" {
		t.Errorf("NewUpstreamIdentity mismatch (-want +got):\n%s", diff)
	}
	sources, err := identity.ParseSources("context:tenant,principal")
	if err != nil {
		t.Fatal(err)
	}
	var r identity.Request
	id.Apply(&r)
	if s, from, f := identity.Find(sources, &r); s != "acme" || from != identity.SourceContext || f != identity.Found {
		t.Errorf("Find(context:tenant) = %q, %v, %v; want acme", s, from, f)
	}
	if s, _, _ := identity.Find(sources[1:], &r); s != "user-1" {
		t.Errorf("Find(principal) = %q, want user-1", s)
	}
}

// BenchmarkUpstreamCacheHit is the cost of a cached answer: the key of
// three sources (a header, a query value, the route) hashed, one lookup.
func BenchmarkUpstreamCacheHit(b *testing.B) {
	src, err := identity.ParseUpstreamSources("header:authorization,query:tenant,route")
	if err != nil {
		b.Fatal(err)
	}
	u := identity.NewUpstream(&countingInvoker{}, identity.UpstreamOptions{Sources: src, TTL: time.Hour})
	r := &identity.UpstreamRequest{
		Request: identity.Request{Headers: map[string]string{"authorization": "Bearer " + strings.Repeat("x", 800)}, Query: map[string]string{"tenant": "acme"}},
		Route:   "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3/prod/GET/orders/42",
	}
	ctx := context.Background()
	u.Authorize(ctx, r, []byte(policyAnswer))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.Authorize(ctx, r, []byte(policyAnswer)); err != nil {
			b.Fatal(err)
		}
	}
}
