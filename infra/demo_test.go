package main

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/headers"
)

// TestDemoHeaders: each demo method's 200 carries the rate-limit fields of
// the stack's RateLimitHeaders, as a REST API sends a header on a 200:
// declared by the method response and mapped by the MOCK integration's
// response from context.authorizer.<key> (sluice verify's "200 with
// RateLimit, RateLimit-Policy"; TestVerifyAWS answers with these fields
// alone).
func TestDemoHeaders(t *testing.T) {
	for _, v := range allVariants() {
		if v == lean {
			continue // no demo API
		}
		_, js := synth(t, v)
		d, err := headers.Parse(variantProps(v).RateLimitHeaders)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{}
		for _, f := range d.Fields() {
			want["method.response.header."+f.Name] = "context.authorizer." + f.Key
		}
		demo := logicalID(t, js, "AWS::ApiGateway::RestApi", "DemoApi")
		n := 0
		for _, m := range resources(js, "AWS::ApiGateway::Method") {
			if !refersTo(m.Props["RestApiId"], demo) || m.Props["HttpMethod"] == "OPTIONS" {
				continue
			}
			n++
			integ, _ := m.Props["Integration"].(map[string]any)
			for _, r := range list(integ["IntegrationResponses"]) {
				got, _ := r.(map[string]any)["ResponseParameters"].(map[string]any)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: %s integration response parameters (-want +got):\n%s", v, m.ID, diff)
				}
			}
			for _, r := range list(m.Props["MethodResponses"]) {
				declared, _ := r.(map[string]any)["ResponseParameters"].(map[string]any)
				if got := slices.Sorted(maps.Keys(declared)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
					t.Errorf("%s: %s method response declares %v, want %v", v, m.ID, got, slices.Sorted(maps.Keys(want)))
				}
			}
		}
		if n != 3 {
			t.Errorf("%s: %d demo methods, want 3 (GET /, GET /hello, ANY /orders/{id})", v, n)
		}
	}
}
