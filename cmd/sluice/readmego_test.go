package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeServiceSnippetCompiles type-checks the README's "Not behind
// API Gateway?" snippet as it is shown, as the body of a main whose only
// other names are the two the prose says examples/service defines:
// getOrder and the Prometheus observer, metrics. (examples/service's test
// keeps each of the snippet's lines in that program.)
func TestReadmeServiceSnippetCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet on a generated program: skipped with -short")
	}
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Not behind API Gateway?")
	if !ok {
		t.Fatal(`README.md has no "## Not behind API Gateway?" section`)
	}
	if !strings.Contains(section[:strings.Index(section, "```go")], "defines `getOrder`") {
		t.Error("the section's prose no longer says where getOrder and metrics come from")
	}
	_, code, _ := strings.Cut(section, "```go\n")
	code, _, _ = strings.Cut(code, "```")
	prog := `package main

import (
	"cmp"
	"context"
	"log"
	"net/http"
	"os"

	"github.com/sluicehq/sluice/ratelimit"
)

// What examples/service defines beside the snippet.
var metrics ratelimit.Observer

func getOrder(http.ResponseWriter, *http.Request) {}

func main() {
` + code + "}\n"
	// Inside the module, so the import resolves to this checkout; "_"
	// keeps it out of ./... patterns.
	dir, err := os.MkdirTemp("../..", "_readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	vet := exec.Command("go", "vet", "./"+filepath.Base(dir))
	vet.Dir = "../.."
	out, err := vet.CombinedOutput()
	if err == nil {
		return
	}
	t.Errorf("the README's service snippet does not compile as shown: %v\n%s\nprogram:\n%s", err, out, prog)
}
