package main

import (
	"os"
	"os/exec"
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

// TestRulesAsCodeLintSample lints rules-as-code.md's own file with
// `limit: 500` mistyped, as its sample says, and wants the sample's lines.
func TestRulesAsCodeLintSample(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/rules-as-code.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	file := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(doc)
	sample := regexp.MustCompile("(?s)\\$ sluice lint -f limits.yaml\n(.*?)\\$ ").FindStringSubmatch(doc)
	if file == nil || sample == nil || !strings.Contains(file[1], "    limit: 500\n") {
		t.Fatal("rules-as-code.md has no yaml file with limit: 500, or no lint sample")
	}
	dir := t.TempDir()
	writeFile(t, dir, "limits.yaml", strings.Replace(file[1], "    limit: 500\n", "    limt: 500\n", 1))
	cmd := exec.Command(sluiceBin, "lint", "-f", "limits.yaml")
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	if string(out) != sample[1] {
		t.Errorf("rules-as-code.md's lint sample:\n%s\nthe binary prints:\n%s", sample[1], out)
	}
}
