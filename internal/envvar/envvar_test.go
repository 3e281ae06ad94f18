package envvar

import (
	"slices"
	"testing"
)

func TestList(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ,", nil},
		{"a", []string{"a"}},
		{" a ,b,, c ", []string{"a", "b", "c"}},
	} {
		if got := List(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("List(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
