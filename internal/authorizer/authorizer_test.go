package authorizer_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
)

// outcome is the part of a Result a test checks.
type outcome struct {
	Allowed      bool
	Rule         string
	Limit        int64
	Remaining    int64
	RetryAfter   int64 // seconds, rounded up
	Default      bool
	ShadowDenied bool
	FailOpen     bool
	Cost         int64
	Policy       string
	RateLimit    string
}

func outcomeOf(r authorizer.Result) outcome {
	return outcome{
		Allowed: r.Allowed, Rule: r.Rule, Limit: r.Limit, Remaining: r.Remaining,
		RetryAfter: authorizer.Seconds(r.RetryAfter), Default: r.Default,
		ShadowDenied: r.ShadowDenied, FailOpen: r.FailOpen, Cost: r.Cost,
		Policy: r.Policy(), RateLimit: string(r.AppendRateLimit(nil)),
	}
}

func get(key, resource string) authorizer.Request {
	return authorizer.Request{
		API: "a1b2c3", Method: "GET", Resource: resource,
		Headers:  map[string]string{"x-api-key": key},
		SourceIP: "203.0.113.9",
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	type step struct {
		req   authorizer.Request
		times int // requests sent; the last one is checked
		want  outcome
	}
	tests := []struct {
		name  string
		rules []rules.Rule
		def   *rules.Effective
		steps []step
	}{
		{
			name:  "allow then deny",
			rules: []rules.Rule{rule("r-api", "a1b2c3", "*", "*", 3, time.Minute)},
			steps: []step{
				{req: get("k1", "/orders/{id}"), times: 1, want: outcome{Allowed: true, Rule: "r-api", Limit: 3, Remaining: 2, Cost: 1,
					Policy: `"r-api";q=3;w=60`, RateLimit: `"r-api";r=2;t=20`}},
				{req: get("k1", "/orders/{id}"), times: 2, want: outcome{Allowed: true, Rule: "r-api", Limit: 3, Remaining: 0, Cost: 1,
					Policy: `"r-api";q=3;w=60`, RateLimit: `"r-api";r=0;t=60`}},
				{req: get("k1", "/orders/{id}"), times: 1, want: outcome{Allowed: false, Rule: "r-api", Limit: 3, Remaining: 0, RetryAfter: 20, Cost: 1,
					Policy: `"r-api";q=3;w=60`, RateLimit: `"r-api";r=0;t=60`}},
				// Another subject has its own bucket.
				{req: get("k2", "/orders/{id}"), times: 1, want: outcome{Allowed: true, Rule: "r-api", Limit: 3, Remaining: 2, Cost: 1,
					Policy: `"r-api";q=3;w=60`, RateLimit: `"r-api";r=2;t=20`}},
			},
		},
		{
			name: "stacked scopes: the stricter route rule limits",
			rules: []rules.Rule{
				rule("r-api", "a1b2c3", "*", "*", 100, time.Minute),
				rule("r-route", "a1b2c3", "GET /orders/{id}", "*", 2, time.Minute),
			},
			steps: []step{
				{req: get("k1", "/orders/{id}"), times: 2, want: outcome{Allowed: true, Rule: "r-route", Limit: 2, Remaining: 0, Cost: 1,
					Policy: `"r-api";q=100;w=60, "r-route";q=2;w=60`, RateLimit: `"r-route";r=0;t=60`}},
				{req: get("k1", "/orders/{id}"), times: 1, want: outcome{Allowed: false, Rule: "r-route", Limit: 2, Remaining: 0, RetryAfter: 30, Cost: 1,
					Policy: `"r-api";q=100;w=60, "r-route";q=2;w=60`, RateLimit: `"r-route";r=0;t=60`}},
				// Other routes only see the API-wide rule, which was charged
				// twice (the denied call charged nothing).
				{req: get("k1", "/orders"), times: 1, want: outcome{Allowed: true, Rule: "r-api", Limit: 100, Remaining: 97, Cost: 1,
					Policy: `"r-api";q=100;w=60`, RateLimit: `"r-api";r=97;t=2`}},
			},
		},
		{
			name: "API-wide rule exhausted denies every route",
			rules: []rules.Rule{
				rule("r-api", "a1b2c3", "*", "*", 1, time.Hour),
				rule("r-route", "a1b2c3", "GET /orders/{id}", "*", 50, time.Minute),
			},
			steps: []step{
				{req: get("k1", "/orders"), times: 1, want: outcome{Allowed: true, Rule: "r-api", Limit: 1, Remaining: 0, Cost: 1,
					Policy: `"r-api";q=1;w=3600`, RateLimit: `"r-api";r=0;t=3600`}},
				{req: get("k1", "/orders/{id}"), times: 1, want: outcome{Allowed: false, Rule: "r-api", Limit: 1, Remaining: 0, RetryAfter: 3600, Cost: 1,
					Policy: `"r-api";q=1;w=3600, "r-route";q=50;w=60`, RateLimit: `"r-api";r=0;t=3600`}},
			},
		},
		{
			name: "route cost",
			rules: []rules.Rule{
				rule("r-api", "a1b2c3", "*", "*", 10, time.Minute),
				func() rules.Rule {
					r := rule("r-export", "a1b2c3", "GET /export", "*", 10, time.Minute)
					r.Cost = new(int64(4))
					return r
				}(),
			},
			steps: []step{
				{req: get("k1", "/export"), times: 2, want: outcome{Allowed: true, Rule: "r-api", Limit: 10, Remaining: 2, Cost: 4,
					Policy: `"r-api";q=10;w=60, "r-export";q=10;w=60`, RateLimit: `"r-api";r=2;t=48`}},
				{req: get("k1", "/export"), times: 1, want: outcome{Allowed: false, Rule: "r-api", Limit: 10, Remaining: 2, RetryAfter: 12, Cost: 4,
					Policy: `"r-api";q=10;w=60, "r-export";q=10;w=60`, RateLimit: `"r-api";r=2;t=48`}},
			},
		},
		{
			name:  "default rule when nothing matches",
			rules: []rules.Rule{rule("r-other", "zzz", "*", "*", 1, time.Minute)},
			def:   &rules.Effective{Limit: 2, Period: time.Minute},
			steps: []step{
				{req: get("k1", "/orders"), times: 2, want: outcome{Allowed: true, Rule: "default", Limit: 2, Remaining: 0, Default: true, Cost: 1,
					Policy: `"default";q=2;w=60`, RateLimit: `"default";r=0;t=60`}},
				{req: get("k1", "/orders"), times: 1, want: outcome{Allowed: false, Rule: "default", Limit: 2, RetryAfter: 30, Default: true, Cost: 1,
					Policy: `"default";q=2;w=60`, RateLimit: `"default";r=0;t=60`}},
			},
		},
		{
			name:  "no rule and no default allows without limit",
			rules: nil,
			steps: []step{
				{req: get("k1", "/orders"), times: 3, want: outcome{Allowed: true}},
			},
		},
		{
			name: "blocked subject",
			rules: []rules.Rule{
				rule("r-api", "a1b2c3", "*", "*", 100, time.Minute),
				rule("r-block", "a1b2c3", "*", "bad-key", 0, time.Hour),
			},
			steps: []step{
				{req: get("bad-key", "/orders"), times: 1, want: outcome{Allowed: false, Rule: "r-block", RetryAfter: 3600, Cost: 1,
					Policy: `"r-block";q=0;w=3600`, RateLimit: `"r-block";r=0;t=0`}},
				{req: get("good-key", "/orders"), times: 1, want: outcome{Allowed: true, Rule: "r-api", Limit: 100, Remaining: 99, Cost: 1,
					Policy: `"r-api";q=100;w=60`, RateLimit: `"r-api";r=99;t=1`}},
			},
		},
		{
			name: "shadow rule never denies",
			rules: func() []rules.Rule {
				r := rule("r-shadow", "a1b2c3", "GET /orders", "*", 1, time.Minute)
				r.Mode = rules.Shadow
				return []rules.Rule{rule("r-api", "a1b2c3", "*", "*", 100, time.Minute), r}
			}(),
			steps: []step{
				{req: get("k1", "/orders"), times: 1, want: outcome{Allowed: true, Rule: "r-api", Limit: 100, Remaining: 99, Cost: 1,
					Policy: `"r-api";q=100;w=60`, RateLimit: `"r-api";r=99;t=1`}},
				{req: get("k1", "/orders"), times: 1, want: outcome{Allowed: true, Rule: "r-api", Limit: 100, Remaining: 98, ShadowDenied: true, Cost: 1,
					Policy: `"r-api";q=100;w=60`, RateLimit: `"r-api";r=98;t=2`}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, stackOpts{rules: tc.rules, def: tc.def})
			ctx := context.Background()
			for i, st := range tc.steps {
				var res authorizer.Result
				for range max(st.times, 1) {
					var err error
					res, err = s.a.Decide(ctx, &st.req)
					if err != nil {
						t.Fatalf("step %d: Decide(%s %s) error: %v", i, st.req.Method, st.req.Resource, err)
					}
				}
				if diff := cmp.Diff(st.want, outcomeOf(res)); diff != "" {
					t.Errorf("step %d: Decide(%s %s as %s) mismatch (-want +got):\n%s", i, st.req.Method, st.req.Resource, st.req.Headers["x-api-key"], diff)
				}
			}
		})
	}
}

func TestDecideSubject(t *testing.T) {
	t.Parallel()
	rs := []rules.Rule{rule("r-api", "a1b2c3", "*", "*", 100, time.Minute)}
	ip := []identity.Source{identity.HeaderSource("x-api-key"), {Kind: identity.SourceQuery, Name: "api_key"}, {Kind: identity.SourceAPIKey}, {Kind: identity.SourceIP}}
	tests := []struct {
		name    string
		sources []identity.Source
		req     authorizer.Request
		want    string // subject; "" means ErrNoSubject
	}{
		{"lower-case header", nil, authorizer.Request{Headers: map[string]string{"x-api-key": "k"}}, "k"},
		{"canonical header", nil, authorizer.Request{Headers: map[string]string{"X-Api-Key": "k"}}, "k"},
		{"shouting header", nil, authorizer.Request{Headers: map[string]string{"X-API-KEY": "k"}}, "k"},
		{"no header", nil, authorizer.Request{Headers: map[string]string{"accept": "*/*"}, SourceIP: "198.51.100.1"}, ""},
		{"blank header", nil, authorizer.Request{Headers: map[string]string{"x-api-key": "  "}}, ""},
		{"query after header", ip, authorizer.Request{Query: map[string]string{"api_key": "q"}, APIKey: "usage", SourceIP: "198.51.100.1"}, "q"},
		{"usage plan key", ip, authorizer.Request{APIKey: "usage", SourceIP: "198.51.100.1"}, "usage"},
		{"anonymous by ip", ip, authorizer.Request{SourceIP: "198.51.100.1"}, "198.51.100.1"},
		{"ip but none", ip, authorizer.Request{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, stackOpts{rules: rs, sources: tc.sources})
			tc.req.API, tc.req.Method, tc.req.Resource = "a1b2c3", "GET", "/"
			res, err := s.a.Decide(context.Background(), &tc.req)
			if tc.want == "" {
				if !errors.Is(err, authorizer.ErrNoSubject) {
					t.Fatalf("Decide(%+v) = %+v, %v; want ErrNoSubject", tc.req, res, err)
				}
				return
			}
			if err != nil || res.Subject != tc.want || !res.Allowed {
				t.Fatalf("Decide(%+v) = subject %q allowed %v, %v; want %q allowed", tc.req, res.Subject, res.Allowed, err, tc.want)
			}
		})
	}
}

