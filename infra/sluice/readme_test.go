package sluice_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadmeSnippetIsTheExample keeps the "Attach Sluice to your own API"
// snippet of README.md and docs/deploy.md and Example (which runs) the same
// code: every line of a snippet must appear, in order, in example_test.go,
// and their statements must be the same, so a line dropped from either side
// fails too. The asset directory differs (the docs point at `make build`
// output, the Example at testdata), and a snippet ends with app.Synth where
// the Example inspects the template.
func TestReadmeSnippetIsTheExample(t *testing.T) {
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"README.md", "docs/deploy.md"} {
		t.Run(doc, func(t *testing.T) { checkSnippet(t, doc, string(example)) })
	}
}

func checkSnippet(t *testing.T, doc, example string) {
	readme, err := os.ReadFile("../../" + doc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Attach Sluice to your own API")
	if !ok {
		t.Fatalf(`%s has no "## Attach Sluice to your own API" section`, doc)
	}
	_, code, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatalf("the %s section has no ```go block", doc)
	}
	code, _, _ = strings.Cut(code, "```")

	want := strings.Split(example, "\n")
	next := 0
	for _, line := range codeLines(code) {
		found := false
		for ; next < len(want); next++ {
			if strings.TrimSpace(want[next]) == line {
				found, next = true, next+1
				break
			}
		}
		if !found {
			t.Fatalf("%s snippet line %q is not in example_test.go (in order); keep the two in step", doc, line)
		}
	}

	// The statements: the snippet after its imports, the Example's body up
	// to where it inspects the template.
	_, snippet, _ := strings.Cut(code, "\n)\n")
	_, body, _ := strings.Cut(example, "func Example() {\n")
	body, _, _ = strings.Cut(body, "template := app.Synth(nil)")
	if diff := cmp.Diff(codeLines(body), codeLines(snippet)); diff != "" {
		t.Errorf("%s snippet statements differ from Example's (-example +%s):\n%s", doc, doc, diff)
	}
}

// codeLines returns the trimmed lines of code that the README and the
// Example must share: no blank lines, no AssetDir, no final app.Synth.
func codeLines(code string) []string {
	var out []string
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "AssetDir:") || line == "app.Synth(nil)" {
			continue
		}
		out = append(out, line)
	}
	return out
}
