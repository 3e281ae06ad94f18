package rules

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNormalizeTarget: what each part of a Target becomes, or which parts
// are refused. The entries' own tests (ratelimit's TestHostileTargets)
// check that every entry answers alike.
func TestNormalizeTarget(t *testing.T) {
	t.Parallel()
	const all = PartSubject | PartAPI | PartRoute
	ok := Target{Subject: "S", API: "a1b2c3d4e5", Route: "GET /pets/{id}"}
	with := func(f func(*Target)) Target { t := ok; f(&t); return t }
	for _, tt := range []struct {
		name  string
		in    Target
		given Part
		want  Target
		bad   []string // the refused fields
	}{
		{"as is", ok, all, ok, nil},
		{"spaces around", Target{Subject: " S ", API: " a1b2c3d4e5 ", Route: " get /pets/{id}/ "}, all, ok, nil},
		{"tab and NBSP around the subject", with(func(t *Target) { t.Subject = "\t\u00a0S\u00a0\n" }), all, ok, nil},
		{"every subject is a subject", with(func(t *Target) { t.Subject = "*" }), all, with(func(t *Target) { t.Subject = "*" }), nil},
		{"API-wide route", with(func(t *Target) { t.Route = "*" }), all, with(func(t *Target) { t.Route = "*" }), nil},
		{"ANY", with(func(t *Target) { t.Route = "ANY /x" }), all, with(func(t *Target) { t.Route = "ANY /x" }), nil},
		{"256 bytes", with(func(t *Target) { t.Subject = " " + strings.Repeat("s", MaxSubjectLen) + " " }), all,
			with(func(t *Target) { t.Subject = strings.Repeat("s", MaxSubjectLen) }), nil},
		{"nothing", Target{}, all, Target{}, []string{"subject", "api", "route"}},
		{"blank", Target{Subject: "  ", API: " ", Route: " "}, all, Target{}, []string{"subject", "api", "route"}},
		{"257 bytes", with(func(t *Target) { t.Subject = strings.Repeat("s", MaxSubjectLen+1) }), all, Target{}, []string{"subject"}},
		{"not UTF-8", with(func(t *Target) { t.Subject = "S\xff" }), all, Target{}, []string{"subject"}},
		{"NUL", with(func(t *Target) { t.Subject = "S\x00" }), all, Target{}, []string{"subject"}},
		{"control inside", with(func(t *Target) { t.Subject = "S\x1bT" }), all, Target{}, []string{"subject"}},
		{"every API", with(func(t *Target) { t.API = "*" }), all, Target{}, []string{"api"}},
		{"API with a slash", with(func(t *Target) { t.API = "a/b" }), all, Target{}, []string{"api"}},
		{"API too long", with(func(t *Target) { t.API = strings.Repeat("a", MaxAPILen+1) }), all, Target{}, []string{"api"}},
		{"unknown method", with(func(t *Target) { t.Route = "FROB /x" }), all, Target{}, []string{"route"}},
		{"no path", with(func(t *Target) { t.Route = "GET" }), all, Target{}, []string{"route"}},
		{"dot-dot", with(func(t *Target) { t.Route = "GET /a/../b" }), all, Target{}, []string{"route"}},
		{"NUL in the path", with(func(t *Target) { t.Route = "GET /a\x00" }), all, Target{}, []string{"route"}},
		{"route too long", with(func(t *Target) { t.Route = "GET /" + strings.Repeat("a", MaxRouteLen) }), all, Target{}, []string{"route"}},
		{"only the subject given", Target{Subject: " S ", API: "*", Route: "FROB"}, PartSubject, Target{Subject: "S", API: "*", Route: "FROB"}, nil},
	} {
		got, err := NormalizeTarget(tt.in, tt.given)
		var ve *ValidationError
		if tt.bad == nil {
			if err != nil || got != tt.want {
				t.Errorf("%s: NormalizeTarget(%q) = %q, %v; want %q", tt.name, tt.in, got, err, tt.want)
			}
			continue
		}
		if !errors.As(err, &ve) {
			t.Errorf("%s: NormalizeTarget(%q) error = %v, want a *ValidationError", tt.name, tt.in, err)
			continue
		}
		var fields []string
		for _, f := range ve.Fields {
			fields = append(fields, f.Field)
			if f.Reason == "" || len(tt.in.Subject) > 3 && strings.Contains(f.Reason, tt.in.Subject) {
				t.Errorf("%s: reason %q: want one, never repeating the subject (it may be a secret)", tt.name, f.Reason)
			}
		}
		if diff := cmp.Diff(tt.bad, fields); diff != "" {
			t.Errorf("%s: refused fields (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestNormalizeTargetAllocs: the authorizer puts every subject through
// NormalizeTarget; a good one costs no allocation.
func TestNormalizeTargetAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _, _ = NormalizeTarget(Target{Subject: " key-1 "}, PartSubject) }); n != 0 {
		t.Errorf("NormalizeTarget of a good subject allocates %v times, want 0", n)
	}
}

// BenchmarkNormalizeTarget is the authorizer's cost per subject: an API
// key of 40 bytes.
//
//	go test -run '^$' -bench NormalizeTarget ./internal/rules/
func BenchmarkNormalizeTarget(b *testing.B) {
	subject := "key-" + strings.Repeat("0123456789", 3) + "abcdef"
	for b.Loop() {
		if _, err := NormalizeTarget(Target{Subject: subject}, PartSubject); err != nil {
			b.Fatal(err)
		}
	}
}
