package rules

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStdlibOnly keeps rules a pure domain package: it may import the
// standard library and nothing else (DESIGN.md, "Packages").
func TestStdlibOnly(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/sluicehq/sluice/internal/rules" {
			t.Errorf("rules imports %s, want the standard library only", p)
		}
	}
}
