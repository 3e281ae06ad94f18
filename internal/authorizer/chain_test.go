package authorizer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/rules"
)

// TestDecideFor limits the caller an upstream authorizer named, by its
// principalId or a context key, with the subject hygiene of the sources:
// a denied, missing, empty, oversized or non-UTF-8 subject never reaches
// the limiter.
func TestDecideFor(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOpts{rules: []rules.Rule{rule("orders", "a1b2c3", "GET /orders", "*", 2, time.Minute)}})
	req := authorizer.Request{API: "a1b2c3", Method: "GET", Resource: "/orders",
		// Never read: the upstream names the subject.
		Headers: map[string]string{"x-api-key": "from-a-header"}}

	tests := []struct {
		name    string
		up      authorizer.Upstream
		key     string
		times   int
		want    bool // Allowed of the last request
		wantErr error
		subject string
	}{
		{name: "principal allowed", up: authorizer.Upstream{Allowed: true, PrincipalID: " user-1 "}, times: 2, want: true, subject: "user-1"},
		{name: "principal over the limit", up: authorizer.Upstream{Allowed: true, PrincipalID: "user-2"}, times: 3, want: false, subject: "user-2"},
		{name: "context key", key: "tenant", up: authorizer.Upstream{Allowed: true, PrincipalID: "user-3", Context: map[string]any{"tenant": "acme"}}, times: 1, want: true, subject: "acme"},
		{name: "context number from JSON", key: "tenant", up: authorizer.Upstream{Allowed: true, Context: map[string]any{"tenant": json.Number("42")}}, times: 1, want: true, subject: "42"},
		{name: "context float64 from json.Unmarshal", key: "tenant", up: authorizer.Upstream{Allowed: true, Context: map[string]any{"tenant": float64(1234567)}}, times: 1, want: true, subject: "1234567"},
		{name: "context bool", key: "tenant", up: authorizer.Upstream{Allowed: true, Context: map[string]any{"tenant": true}}, times: 1, want: true, subject: "true"},
		{name: "context int", key: "tenant", up: authorizer.Upstream{Allowed: true, Context: map[string]any{"tenant": 7}}, times: 1, want: true, subject: "7"},
		{name: "upstream denied", up: authorizer.Upstream{PrincipalID: "user-4"}, times: 1, wantErr: authorizer.ErrUpstreamDenied},
		{name: "empty principal", up: authorizer.Upstream{Allowed: true, PrincipalID: "  "}, times: 1, wantErr: authorizer.ErrNoSubject},
		{name: "oversized principal", up: authorizer.Upstream{Allowed: true, PrincipalID: strings.Repeat("x", identity.MaxSubjectLen+1)}, times: 1, wantErr: authorizer.ErrNoSubject},
		{name: "principal at the bound", up: authorizer.Upstream{Allowed: true, PrincipalID: strings.Repeat("y", identity.MaxSubjectLen)}, times: 1, want: true, subject: strings.Repeat("y", identity.MaxSubjectLen)},
		{name: "invalid UTF-8", up: authorizer.Upstream{Allowed: true, PrincipalID: "bad\xff"}, times: 1, wantErr: authorizer.ErrNoSubject},
		{name: "context key missing", key: "tenant", up: authorizer.Upstream{Allowed: true, PrincipalID: "user-5", Context: map[string]any{"other": "x"}}, times: 1, wantErr: authorizer.ErrNoSubject},
		{name: "context value not a scalar", key: "tenant", up: authorizer.Upstream{Allowed: true, Context: map[string]any{"tenant": []string{"a"}}}, times: 1, wantErr: authorizer.ErrNoSubject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				res authorizer.Result
				err error
			)
			for range tt.times {
				res, err = s.a.DecideFor(context.Background(), &tt.up, tt.key, &req)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("DecideFor = %v, want %v", err, tt.wantErr)
				}
				if res.Effective != nil || res.LimiterTime != 0 {
					t.Errorf("DecideFor charged a bucket on %v: %+v", err, res)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecideFor: %v", err)
			}
			if res.Allowed != tt.want || res.Subject != tt.subject || res.Rule != "orders" {
				t.Errorf("DecideFor = allowed %v subject %q rule %q, want %v %q orders", res.Allowed, res.Subject, res.Rule, tt.want, tt.subject)
			}
			if !tt.want && res.RetryAfter <= 0 {
				t.Errorf("denied with RetryAfter %v, want > 0", res.RetryAfter)
			}
		})
	}
	if req.Subject != "" {
		t.Errorf("DecideFor modified the request: Subject %q", req.Subject)
	}
}

// TestMergeContext: Sluice's keys win, every other upstream key passes, and
// neither input changes.
func TestMergeContext(t *testing.T) {
	t.Parallel()
	own := map[string]any{"limit": int64(10), "retryAfter": int64(3), "rateLimit": `"r";r=0;t=3`}
	up := map[string]any{"limit": "forged", "retryAfter": 0, "tenant": "acme", "admin": true}
	got := authorizer.MergeContext(own, up)
	want := map[string]any{"limit": int64(10), "retryAfter": int64(3), "rateLimit": `"r";r=0;t=3`, "tenant": "acme", "admin": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MergeContext (-want +got):\n%s", diff)
	}
	if up["limit"] != "forged" || len(own) != 3 {
		t.Errorf("MergeContext modified its inputs: own %v upstream %v", own, up)
	}
	if got := authorizer.MergeContext(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("MergeContext(nil, nil) = %#v, want an empty map", got)
	}
}
