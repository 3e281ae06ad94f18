package headers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Dialects
		err  string // a part of the error; "" for none
	}{
		{"", Default, ""},
		{" , ", Default, ""},
		{"draft11", Draft11, ""},
		{"DRAFT6", Draft6, ""},
		{" legacy ", Legacy, ""},
		{"draft11,legacy", Draft11 | Legacy, ""},
		{"legacy,draft6,draft11,legacy", Draft11 | Draft6 | Legacy, ""},
		{"draft-11", 0, `unknown dialect "draft-11"`},
		{"draft11,x-ratelimit", 0, `unknown dialect "x-ratelimit": want a comma-separated list of draft11, draft6, legacy`},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Parse(%q) error = %v, want one containing %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if again, err := Parse(got.String()); err != nil || again != got {
			t.Errorf("Parse(%q.String() = %q) = %v, %v; want it back", tt.in, got.String(), again, err)
		}
	}
}

func TestFields(t *testing.T) {
	names := func(d Dialects) []string {
		var out []string
		for _, f := range d.Fields() {
			out = append(out, f.Name+"<"+f.Key)
		}
		return out
	}
	tests := []struct {
		d    Dialects
		want []string
	}{
		{Draft11, []string{"RateLimit-Policy<rateLimitPolicy", "RateLimit<rateLimit"}},
		{Draft6, []string{"RateLimit-Limit<limit", "RateLimit-Remaining<remaining", "RateLimit-Reset<reset"}},
		{Legacy, []string{"X-RateLimit-Limit<limit", "X-RateLimit-Remaining<remaining", "X-RateLimit-Reset<resetAt"}},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, names(tt.d)); diff != "" {
			t.Errorf("%v.Fields() (-want +got):\n%s", tt.d, diff)
		}
		// The dialects combine only because no two write the same field.
		for _, f := range tt.d.Fields() {
			if seen[strings.ToLower(f.Name)] || strings.EqualFold(f.Name, RetryAfter.Name) {
				t.Errorf("field %s written twice", f.Name)
			}
			seen[strings.ToLower(f.Name)] = true
		}
	}
	if got := len((Draft11 | Draft6 | Legacy).Fields()); got != 8 {
		t.Errorf("all dialects: %d fields, want 8", got)
	}
}
