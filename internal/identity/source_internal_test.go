package identity

import "testing"

// TestSubjectAllocations: finding the subject, header case included, does
// not allocate.
func TestSubjectAllocations(t *testing.T) {
	sources := []Source{HeaderSource("x-api-key"), {Kind: SourceQuery, Name: "api_key"}, {Kind: SourceIP}}
	for _, h := range []map[string]string{
		{"x-api-key": "k"}, {"X-Api-Key": "k"}, {"X-API-KEY": "k"}, {"accept": "*/*"},
	} {
		r := &Request{Headers: h, Query: map[string]string{"other": "1"}, SourceIP: "192.0.2.1"}
		if n := testing.AllocsPerRun(100, func() { Subject(sources, r) }); n != 0 {
			t.Errorf("subject(headers %v) allocates %v times, want 0", h, n)
		}
	}
}