// closedPort returns a Redis URL nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "redis://" + addr + "/0"
}

func TestDecideRedisDown(t *testing.T) {
	t.Parallel()
	open := rule("r-open", "a1b2c3", "*", "*", 100, time.Minute)
	closed := rule("r-closed", "a1b2c3", "GET /pay", "*", 100, time.Minute)
	closed.FailureMode = rules.FailClosed
	s := newStack(t, stackOpts{
		rules: []rules.Rule{open, closed},
		redis: closedPort(t),
		lim:   limiter.Options{Timeout: 20 * time.Millisecond, BreakerThreshold: 2, BreakerCooldown: time.Minute},
	})
	for i := range 4 { // through the breaker opening
		req := get("k1", "/orders")
		res, err := s.a.Decide(context.Background(), &req)
		if err == nil || !res.Allowed || !res.FailOpen {
			t.Fatalf("call %d: Decide(fail-open route) = allowed %v failOpen %v, err %v; want allowed, failOpen, an error", i, res.Allowed, res.FailOpen, err)
		}
		req = get("k1", "/pay")
		res, err = s.a.Decide(context.Background(), &req)
		if err == nil || res.Allowed || res.FailOpen {
			t.Fatalf("call %d: Decide(fail-closed route) = allowed %v failOpen %v, err %v; want denied with an error", i, res.Allowed, res.FailOpen, err)
		}
	}
	if st := s.lim.Stats(); st.Breaker != limiter.BreakerOpen {
		t.Errorf("breaker = %v after repeated failures, want open", st.Breaker)
	}
}
