package identity_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/identity"
)

func TestParseSources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    string // the sources' String()s joined by ","
		wantErr bool
	}{
		{in: "", want: "header:x-api-key"},
		{in: "header:x-api-key,query:api_key,apikey,ip", want: "header:x-api-key,query:api_key,apikey,ip"},
		{in: " header : Authorization , IP ", want: "header:Authorization,ip"},
		{in: "header:", wantErr: true},
		{in: "header:bad name", wantErr: true},
		{in: "query:", wantErr: true},
		{in: "query:a&b", wantErr: true},
		{in: "cookie:session", wantErr: true},
		{in: "ip:1", wantErr: true},
		{in: "apikey,,ip", wantErr: true},
	}
	for _, tc := range tests {
		got, err := identity.ParseSources(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseSources(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		var names []string
		for _, s := range got {
			names = append(names, s.String())
		}
		if diff := cmp.Diff(tc.want, strings.Join(names, ",")); diff != "" {
			t.Errorf("ParseSources(%q) mismatch (-want +got):\n%s", tc.in, diff)
		}
	}
}

func FuzzParseSources(f *testing.F) {
	for _, s := range []string{"", "header:x-api-key,query:api_key,apikey,ip", "header:", "ip,ip", "query:a=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := identity.ParseSources(in)
		if err != nil {
			return
		}
		if len(got) == 0 {
			t.Fatalf("ParseSources(%q) = no sources and no error", in)
		}
		// What parses prints back to something that parses the same.
		var names []string
		for _, s := range got {
			names = append(names, s.String())
		}
		again, err := identity.ParseSources(strings.Join(names, ","))
		if err != nil {
			t.Fatalf("ParseSources(%q) round trip: %v", strings.Join(names, ","), err)
		}
		if diff := cmp.Diff(got, again, cmp.Comparer(func(a, b identity.Source) bool { return a.String() == b.String() })); diff != "" {
			t.Fatalf("ParseSources round trip mismatch (-first +second):\n%s", diff)
		}
	})
}
