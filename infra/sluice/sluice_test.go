package sluice

import (
	"os"
	"strings"
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
		"authorizer":     "Authorizer",
		"admin-read":     "AdminRead",
		"admin-subjects": "AdminSubjects",
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

func TestCacheKey(t *testing.T) {
	tests := []struct {
		name          string
		m             goModule
		wantKey       string
		wantImmutable bool
	}{
		{"released", goModule{Path: ModulePath, Version: "v1.4.0"}, "github.com_sluicehq_sluice@v1.4.0", true},
		{"pseudo-version", goModule{Path: ModulePath, Version: "v0.0.0-20261201000000-abcdef012345"},
			"github.com_sluicehq_sluice@v0.0.0-20261201000000-abcdef012345", true},
		{"replaced by a fork's version", goModule{Path: ModulePath, Version: "v1.4.0",
			Replace: &goModule{Path: "example.com/fork", Version: "v1.4.1"}}, "example.com_fork@v1.4.1", true},
		// A local directory may change between two synths: never reused.
		{"replaced by a directory", goModule{Path: ModulePath, Version: "v1.4.0",
			Replace: &goModule{Path: "../sluice", Dir: "/src/sluice"}}, "local-", false},
		{"the main module", goModule{Path: ModulePath, Main: true, Dir: "/src/sluice"}, "local-", false},
	}
	for _, tt := range tests {
		key, immutable := cacheKey(&tt.m)
		if immutable != tt.wantImmutable || !strings.HasPrefix(key, tt.wantKey) || (!immutable && len(key) != len("local-")+12) {
			t.Errorf("%s: cacheKey = %q, %v; want %q…, %v", tt.name, key, immutable, tt.wantKey, tt.wantImmutable)
		}
	}
	a, _ := cacheKey(&goModule{Main: true, Dir: "/src/a"})
	b, _ := cacheKey(&goModule{Main: true, Dir: "/src/b"})
	if a == b {
		t.Errorf("two checkouts share the cache key %q", a)
	}
}

func TestBuildWithoutGo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := build("authorizer")
	if err == nil || !strings.Contains(err.Error(), "Go toolchain is not on PATH") || !strings.Contains(err.Error(), "AssetDir") {
		t.Errorf("build without go = %v, want an error naming the missing toolchain and AssetDir", err)
	}
}

func TestSecretIsComplete(t *testing.T) {
	const prefix = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:"
	tests := []struct {
		arn  string
		want bool
	}{
		{prefix + "db-AbCdEf", true},
		{prefix + "sluice/db-a1B2c3", true},
		{"arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:db-AbCdEf", true},
		{prefix + "db", false},
		{prefix + "sluice/db", false},
		{prefix + "db-AbCdE", false},         // 5 characters
		{prefix + "db-AbCd_f", false},        // not a letter or digit
		{prefix + "AbCdEfG", false},          // no hyphen
		{prefix + "redis-auth-AbCdEf", true}, // hyphens in the name
		// Ambiguous: a partial ARN whose name ends like a suffix reads as
		// complete (documented: give such a secret's complete ARN).
		{prefix + "db-prod01", true},
	}
	for _, tt := range tests {
		if got := secretSuffix.MatchString(tt.arn); got != tt.want {
			t.Errorf("ImportSecret(%q) imports a complete ARN: %v, want %v", tt.arn, got, tt.want)
		}
	}
}
