package httpapi_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeaf keeps httpapi a leaf that both APIs can import: the standard
// library and internal/rules (for its field errors), nothing else.
func TestLeaf(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowed := map[string]bool{
		"github.com/sluicehq/sluice/internal/httpapi": true,
		"github.com/sluicehq/sluice/internal/rules":   true,
	}
	for _, p := range strings.Fields(string(out)) {
		if !allowed[p] {
			t.Errorf("httpapi imports %s, want the standard library and internal/rules only", p)
		}
	}
}
