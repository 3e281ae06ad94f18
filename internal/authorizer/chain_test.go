package authorizer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/rules"
)

// TestDecideBehindUpstream limits the caller an upstream authorizer named
// (Request.Upstream, as apigw sets it for an invoked or in-process
// upstream's Allow), by its principalId or a context key, with the one
// subject hygiene: a missing, empty, oversized or non-UTF-8 subject never
// reaches the limiter, and the error says what the answer lacks without
// its value. (An upstream that does not allow is apigw's: TestChainREST*,
// TestUpstreamChain.)
func TestDecideBehindUpstream(t *testing.T) {
	t.Parallel()
	orders := []rules.Rule{rule("orders", "a1b2c3", "GET /orders", "*", 2, time.Minute)}
	byPrincipal := newStack(t, stackOpts{rules: orders, sources: []identity.Source{{Kind: identity.SourcePrincipal}}})
	byTenant := newStack(t, stackOpts{rules: orders, sources: []identity.Source{{Kind: identity.SourceContext, Name: "tenant"}}})
	req := authorizer.Request{API: "a1b2c3", Method: "GET", Resource: "/orders",
		// Never read: the upstream names the subject.
		Headers: map[string]string{"x-api-key": "from-a-header"}}

	tests := []struct {
		name      string
		s         stack
		principal string
		context   map[string]any
		times     int
		want      bool   // Allowed of the last request
		wantErr   string // in the error, which wraps ErrNoSubject
		subject   string
	}{
		{name: "principal allowed", s: byPrincipal, principal: " user-1 ", times: 2, want: true, subject: "user-1"},
		{name: "principal over the limit", s: byPrincipal, principal: "user-2", times: 3, want: false, subject: "user-2"},
		{name: "context key", s: byTenant, principal: "user-3", context: map[string]any{"tenant": "acme"}, times: 1, want: true, subject: "acme"},
		{name: "context number from JSON", s: byTenant, context: map[string]any{"tenant": json.Number("42")}, times: 1, want: true, subject: "42"},
		{name: "context float64 from json.Unmarshal", s: byTenant, context: map[string]any{"tenant": float64(1234567)}, times: 1, want: true, subject: "1234567"},
		{name: "context bool", s: byTenant, context: map[string]any{"tenant": true}, times: 1, want: true, subject: "true"},
		{name: "context int", s: byTenant, context: map[string]any{"tenant": 7}, times: 1, want: true, subject: "7"},
		{name: "empty principal", s: byPrincipal, principal: "  ", times: 1, wantErr: "gave no principalId"},
		{name: "oversized principal", s: byPrincipal, principal: strings.Repeat("x", identity.MaxSubjectLen+1), times: 1, wantErr: "principalId: invalid subject: must be at most 256 bytes"},
		{name: "principal at the bound", s: byPrincipal, principal: strings.Repeat("y", identity.MaxSubjectLen), times: 1, want: true, subject: strings.Repeat("y", identity.MaxSubjectLen)},
		{name: "invalid UTF-8", s: byPrincipal, principal: "bad\xff", times: 1, wantErr: "principalId: invalid subject: must be valid UTF-8"},
		{name: "control character", s: byPrincipal, principal: "bad\x00", times: 1, wantErr: "must not contain control characters"},
		{name: "context key missing", s: byTenant, principal: "user-5", context: map[string]any{"other": "x"}, times: 1, wantErr: `gave no context key "tenant"`},
		{name: "context value not a scalar", s: byTenant, context: map[string]any{"tenant": []string{"a"}}, times: 1, wantErr: `gave no context key "tenant" with a string, number or boolean value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				res authorizer.Result
				err error
			)
			for range tt.times {
				id := identity.NewUpstreamIdentity(tt.principal, tt.context)
				r := req
				r.Upstream = &id
				res, err = tt.s.a.Decide(context.Background(), &r)
			}
			if tt.wantErr != "" {
				if !errors.Is(err, authorizer.ErrNoSubject) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decide = %v, want ErrNoSubject saying %q", err, tt.wantErr)
				}
				if p := strings.TrimSpace(tt.principal); p != "" && strings.Contains(err.Error(), p) {
					t.Errorf("the error %q holds the subject", err)
				}
				if res.Effective != nil || res.LimiterTime != 0 {
					t.Errorf("Decide charged a bucket on %v: %+v", err, res)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if res.Allowed != tt.want || res.Subject != tt.subject || res.Rule != "orders" {
				t.Errorf("Decide = allowed %v subject %q rule %q, want %v %q orders", res.Allowed, res.Subject, res.Rule, tt.want, tt.subject)
			}
			if !tt.want && res.RetryAfter <= 0 {
				t.Errorf("denied with RetryAfter %v, want > 0", res.RetryAfter)
			}
			if res.Context != nil {
				t.Errorf("Result.Context = %v, want nil: the upstream's context is the adapter's to answer with", res.Context)
			}
		})
	}
}
