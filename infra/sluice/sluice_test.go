package sluice

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMain(m *testing.M) {
	// jsii warns loudly on every run under Node 20; the tests do not care.
	if os.Getenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION") == "" {
		os.Setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
	}
	os.Exit(m.Run())
}

func TestIdentitySources(t *testing.T) {
	tests := []struct {
		sources string
		want    []string
	}{
		{"", nil},
		{"header:x-api-key", []string{"method.request.header.x-api-key"}},
		{" query:api_key ", []string{"method.request.querystring.api_key"}},
		// More than one source: the authorizer must see requests lacking the
		// first, so API Gateway may require none.
		{"header:x-api-key,query:api_key,apikey,ip", nil},
		{"ip", nil},
		{"apikey", nil},
		{"header:", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, s := range IdentitySources(tt.sources) {
			got = append(got, *s)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("IdentitySources(%q) (-want +got):\n%s", tt.sources, diff)
		}
	}
}

func TestLogicalName(t *testing.T) {
	for in, want := range map[string]string{
		"authorizer":           "Authorizer",
		"admin-rules-get":      "AdminRulesGet",
		"admin-subjects-reset": "AdminSubjectsReset",
	} {
		if got := LogicalName(in); got != want {
			t.Errorf("LogicalName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAssetDir(t *testing.T) {
	if got, want := AssetDir("", "check"), "build/arm64/check"; got != want {
		t.Errorf(`AssetDir("", "check") = %q, want %q`, got, want)
	}
	if got, want := AssetDir("/tmp/a", "check"), "/tmp/a/check"; got != want {
		t.Errorf(`AssetDir("/tmp/a", "check") = %q, want %q`, got, want)
	}
}
