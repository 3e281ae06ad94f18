package identity

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/rules"
)

// TestSubjectAllocations: finding the subject, header case included, does
// not allocate.
func TestSubjectAllocations(t *testing.T) {
	sources := []Source{HeaderSource("x-api-key"), {Kind: SourceQuery, Name: "api_key"}, {Kind: SourceIP}}
	for _, h := range []map[string]string{
		{"x-api-key": "k"}, {"X-Api-Key": "k"}, {"X-API-KEY": "k"}, {"accept": "*/*"},
	} {
		r := &Request{Headers: h, Query: map[string]string{"other": "1"}, SourceIP: "192.0.2.1"}
		if n := testing.AllocsPerRun(100, func() { Find(sources, r) }); n != 0 {
			t.Errorf("subject(headers %v) allocates %v times, want 0", h, n)
		}
	}
}

// FuzzDimensionNameAgrees: identity's check of a DIMENSIONS name (it
// imports nothing of the module) accepts exactly the names a rule's
// "dimension" may hold.
func FuzzDimensionNameAgrees(f *testing.F) {
	for _, s := range []string{"ip", "tenant", "a", "a-b_9", "", "Ip", "9ip", "default", "a b", strings.Repeat("a", 32), strings.Repeat("a", 33), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := validDimension(name), rules.ValidDimension(name); got != want {
			t.Errorf("validDimension(%q) = %v, rules.ValidDimension = %v", name, got, want)
		}
	})
}
