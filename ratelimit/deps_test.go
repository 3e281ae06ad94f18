package ratelimit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// maxDeps bounds the non-standard packages a program that imports
// ratelimit links, this module's own included: what deciding needs (the
// core, go-redis, go-jose, the Lambda event types). It was 218 when the
// package was built through the Lambdas' object graph.
const maxDeps = 60

// TestDeps holds the package's boundary, in the spirit of tailscale's
// tstest/deptest: a service that imports ratelimit, or its Prometheus or
// OpenTelemetry observer, must not link the AWS SDK, a database driver,
// the migration tool or the CDK. Those belong to ratelimit/awsenv, which
// says so. ratelimit itself links no OpenTelemetry, and otelmetrics only
// its API: the service picks the SDK and the exporter.
func TestDeps(t *testing.T) {
	forbidden := []string{"github.com/aws/aws-sdk-go-v2", "github.com/aws/smithy-go", "github.com/jackc/", "github.com/pressly/goose",
		"github.com/aws/aws-cdk-go", "github.com/aws/jsii-runtime-go", "github.com/aws/constructs-go",
		"github.com/sluicehq/sluice/internal/app", "github.com/sluicehq/sluice/internal/config", "github.com/sluicehq/sluice/internal/store/postgres"}
	only := map[string][]string{
		".":             {"go.opentelemetry.io/", "github.com/prometheus/"},
		"./otelmetrics": {"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc", "github.com/prometheus/"},
	}
	for _, pkg := range []string{".", "./prommetrics", "./otelmetrics"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, d := range deps {
			for _, f := range append(forbidden, only[pkg]...) {
				if strings.HasPrefix(d, f) {
					t.Errorf("%s links %s: a service importing it would carry it", pkg, d)
				}
			}
		}
		if pkg == "." && len(deps) > maxDeps {
			t.Errorf("go list -deps ./ratelimit: %d non-standard packages, want at most %d:\n%s", len(deps), maxDeps, strings.Join(deps, "\n"))
		}
	}
}
