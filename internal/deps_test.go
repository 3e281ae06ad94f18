// Package internal_test holds the one test of who may import what: the
// "may import" column of the package table in DESIGN.md, as a table, in the
// style of tailscale's tstest/deptest.
package internal_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sluicehq/sluice/"

// mayImport lists, for every package of the module (paths relative to the
// module root, "functions/*" standing for every function), the module
// packages and the outside modules (by prefix) it may import directly; the
// standard library is always allowed. A package missing from the table, or
// an entry naming no package, fails the test, so the table and the tree
// move together.
var mayImport = map[string][]string{
	// Wiring: read the environment, build through app, start Lambda. The
	// admin mains name their route constant.
	"functions/*": {"internal/app", "internal/config", "internal/admin", "github.com/aws/aws-lambda-go/lambda",
		// admin-stats builds its Contributor Insights reader itself, so
		// no other function links the CloudWatch SDK.
		"internal/stats/insights"},
	// The CLI: app and below (a client of the admin API, sluice local).
	"cmd/sluice": {"internal/app", "internal/admin", "internal/authorizer/apigw", "internal/config", "internal/headers", "internal/httpapi", "internal/identity",
		"internal/limiter", "internal/rules", "internal/stats", "internal/store", "internal/store/memory", "internal/console",
		"github.com/alicebob/miniredis/v2", "github.com/redis/go-redis/v9", "github.com/google/uuid",
		"github.com/aws/aws-lambda-go/events", "github.com/aws/aws-sdk-go-v2/"},
	"e2e":      {},
	"events":   {},
	"internal": {}, // this test

	// The public package for embedding Sluice in a team's own Go
	// authorizer: built through app like a Lambda, answering through the
	// authorizer's apigw chaining.
	"ratelimit": {"internal/app", "internal/authorizer/apigw", "internal/config", "internal/identity",
		"github.com/aws/aws-lambda-go/events", "github.com/redis/go-redis/v9"},

	// The composition root: everything below.
	"internal/app": {"internal/admin", "internal/admin/apigw", "internal/authorizer", "internal/authorizer/apigw",
		"internal/config", "internal/identity", "internal/limiter", "internal/rules", "internal/store",
		"internal/store/postgres", "internal/store/redissnapshot", "internal/stats",
		"github.com/aws/aws-lambda-go/", "github.com/jackc/pgx/v5", "github.com/redis/go-redis/v9"},
	// Environment → Config, and the clients. It parses SUBJECT_SOURCES and
	// DEFAULT_LIMIT with the domain's own parsers, so it may import those
	// two leaves.
	"internal/config": {"internal/headers", "internal/identity", "internal/rules",
		"github.com/redis/go-redis/v9", "github.com/jackc/pgx/v5", "github.com/aws/aws-sdk-go-v2/"},

	// The domain: no Lambda, no AWS.
	"internal/authorizer":       {"internal/rules", "internal/limiter", "internal/identity"},
	"internal/authorizer/apigw": {"internal/authorizer", "internal/headers", "internal/identity", "internal/limiter", "internal/rules", "internal/httpapi", "internal/stats", "github.com/aws/aws-lambda-go/events"},
	"internal/identity":         {"github.com/go-jose/go-jose/v4", "github.com/hashicorp/golang-lru/v2"},
	"internal/headers":          {},
	"internal/admin":            {"internal/rules", "internal/store", "internal/limiter", "internal/httpapi", "internal/stats", "internal/console"},
	"internal/admin/apigw":      {"internal/admin", "internal/httpapi", "github.com/aws/aws-lambda-go/events"},
	"internal/httpapi":          {"internal/rules"},
	"internal/rules":            {},
	// An applied rule's bucket (BucketFor) is the limiter's, so its keys
	// cannot drift apart between the authorizer and the admin API.
	"internal/limiter": {"internal/rules", "github.com/redis/go-redis/v9", "github.com/hashicorp/golang-lru/v2"},
	// The web console's embedded files: knows nothing of AWS or the API.
	"internal/console": {},
	// Rolling decision counts (sluice local's GET /stats): a leaf.
	"internal/stats": {},
	// GET /stats on AWS: Contributor Insights reports, in stats' shape.
	"internal/stats/insights": {"internal/stats", "github.com/aws/aws-sdk-go-v2/"},

	// Stores.
	"internal/store":                 {"internal/rules"},
	"internal/store/input":           {"internal/rules", "github.com/google/uuid"},
	"internal/store/memory":          {"internal/rules", "internal/store", "internal/store/input", "github.com/google/uuid"},
	"internal/store/postgres":        {"internal/rules", "internal/store", "internal/store/input", "migrations", "github.com/jackc/pgx/v5", "github.com/pressly/goose/v3"},
	"internal/store/postgres/pgtest": {"internal/store/postgres", "internal/testenv", "github.com/jackc/pgx/v5"},
	"internal/store/redissnapshot":   {"internal/rules", "github.com/redis/go-redis/v9"},
	"internal/store/storetest":       {"internal/rules", "internal/store", "github.com/google/go-cmp/", "github.com/google/uuid"},
	"internal/testenv":               {"github.com/redis/go-redis/v9"},
	"migrations":                     {},

	// The CDK app and the construct derive the admin API from admin's
	// route table (and the Contributor Insights rule names from insights). The app records its cdk-nag suppressions.
	"infra": {"infra/sluice", "internal/admin", "internal/stats/insights", "github.com/aws/aws-cdk-go/", "github.com/aws/constructs-go/", "github.com/aws/jsii-runtime-go",
		"github.com/cdklabs/cdk-nag-go/"},
	"infra/sluice": {"internal/admin", "internal/headers", "github.com/aws/aws-cdk-go/", "github.com/aws/constructs-go/", "github.com/aws/jsii-runtime-go"},
}

