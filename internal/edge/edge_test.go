package edge

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestForwarded(t *testing.T) {
	for _, tt := range []struct {
		xff  []string
		hops int
		want string
	}{
		{[]string{"203.0.113.7"}, 1, "203.0.113.7"},
		{[]string{"198.51.100.1, 203.0.113.7"}, 1, "203.0.113.7"},
		{[]string{"198.51.100.1, 203.0.113.7"}, 2, "198.51.100.1"},
		{[]string{"198.51.100.1", "203.0.113.7"}, 2, "198.51.100.1"}, // one address a line, lines in order
		{[]string{"198.51.100.1,203.0.113.7 , 10.0.0.1"}, 2, "203.0.113.7"},
		{[]string{"203.0.113.7"}, 2, ""},    // fewer addresses than hops
		{[]string{"203.0.113.7"}, 0, ""},    // not read
		{[]string{"not-an-ip"}, 1, ""},      // not an address
		{[]string{"198.51.100.1, "}, 1, ""}, // an empty last item is not skipped
		{[]string{"2001:DB8::1"}, 1, "2001:db8::1"},
		{nil, 1, ""},
	} {
		if got := forwarded(tt.xff, tt.hops); got != tt.want {
			t.Errorf("forwarded(%q, %d) = %q, want %q", tt.xff, tt.hops, got, tt.want)
		}
	}
}

// TestALBQuery: an ALB event's parameters, decoded from the JSON a load
// balancer sends, are read as the backend decodes them.
func TestALBQuery(t *testing.T) {
	for _, tt := range []struct {
		name      string
		multi     bool
		raw       map[string][]string
		wantQuery map[string][]string
	}{
		{"plain", false, map[string][]string{"api_key": {"k1"}}, map[string][]string{"api_key": {"k1"}}},
		{"value encoded", false, map[string][]string{"api_key": {"%6B%31"}}, map[string][]string{"api_key": {"k1"}}},
		{"key encoded", true, map[string][]string{"%61pi_key": {"k%31"}}, map[string][]string{"api_key": {"k1"}}},
		{"plus is a space", true, map[string][]string{"q": {"a+b"}}, map[string][]string{"q": {"a b"}}},
		{"two spellings of one key merge", true, map[string][]string{"api_key": {"a"}, "%61pi_key": {"b"}},
			map[string][]string{"api_key": {"a", "b"}}},
		{"a bad pair is dropped, not the rest", true, map[string][]string{"api_key": {"k"}, "x": {"%zz"}}, map[string][]string{"api_key": {"k"}}},
	} {
		ev := map[string]any{"httpMethod": "get", "path": "/"}
		if tt.multi {
			ev["multiValueQueryStringParameters"] = tt.raw
		} else {
			single := map[string]string{}
			for k, vs := range tt.raw {
				single[k] = vs[0]
			}
			ev["queryStringParameters"] = single
		}
		b, _ := json.Marshal(ev)
		var alb events.ALBTargetGroupRequest
		if err := json.Unmarshal(b, &alb); err != nil {
			t.Fatal(err)
		}
		req := ALB(&alb, 0)
		// Map order: two spellings merge in either order.
		if diff := cmp.Diff(tt.wantQuery, req.MultiQuery, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("%s: MultiQuery (-want +got):\n%s", tt.name, diff)
		}
		// The method as sent: the core canonicalizes it (rules.CanonicalMethod).
		if req.Method != "get" || req.SourceIP != "" {
			t.Errorf("%s: method %q, source IP %q; want get and none (hops 0)", tt.name, req.Method, req.SourceIP)
		}
	}
}

// TestHTTPQuery: a malformed pair does not hide the others, as
// r.URL.Query() serves them to the handler.
func TestHTTPQuery(t *testing.T) {
	r := httptest.NewRequest("GET", "/x?api_key=K&x=%zz&y=1;z=2", nil)
	req := HTTP(r, nil, 0)
	if got, want := req.Query["api_key"], r.URL.Query().Get("api_key"); got != want || got != "K" {
		t.Errorf("HTTP(%s).Query[api_key] = %q; r.URL.Query() serves %q", r.URL, got, want)
	}
	if req.SourceIP != "192.0.2.1" {
		t.Errorf("SourceIP = %q, want httptest's RemoteAddr host", req.SourceIP)
	}
}

func TestRoute(t *testing.T) {
	for _, tt := range []struct{ key, method, wantMethod, wantResource string }{
		{"GET /orders/{id}", "GET", "GET", "/orders/{id}"},
		{"ANY /orders/{id}", "HEAD", "HEAD", "/orders/{id}"},
		{"$default", "POST", "POST", "$default"},
		{"GET /x", "", "GET", "/x"},
	} {
		m, r := route(tt.key, tt.method)
		if m != tt.wantMethod || r != tt.wantResource {
			t.Errorf("route(%q, %q) = %q, %q; want %q, %q", tt.key, tt.method, m, r, tt.wantMethod, tt.wantResource)
		}
	}
}

// FuzzALBQuery: whatever an ALB passes, decoding never panics, and every
// key and value kept is what url.QueryUnescape makes of the pair.
func FuzzALBQuery(f *testing.F) {
	f.Add("api_key", "%6B%31")
	f.Add("%zz", "v")
	f.Add("k", "a+b%")
	f.Fuzz(func(t *testing.T, k, v string) {
		single, multi := decodeALBQuery(map[string]string{k: v}, nil)
		dk, kerr := url.QueryUnescape(k)
		dv, verr := url.QueryUnescape(v)
		if kerr != nil || verr != nil {
			if len(multi) != 0 {
				t.Fatalf("undecodable pair %q=%q kept as %v", k, v, multi)
			}
			return
		}
		if single[dk] != dv || len(multi[dk]) != 1 {
			t.Fatalf("decodeALBQuery(%q=%q) = %v, want %q=%q", k, v, multi, dk, dv)
		}
	})
}

// FuzzForwarded: any header and hop count give "" or a canonical address.
func FuzzForwarded(f *testing.F) {
	f.Add("198.51.100.1, 203.0.113.7", 1)
	f.Add(",,,", 3)
	f.Fuzz(func(t *testing.T, xff string, hops int) {
		got := forwarded(strings.Split(xff, "\n"), hops%8)
		if got != "" && (!utf8.ValidString(got) || strings.ContainsAny(got, ", ")) {
			t.Fatalf("forwarded(%q, %d) = %q", xff, hops, got)
		}
	})
}
