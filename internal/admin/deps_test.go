package admin_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoLambdaOrAWS keeps internal/admin free of Lambda and AWS packages
// (as tailscale's deptest does): the same code serves the Lambdas, the local
// gateway and the benchmarks.
func TestNoLambdaOrAWS(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/sluicehq/sluice/internal/admin").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/aws/") {
			t.Errorf("internal/admin depends on %s; Lambda and AWS belong in internal/admin/apigw and functions/", pkg)
		}
	}
}