// domain packages know nothing of Lambda or AWS, not even through what they
// import (DESIGN.md): the same code serves the Lambdas, sluice local and
// the benchmarks.
var domain = []string{"internal/rules", "internal/limiter", "internal/identity", "internal/headers",
	"internal/authorizer", "internal/admin", "internal/store", "internal/httpapi", "internal/stats"}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Standard   bool
}

func TestImports(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-json=ImportPath,Imports,Deps,Standard", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listed{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		if rel, ok := strings.CutPrefix(p.ImportPath, module); ok && !p.Standard {
			pkgs[rel] = p
		}
	}
	standard := func(path string) bool { return !hostPath(path) }

	used := map[string]bool{}
	for rel, p := range pkgs {
		key := rel
		if strings.HasPrefix(rel, "functions/") {
			key = "functions/*"
		}
		allowed, ok := mayImport[key]
		if !ok {
			t.Errorf("%s is not in the table: add it with what it may import (and to DESIGN.md's table)", rel)
			continue
		}
		used[key] = true
		for _, imp := range p.Imports {
			if standard(imp) || imp == p.ImportPath {
				continue
			}
			target := strings.TrimPrefix(imp, module)
			if !slices.ContainsFunc(allowed, func(a string) bool { return allows(a, target) }) {
				t.Errorf("%s imports %s, which the table does not allow", rel, target)
			}
		}
	}
	for key := range mayImport {
		if !used[key] {
			t.Errorf("the table names %s, which is no package of the module", key)
		}
	}
	for _, rel := range domain {
		for _, dep := range pkgs[rel].Deps {
			if strings.HasPrefix(dep, "github.com/aws/") {
				t.Errorf("%s depends on %s; Lambda and AWS belong in the adapters (apigw), app and functions", rel, dep)
			}
		}
	}
}

// hostPath reports whether an import path starts with a host name, as
// outside modules do and the standard library and module-relative paths
// don't.
func hostPath(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return strings.Contains(first, ".")
}

// allows reports whether the table entry a admits the import target: a
// package of this module only by its exact path; an outside module with
// its packages ("github.com/jackc/pgx/v5" admits .../pgxpool); an entry
// ending in "/" everything below it.
func allows(a, target string) bool {
	switch {
	case !hostPath(a):
		return target == a
	case strings.HasSuffix(a, "/"):
		return strings.HasPrefix(target, a)
	}
	return target == a || strings.HasPrefix(target, a+"/")
}
