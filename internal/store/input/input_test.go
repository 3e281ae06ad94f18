package input_test

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store/input"
)

func TestPage(t *testing.T) {
	t.Parallel()
	const id = "0b6f2f4e-3c1a-4d8e-9f10-2a3b4c5d6e7f"
	r := rules.Rule{API: "shop", Route: "GET /items/{id}", Subject: "*", ID: id}
	key := input.KeyOf(r)
	raw := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name      string
		f         rules.Filter
		size      int
		after     *input.Key
		badFields []string
	}{
		{name: "defaults", f: rules.Filter{}, size: input.DefaultPageSize},
		{name: "size", f: rules.Filter{Limit: 7}, size: 7},
		{name: "max", f: rules.Filter{Limit: input.MaxPageSize}, size: input.MaxPageSize},
		{name: "cursor round trip", f: rules.Filter{Cursor: input.Cursor(r)}, size: input.DefaultPageSize, after: &key},
		{name: "too large", f: rules.Filter{Limit: input.MaxPageSize + 1}, badFields: []string{"limit"}},
		{name: "negative", f: rules.Filter{Limit: -1}, badFields: []string{"limit"}},
		{name: "not base64", f: rules.Filter{Cursor: "!!"}, badFields: []string{"cursor"}},
		{name: "no format prefix", f: rules.Filter{Cursor: raw(id)}, badFields: []string{"cursor"}},
		{name: "the id-ordered format", f: rules.Filter{Cursor: raw("r1:" + id)}, badFields: []string{"cursor"}},
		{name: "three parts", f: rules.Filter{Cursor: raw(`r2:["a","b","` + id + `"]`)}, badFields: []string{"cursor"}},
		{name: "upper-case id", f: rules.Filter{Cursor: input.Cursor(rules.Rule{ID: "0B6F2F4E-3C1A-4D8E-9F10-2A3B4C5D6E7F"})}, badFields: []string{"cursor"}},
		{name: "NUL in api", f: rules.Filter{Cursor: input.Cursor(rules.Rule{API: "a\x00", ID: id})}, badFields: []string{"cursor"}},
		{name: "both", f: rules.Filter{Limit: -1, Cursor: "cjI6"}, badFields: []string{"limit", "cursor"}},
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
		if err == nil && (size != tc.size || !cmp.Equal(after, tc.after)) {
			t.Errorf("%s: Page(%+v) = %d, %v; want %d, %v", tc.name, tc.f, size, after, tc.size, tc.after)
		}
	}
}

func TestKeyOrder(t *testing.T) {
	t.Parallel()
	// Byte order, not a locale's: upper case before lower, "*" first.
	ordered := []input.Key{
		{API: "*", Route: "*", Subject: "*", ID: "1"},
		{API: "Shop", Route: "*", Subject: "*", ID: "1"},
		{API: "shop", Route: "*", Subject: "z", ID: "1"},
		{API: "shop", Route: "GET /a", Subject: "*", ID: "1"},
		{API: "shop", Route: "GET /a", Subject: "k", ID: "0"},
		{API: "shop", Route: "GET /a", Subject: "k", ID: "2"},
		{API: "shop", Route: "POST /a", Subject: "*", ID: "0"},
	}
	for i := range ordered {
		for j := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := ordered[i].Compare(ordered[j]); got != want {
				t.Errorf("%+v.Compare(%+v) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func TestSameRule(t *testing.T) {
	t.Parallel()
	base := rules.Rule{ID: "x", API: "a", Route: "*", Subject: "*", Limit: new(int64(5)), Period: rules.Period(90 * time.Second), Version: 1}
	same := base
	same.Limit = new(int64(5)) // another pointer, the same number
	same.Version, same.UpdatedAt = 7, time.Now()
	if !input.SameRule(base, same) {
		t.Errorf("SameRule(%+v, %+v) = false; want true: only the version and time differ", base, same)
	}
	other := base
	other.Limit = new(int64(6))
	if input.SameRule(base, other) {
		t.Error("SameRule(limit 5, limit 6) = true; want false")
	}
	p := rules.Plan{Name: "gold", Limit: 1, Period: rules.Period(time.Minute), Version: 1}
	q := p
	q.Version = 2
	q.Description = "changed"
	if input.SamePlan(p, q) {
		t.Error("SamePlan(description changed) = true; want false")
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	err := input.RuleWrite(&rules.Rule{API: "ok", Route: "a\x00b", Subject: "\xff", Description: "fine"}, rules.ActionCreate, "")
	var ve *rules.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("RuleWrite(NUL route, invalid subject) = %v, want a ValidationError", err)
	}
	want := []rules.FieldError{
		{Field: "route", Reason: "must be valid UTF-8 without NUL bytes"},
		{Field: "subject", Reason: "must be valid UTF-8 without NUL bytes"},
	}
	if diff := cmp.Diff(want, ve.Fields); diff != "" {
		t.Errorf("RuleWrite fields (-want +got):\n%s", diff)
	}
	if err := input.PlanWrite(&rules.Plan{Name: "gold", Description: "é"}, rules.ActionCreate, ""); err != nil {
		t.Errorf("PlanWrite(valid) = %v, want nil", err)
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
