package input_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/input"
)

func TestPage(t *testing.T) {
	t.Parallel()
	const id = "0b6f2f4e-3c1a-4d8e-9f10-2a3b4c5d6e7f"
	for _, tc := range []struct {
		name      string
		f         rules.Filter
		size      int
		after     string
		badFields []string
	}{
		{name: "defaults", f: rules.Filter{}, size: input.DefaultPageSize},
		{name: "size", f: rules.Filter{Limit: 7}, size: 7},
		{name: "max", f: rules.Filter{Limit: input.MaxPageSize}, size: input.MaxPageSize},
		{name: "cursor round trip", f: rules.Filter{Cursor: input.Cursor(id)}, size: input.DefaultPageSize, after: id},
		{name: "too large", f: rules.Filter{Limit: input.MaxPageSize + 1}, badFields: []string{"limit"}},
		{name: "negative", f: rules.Filter{Limit: -1}, badFields: []string{"limit"}},
		{name: "not base64", f: rules.Filter{Cursor: "!!"}, badFields: []string{"cursor"}},
		{name: "no format prefix", f: rules.Filter{Cursor: base64.RawURLEncoding.EncodeToString([]byte(id))}, badFields: []string{"cursor"}},
		{name: "upper-case id", f: rules.Filter{Cursor: input.Cursor("0B6F2F4E-3C1A-4D8E-9F10-2A3B4C5D6E7F")}, badFields: []string{"cursor"}},
		{name: "both", f: rules.Filter{Limit: -1, Cursor: "cjE6"}, badFields: []string{"limit", "cursor"}},
	} {
		size, after, err := input.Page(tc.f)
		var ve *rules.ValidationError
		var got []string
		if errors.As(err, &ve) {
			for _, fe := range ve.Fields {
				got = append(got, fe.Field)
			}
		} else if err != nil {
			t.Errorf("%s: Page(%+v) error = %v, want nil or a ValidationError", tc.name, tc.f, err)
		}
		if diff := cmp.Diff(tc.badFields, got); diff != "" {
			t.Errorf("%s: Page(%+v) fields in error (-want +got):\n%s", tc.name, tc.f, diff)
		}
		if err == nil && (size != tc.size || after != tc.after) {
			t.Errorf("%s: Page(%+v) = %d, %q; want %d, %q", tc.name, tc.f, size, after, tc.size, tc.after)
		}
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	err := input.RuleText(rules.Rule{API: "ok", Route: "a\x00b", Subject: "\xff", Description: "fine"})
	var ve *rules.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("RuleText(NUL route, invalid subject) = %v, want a ValidationError", err)
	}
	want := []rules.FieldError{
		{Field: "route", Reason: "must be valid UTF-8 without NUL bytes"},
		{Field: "subject", Reason: "must be valid UTF-8 without NUL bytes"},
	}
	if diff := cmp.Diff(want, ve.Fields); diff != "" {
		t.Errorf("RuleText fields (-want +got):\n%s", diff)
	}
	if err := input.PlanText(rules.Plan{Name: "gold", Description: "é"}); err != nil {
		t.Errorf("PlanText(valid) = %v, want nil", err)
	}
}

func TestID(t *testing.T) {
	t.Parallel()
	if got, ok := input.ID("0B6F2F4E-3C1A-4D8E-9F10-2A3B4C5D6E7F"); !ok || got != "0b6f2f4e-3c1a-4d8e-9f10-2a3b4c5d6e7f" {
		t.Errorf("ID(upper case) = %q, %v; want the lower-case form, true", got, ok)
	}
	if _, ok := input.ID("nope"); ok {
		t.Errorf("ID(nope) ok = true, want false")
	}
}

func TestSubjectRefHidesTheSubject(t *testing.T) {
	t.Parallel()
	if got := input.SubjectRef("sk_live_secret"); strings.Contains(got, "secret") {
		t.Errorf("SubjectRef(key) = %q, quotes the key", got)
	}
	if got, want := input.SubjectRef("*"), `subject "*"`; got != want {
		t.Errorf("SubjectRef(*) = %q, want %q", got, want)
	}
}
