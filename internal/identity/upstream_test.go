package identity_test

import (
	"context"
	"errors"
	"strconv"
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

func TestUpstreamCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inv := &countingInvoker{}
	u := identity.NewUpstream(inv, identity.UpstreamOptions{TTL: 200 * time.Millisecond, Size: 3})
	for range 3 {
		if got, err := u.Authorize(ctx, "tok-a", []byte("answer-a")); err != nil || string(got) != "answer-a" {
			t.Fatalf("Authorize(tok-a) = %q, %v", got, err)
		}
	}
	if n := inv.calls.Load(); n != 1 {
		t.Errorf("3 calls for one identity invoked %d times, want 1", n)
	}
	// Unauthorized is cached; other failures are not.
	for range 2 {
		if _, err := u.Authorize(ctx, "tok-u", []byte("unauthorized")); !errors.Is(err, identity.ErrUpstreamUnauthorized) {
			t.Errorf("Authorize(unauthorized) error = %v", err)
		}
		if _, err := u.Authorize(ctx, "tok-f", []byte("fail")); err == nil {
			t.Error("Authorize(fail) error = nil")
		}
	}
	if n := inv.calls.Load(); n != 1+1+2 {
		t.Errorf("invocations = %d, want 4 (a once, unauthorized once, the failure twice)", n)
	}
	// No identity: never cached.
	before := inv.calls.Load()
	u.Authorize(ctx, "", []byte("x"))
	u.Authorize(ctx, "", []byte("x"))
	if n := inv.calls.Load() - before; n != 2 {
		t.Errorf("2 calls without identity invoked %d times, want 2", n)
	}
	// Bounded: 10 identities leave 3 answers.
	for i := range 10 {
		u.Authorize(ctx, "many-"+strconv.Itoa(i), []byte("y"))
	}
	if n := u.Len(); n != 3 {
		t.Errorf("Len() = %d after 10 identities, want the bound 3", n)
	}
	// The TTL ends reuse.
	time.Sleep(250 * time.Millisecond)
	before = inv.calls.Load()
	u.Authorize(ctx, "tok-a", []byte("answer-a"))
	if inv.calls.Load() != before+1 {
		t.Error("an answer older than the TTL was reused")
	}
}

func TestUpstreamTTLBounded(t *testing.T) {
	t.Parallel()
	inv := &countingInvoker{}
	// A day asks for more than the bound: it is cut to an hour, and a
	// negative TTL turns the cache off.
	off := identity.NewUpstream(inv, identity.UpstreamOptions{TTL: -1})
	off.Authorize(context.Background(), "k", []byte("a"))
	off.Authorize(context.Background(), "k", []byte("a"))
	if inv.calls.Load() != 2 || off.Len() != 0 {
		t.Errorf("TTL -1: %d invocations, %d cached; want 2, 0", inv.calls.Load(), off.Len())
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
	if s, from, ok := identity.Subject(sources, &r); s != "acme" || from != identity.SourceContext || !ok {
		t.Errorf("Subject(context:tenant) = %q, %v, %v; want acme", s, from, ok)
	}
	if s, _, _ := identity.Subject(sources[1:], &r); s != "user-1" {
		t.Errorf("Subject(principal) = %q, want user-1", s)
	}
	merged := identity.MergeContext(map[string]string{"tenant": "acme", "jwt_sub": "forged"}, map[string]string{"jwt_sub": "alice"})
	if diff := cmp.Diff(map[string]string{"tenant": "acme", "jwt_sub": "alice"}, merged); diff != "" {
		t.Errorf("MergeContext: ours must win (-want +got):\n%s", diff)
	}
}

func TestIdentityKey(t *testing.T) {
	t.Parallel()
	src, _ := identity.ParseSources("header:authorization,query:tenant")
	r := &identity.Request{Headers: map[string]string{"Authorization": "Bearer x"}, Query: map[string]string{"tenant": "a"}}
	k := identity.IdentityKey(src, r)
	if k == "" {
		t.Fatal("IdentityKey(both present) = empty")
	}
	r2 := &identity.Request{Headers: map[string]string{"Authorization": "Bearer x"}}
	if identity.IdentityKey(src, r2) != "" {
		t.Error("IdentityKey(one missing) not empty: an answer would be cached for a partial identity")
	}
	// Lengths prefix the values: ("ab","c") and ("a","bc") differ.
	a := identity.IdentityKey(src, &identity.Request{Headers: map[string]string{"authorization": "ab"}, Query: map[string]string{"tenant": "c"}})
	b := identity.IdentityKey(src, &identity.Request{Headers: map[string]string{"authorization": "a"}, Query: map[string]string{"tenant": "bc"}})
	if a == b {
		t.Error("IdentityKey joins values ambiguously")
	}
}
