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

// TestSubjectHygiene: the first value found is the subject only when it is
// at most MaxSubjectLen bytes of valid UTF-8; otherwise the request has no
// subject, and no later source stands in for it.
func TestSubjectHygiene(t *testing.T) {
	t.Parallel()
	sources, err := identity.ParseSources("header:x-api-key,ip")
	if err != nil {
		t.Fatal(err)
	}
	atBound := strings.Repeat("k", identity.MaxSubjectLen)
	for _, tc := range []struct {
		name, key string
		want      string
		ok        bool
	}{
		{"plain", "key-1", "key-1", true},
		{"trimmed", "  key-1 ", "key-1", true},
		{"at the bound", atBound, atBound, true},
		{"at the bound once trimmed", " " + atBound + " ", atBound, true},
		{"one byte over", atBound + "k", "", false},
		{"64 KB", strings.Repeat("k", 64<<10), "", false},
		{"invalid UTF-8", "k\xff\xfe", "", false},
		{"hash tags and stars", "{a}*}{", "{a}*}{", true},
		{"absent: the IP", "", "192.0.2.1", true},
	} {
		r := &identity.Request{Headers: map[string]string{"x-api-key": tc.key}, SourceIP: "192.0.2.1"}
		got, _, f := identity.Find(sources, r)
		if got != tc.want || (f == identity.Found) != tc.ok {
			t.Errorf("%s: Find = %.40q, %v; want %.40q, found %v", tc.name, got, f, tc.want, tc.ok)
		}
	}
}

// TestSubjectMultiValued: a subject header or parameter sent twice is
// refused, whichever way the gateway reports it (REST multi-value maps,
// HTTP API's comma join), and never falls back to the IP.
func TestSubjectMultiValued(t *testing.T) {
	t.Parallel()
	sources, err := identity.ParseSources("header:x-api-key,query:api_key,ip")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		r    identity.Request
		want string
		ok   bool
	}{
		{"one header", identity.Request{Headers: map[string]string{"x-api-key": "a"}, MultiHeaders: map[string][]string{"X-Api-Key": {"a"}}}, "a", true},
		{"REST: two header lines", identity.Request{Headers: map[string]string{"x-api-key": "b"}, MultiHeaders: map[string][]string{"X-API-KEY": {"a", "b"}}}, "", false},
		{"HTTP API: joined", identity.Request{Headers: map[string]string{"x-api-key": "a,b"}}, "", false},
		{"HTTP API: joined with space", identity.Request{Headers: map[string]string{"x-api-key": "a, b"}}, "", false},
		{"REST: two parameters", identity.Request{Query: map[string]string{"api_key": "b"}, MultiQuery: map[string][]string{"api_key": {"a", "b"}}}, "", false},
		{"HTTP API: parameters joined", identity.Request{Query: map[string]string{"api_key": "a,b"}}, "", false},
		{"another header twice is fine", identity.Request{Headers: map[string]string{"x-api-key": "a", "accept": "x,y"}, MultiHeaders: map[string][]string{"accept": {"x", "y"}}}, "a", true},
	} {
		tc.r.SourceIP = "192.0.2.1"
		got, _, f := identity.Find(sources, &tc.r)
		if got != tc.want || (f == identity.Found) != tc.ok {
			t.Errorf("%s: Find = %q, %v; want %q, found %v", tc.name, got, f, tc.want, tc.ok)
		}
	}
}

// TestParseUpstreamSubject: principal and context:<key> name an upstream's
// answer, anything else is the middleware's sources, and a context key
// ValidKey refuses is an error.
func TestParseUpstreamSubject(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in      string
		key     string
		ok, err bool
	}{
		{"principal", "", true, false},
		{" Principal ", "", true, false},
		{"context:tenant", "tenant", true, false},
		{"CONTEXT: tenant ", "tenant", true, false},
		{"context:", "", false, true},
		{"context:a b", "", false, true},
		{"principal:x", "", false, false},
		{"principal,header:x-api-key", "", false, false},
		{"header:x-api-key", "", false, false},
		{"", "", false, false},
	} {
		key, ok, err := identity.ParseUpstreamSubject(tt.in)
		if key != tt.key || ok != tt.ok || (err != nil) != tt.err {
			t.Errorf("ParseUpstreamSubject(%q) = %q, %v, %v; want %q, %v, error %v", tt.in, key, ok, err, tt.key, tt.ok, tt.err)
		}
	}
}
