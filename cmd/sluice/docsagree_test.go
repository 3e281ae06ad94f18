package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goBlock is a ```go block of a Markdown document.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestDocsAgreeWithTheTree holds docs to what the tree does where they
// once disagreed: what make test fetches, and one way to install the
// gateway responses of an Authorizer a block builds (its method, which
// uses its RateLimitHeaders; the package function is for one built
// elsewhere).
func TestDocsAgreeWithTheTree(t *testing.T) {
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme := read("../../README.md")
	if mk := read("../../Makefile") + read("../../scripts/testenv.sh"); strings.Contains(mk, "node.sh") && strings.Contains(mk, "dynalite.sh") &&
		!strings.Contains(readme, "fetches Node 22 and dynalite from npm") {
		t.Error("make test installs Node and dynalite from the npm registry (scripts/node.sh, scripts/dynalite.sh); README.md does not say it fetches them")
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range append(docs, "../../README.md") {
		for _, m := range goBlock.FindAllStringSubmatch(read(path), -1) {
			if strings.Contains(m[1], "sluice.NewAuthorizer(") && strings.Contains(m[1], "sluice.AddGatewayResponses(") {
				t.Errorf("%s: a block builds an Authorizer and calls the package's AddGatewayResponses; call the Authorizer's method", filepath.Base(path))
			}
		}
	}
}
